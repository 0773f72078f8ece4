package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// Row is one measured (or derived) row of the table.
type Row struct {
	Case   Case
	Result testing.BenchmarkResult
	// Failure is why the case produced no result.
	Failure string
	// Figure is the row's figure in Unit; HasFigure is false when there
	// is none.
	Figure    float64
	HasFigure bool
	Unit      string
	// Ratio is ns/op over the native baseline's, for redaction rows.
	Ratio float64
}

// Run runs every case whose name matches filter (all if nil) with
// testing.Benchmark and returns the rows in table order. progress, if not
// nil, gets one line per case as it finishes.
func Run(filter *regexp.Regexp, progress io.Writer) []Row {
	cases := Cases()
	results := map[string]testing.BenchmarkResult{}
	var rows []Row
	for _, c := range cases {
		if filter != nil && !filter.MatchString(c.Name) {
			continue
		}
		row := Row{Case: c}
		if c.Run != nil {
			lastFailure.Store(nil)
			start := time.Now()
			row.Result = testing.Benchmark(c.Run)
			if row.Result.N == 0 {
				row.Failure = "failed"
				if msg := lastFailure.Load(); msg != nil {
					row.Failure = *msg
				}
			}
			results[c.Name] = row.Result
			if progress != nil {
				fmt.Fprintf(progress, "%-28s %12s  (%s)\n", c.Name, nsPerOp(row.Result), time.Since(start).Round(time.Millisecond))
			}
		}
		rows = append(rows, row)
	}
	base, hasBase := results["redact/native-json"]
	for i := range rows {
		r := &rows[i]
		c := r.Case
		r.Unit = c.Unit
		if c.Target != nil {
			r.Unit = c.Target.Unit
		}
		if r.Unit == "" {
			r.Unit = "µs"
		}
		switch {
		case c.Figure != nil:
			r.Figure, r.HasFigure = c.Figure(r.Result, results)
		case r.Result.N > 0:
			r.Figure, r.HasFigure = float64(r.Result.T.Nanoseconds())/float64(r.Result.N)/1e3, true
		}
		if c.Native && hasBase && base.N > 0 && r.Result.N > 0 {
			r.Ratio = perOp(r.Result) / perOp(base)
		}
	}
	return rows
}

func perOp(r testing.BenchmarkResult) float64 {
	return float64(r.T.Nanoseconds()) / float64(r.N)
}

func nsPerOp(r testing.BenchmarkResult) string {
	if r.N == 0 {
		return "-"
	}
	ns := perOp(r)
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.0f", ns)
	case ns >= 100:
		return fmt.Sprintf("%.0f", ns)
	}
	return fmt.Sprintf("%.1f", ns)
}

// Verdict says whether the row meets its target, and by how much it misses.
func (r Row) Verdict() string {
	t := r.Case.Target
	if t == nil {
		return ""
	}
	if !r.HasFigure {
		return "no result"
	}
	if t.AtLeast {
		if r.Figure >= t.Value {
			return "met"
		}
		return fmt.Sprintf("MISSED by %s (%.0f%% of target)", fmtFigure(t.Value-r.Figure, t.Unit), 100*r.Figure/t.Value)
	}
	if r.Figure <= t.Value {
		return "met"
	}
	if t.Value == 0 {
		return fmt.Sprintf("MISSED by %s", fmtFigure(r.Figure, t.Unit))
	}
	return fmt.Sprintf("MISSED by %s (%.2fx target)", fmtFigure(r.Figure-t.Value, t.Unit), r.Figure/t.Value)
}

func fmtFigure(v float64, unit string) string {
	switch unit {
	case "allocs":
		return fmt.Sprintf("%.0f allocs", v)
	case "x":
		return fmt.Sprintf("%.2fx", v)
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

func fmtTarget(t *Target) string {
	if t == nil {
		return ""
	}
	op := "≤"
	if t.AtLeast {
		op = "≥"
	}
	return op + " " + fmtFigure(t.Value, t.Unit)
}

// Machine describes where the table was produced.
func Machine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s, %d CPUs (GOMAXPROCS %d), %s", goruntime.Version(), goruntime.GOOS, goruntime.GOARCH,
		goruntime.NumCPU(), goruntime.GOMAXPROCS(0), cpuModel())
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/tetratelabs/wazero", "github.com/extism/go-sdk":
				fmt.Fprintf(&b, ", %s %s", d.Path[strings.LastIndex(d.Path[:strings.LastIndex(d.Path, "/")], "/")+1:], d.Version)
			}
		}
	}
	return b.String()
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// Print writes the rows as one Markdown table, then the legend.
func Print(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "machine: %s\n", Machine())
	fmt.Fprintf(w, "date:    %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintln(w, "| case | ns/op | allocs/op | B/op | vs native | figure | target | result |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
	for _, r := range rows {
		ns, allocs, bytes := "", "", ""
		if r.Case.Run != nil {
			ns = nsPerOp(r.Result)
			if r.Result.N > 0 {
				allocs = fmt.Sprint(r.Result.AllocsPerOp())
				bytes = fmt.Sprint(r.Result.AllocedBytesPerOp())
			}
		}
		ratio := ""
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		fig := ""
		if r.HasFigure {
			fig = fmtFigure(r.Figure, r.Unit)
		}
		verdict := r.Verdict()
		if r.Failure != "" {
			verdict = "FAILED: " + strings.ReplaceAll(firstLine(r.Failure), "|", "/")
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Case.Name, ns, allocs, bytes, ratio, fig, fmtTarget(r.Case.Target), verdict)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "- %s: %s\n", r.Case.Name, r.Case.What)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
