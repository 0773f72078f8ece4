package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// testSynopsis is test's synopsis, in its usage and the top-level one.
const testSynopsis = `  wasmhooks test [--hook FILE.wasm] [--run SUBSTR] [--fuel N] [--timeout D] [--update] [--cache-dir DIR] DIR
`

const testUsage = "usage:\n" + testSynopsis + `
Runs a hook over a folder of cases, one JSON file per case (DIR/*.json), through
the real runtime, with each case's capability replies mocked, and reports each
case whose decision differs from the expected one with a diff. Exit 0 when every
case passes, 1 when one fails, 2 for bad flags or an unreadable case.

A case (the format of testdata/corpus too):

  {
    "name": "aws key",                       // optional; default: the file's name
    "point": "message.outbound",             // the hook point
    "context": {"outgoing": "key AKIA..."},  // the traffic the hook sees
    "settings": {"...": "..."},              // optional: the hook's settings
    "grants": ["llm.run"],                   // optional: without it every capability is granted
    "replies": {"llm.run": {"status": 0, "body": {"text": "..."}}},
    "want": {"action": "modify", "context": {"outgoing": "key [REDACTED] ok"}, "reason": "..."},
    "want_failure": false                    // true: the hook must fail (no "want")
  }

A host call to a capability not in "grants" is answered 3 (denied); one with no
mocked reply 1 (unknown_capability), except log.write, answered {} (its lines
are printed with a failure). The settings reach the hook as they are: the
manifest's settings_schema is not applied (a chain applies it when it is built,
and refuses the configuration). --update rewrites each case's "want" with the
hook's decision: review the diff.
`

// hookCase is one case file: the format of `wasmhooks test` and of the
// shared corpus (testdata/corpus, hooks-examples/corpus_test.go).
type hookCase struct {
	Name     string               `json:"name,omitempty"`
	Point    string               `json:"point"`
	Context  map[string]any       `json:"context"`
	Settings map[string]any       `json:"settings,omitempty"`
	Grants   *[]string            `json:"grants,omitempty"` // nil: every capability; [] none
	Replies  map[string]caseReply `json:"replies,omitempty"`
	Want     json.RawMessage      `json:"want,omitempty"`
	Failure  bool                 `json:"want_failure,omitempty"`
	file     string
	index    int
}

// caseReply is a mocked capability reply: a status and its body (the
// result, or for a non-zero status the error object).
type caseReply struct {
	Status abi.Status      `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// caseCaller answers a case's host calls from its mocked replies.
type caseCaller struct {
	c    *hookCase
	mu   sync.Mutex
	logs []string
}

func (m *caseCaller) HostCall(_ context.Context, call *abi.Call) abi.Reply {
	if m.c.Grants != nil && !slices.Contains(*m.c.Grants, call.Name) {
		return abi.ErrorReply(abi.StatusDenied, call.Name+" is not in the case's grants")
	}
	if r, ok := m.c.Replies[call.Name]; ok {
		return abi.Reply{Status: r.Status, Body: r.Body}
	}
	if call.Name == "log.write" {
		m.mu.Lock()
		m.logs = append(m.logs, string(call.Payload))
		m.mu.Unlock()
		return abi.Reply{Status: abi.StatusOK, Body: []byte("{}")}
	}
	return abi.ErrorReply(abi.StatusUnknownCapability, "the case has no mocked reply for "+call.Name)
}

func cmdTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var (
		hookPath = fs.String("hook", "", "the hook module (.wasm) (default: DIR/../hook.wasm or DIR/hook.wasm, what `wasmhooks new`'s Makefile builds)")
		only     = fs.String("run", "", "run only the cases whose name or file contains this")
		fuel     = fs.Uint64("fuel", 0, "fuel budget of each case (default 400000000)")
		timeout  = fs.Duration("timeout", 0, "wall-clock limit of each case (default 2s)")
		update   = fs.Bool("update", false, "rewrite each case's \"want\" with the hook's decision")
		cacheDir = fs.String("cache-dir", defaultCacheDir(), "wazero's compilation cache directory; empty disables it")
	)
	if code, ok := parseFlags(fs, reorderArgs(fs, args), testUsage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, "wasmhooks test: one folder of cases is required\n"+testUsage)
		return exitUsage
	}
	dir := fs.Arg(0)
	if *hookPath == "" {
		for _, p := range []string{filepath.Join(dir, "..", "hook.wasm"), filepath.Join(dir, "hook.wasm")} {
			if _, err := os.Stat(p); err == nil {
				*hookPath = p
				break
			}
		}
		if *hookPath == "" {
			fmt.Fprintf(stderr, "wasmhooks test: no --hook, and neither %s nor %s exists (run make first?)\n",
				filepath.Join(dir, "..", "hook.wasm"), filepath.Join(dir, "hook.wasm"))
			return exitUsage
		}
	}
	cases, err := loadCases(dir)
	if err != nil {
		fmt.Fprintf(stderr, "wasmhooks test: %v\n", err)
		return exitUsage
	}
	wasm, err := runtime.ReadModuleFile(*hookPath, 0)
	if err != nil {
		fmt.Fprintf(stderr, "wasmhooks test: %v\n", err)
		return exitRefused
	}
	pruneCache(*cacheDir, maxCacheBytes)
	rt, err := runtime.New(ctx, runtime.Config{CacheDir: *cacheDir})
	if err != nil {
		fmt.Fprintf(stderr, "wasmhooks test: %v\n", err)
		return exitRefused
	}
	defer rt.Close(ctx)
	mod, err := rt.Load(ctx, wasm)
	if err != nil {
		fmt.Fprintf(stderr, "wasmhooks test: the host refused %s: %v\n", *hookPath, err)
		return exitRefused
	}
	passed, failed := 0, 0
	for _, c := range cases {
		if *only != "" && !strings.Contains(c.Name, *only) && !strings.Contains(c.file, *only) {
			continue
		}
		msg := runHookCase(ctx, rt, mod, c, runtime.Limits{Fuel: *fuel, Timeout: *timeout}, *update)
		if msg == "" {
			passed++
			continue
		}
		failed++
		fmt.Fprintf(stdout, "--- FAIL: %s (%s)\n%s\n", c.Name, c.file, indent(msg))
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "FAIL: %d of %d cases failed (%s)\n", failed, passed+failed, *hookPath)
		return exitRefused
	}
	fmt.Fprintf(stdout, "ok: %d cases pass (%s)\n", passed, *hookPath)
	return exitOK
}

// reorderArgs lets the folder come before the flags (`wasmhooks test cases
// --hook h.wasm`), as the flag package stops at the first positional one.
func reorderArgs(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && i+1 < len(args) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				continue
			}
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(flags, pos...)
}

// loadCases reads DIR/*.json, strictly: an unknown field is an error, so a
// misspelt "want" never makes a case pass vacuously.
func loadCases(dir string) ([]*hookCase, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no cases (*.json) in %s", dir)
	}
	sort.Strings(files)
	cases := make([]*hookCase, 0, len(files))
	for _, f := range files {
		c, err := readCase(f)
		if err != nil {
			return nil, err
		}
		c.index = len(cases)
		cases = append(cases, c)
	}
	return cases, nil
}

func readCase(file string) (*hookCase, error) {
	b, err := runtime.ReadFileLimit(file, abi.DefaultMaxJSONBytes, "case_bytes")
	if err != nil {
		return nil, err
	}
	c := &hookCase{file: file}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	d.DisallowUnknownFields()
	if err := d.Decode(c); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if c.Name == "" {
		c.Name = strings.TrimSuffix(filepath.Base(file), ".json")
	}
	if c.Point == "" {
		c.Point = "message.outbound"
	}
	if err := checkPoint(c.Point); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if c.Failure && len(c.Want) > 0 {
		return nil, fmt.Errorf("%s: a case has \"want\" or \"want_failure\", not both", file)
	}
	return c, nil
}

// runHookCase runs one case and returns "" when it passes, else what went
// wrong (a diff of the decisions).
func runHookCase(ctx context.Context, rt *runtime.Runtime, mod *runtime.Module, c *hookCase, limits runtime.Limits, update bool) string {
	caller := &caseCaller{c: c}
	var grants []string
	if c.Grants != nil {
		grants = *c.Grants
	}
	// Each case is its own hook (binding) to the runtime, so no warm
	// instance carries one case's state (say, patterns compiled from its
	// settings) into the next, as in a chain where bindings differ.
	res, err := rt.Invoke(ctx, mod, runtime.Request{
		Tenant: "test", Hook: "case-" + strconv.Itoa(c.index), Point: c.Point, Context: c.Context, Settings: c.Settings,
		Grants: grants, Limits: limits, HostCaller: caller,
	})
	if res == nil {
		return fmt.Sprintf("the invocation failed: %v", err)
	}
	logs := caseLogs(res, caller)
	if c.Failure {
		if res.Failure == nil {
			got, _ := res.Decision.Encode()
			return fmt.Sprintf("decided %s, want a hook failure%s", got, logs)
		}
		return ""
	}
	if res.Failure != nil {
		return fmt.Sprintf("the hook failed: %s: %s%s", res.Failure.Code, res.Failure.Message, logs)
	}
	got, err := res.Decision.Encode()
	if err != nil {
		return err.Error()
	}
	if update {
		c.Want = got
		if err := writeHookCase(c); err != nil {
			return err.Error()
		}
		return ""
	}
	if len(c.Want) == 0 {
		return fmt.Sprintf("the case has no \"want\" (the hook decided %s; --update writes it)", got)
	}
	p, _ := abi.LookupPoint(c.Point)
	wd, err := abi.DecodeDecision(c.Want, p, abi.JSONLimits{})
	if err != nil {
		return fmt.Sprintf("the case's \"want\" is not a decision at %s: %v", c.Point, err)
	}
	want, err := wd.Encode()
	if err != nil {
		return err.Error()
	}
	if bytes.Equal(got, want) {
		return ""
	}
	return "decision differs (- want, + got):\n" + jsonDiff(want, got) + logs
}

func caseLogs(res *runtime.Result, caller *caseCaller) string {
	var b strings.Builder
	for _, l := range res.Logs {
		fmt.Fprintf(&b, "\n%s: %s", l.Stream, l.Text)
	}
	for _, l := range caller.logs {
		fmt.Fprintf(&b, "\nlog.write: %s", l)
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nthe hook's output:" + b.String()
}

func writeHookCase(c *hookCase) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(c); err != nil {
		return err
	}
	return os.WriteFile(c.file, buf.Bytes(), 0o644)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// jsonDiff is a line diff of two JSON documents, indented: "-" lines are
// a's, "+" lines b's, "  " lines both's.
func jsonDiff(a, b []byte) string {
	al, bl := prettyLines(a), prettyLines(b)
	// Longest common subsequence, quadratic: a decision too long for it
	// (up to the output limit) is shown whole instead.
	n, m := len(al), len(bl)
	if n*m > maxDiffCells {
		return "- " + string(a) + "\n+ " + string(b)
	}
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && al[i] == bl[j]:
			out = append(out, "  "+al[i])
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "- "+al[i])
			i++
		default:
			out = append(out, "+ "+bl[j])
			j++
		}
	}
	return strings.Join(out, "\n")
}

// maxDiffCells bounds jsonDiff's table (lines of want × lines of got).
const maxDiffCells = 1 << 20

func prettyLines(b []byte) []string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return strings.Split(string(b), "\n")
	}
	return strings.Split(buf.String(), "\n")
}
