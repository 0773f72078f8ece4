// Package hookcase is the one definition of a hook test case: the format of
// `wasmhooks test` (cmd/wasmhooks/test.go) and of the shared corpus every
// language's build of the example hooks must pass (testdata/corpus,
// hooks-examples/corpus_test.go). It reads and writes case files, answers a
// case's host calls from its mocked replies, and runs a case through the
// real runtime, the hook's settings checked against its manifest's
// settings_schema first (by chain.ValidateSettings, passed in), as a chain
// checks a binding's.
package hookcase

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// DefaultPoint is a case's point when it names none.
const DefaultPoint = "message.outbound"

// Case is one case file (DIR/*.json). A Case is not safe for concurrent
// use; Run only reads it.
type Case struct {
	// Name defaults to the file's name without ".json".
	Name string `json:"name,omitempty"`
	// Point defaults to DefaultPoint.
	Point   string         `json:"point"`
	Context map[string]any `json:"context"`
	// Settings are checked against the manifest's settings_schema before
	// the hook runs, as a chain checks a binding's, unless
	// UncheckedSettings is set.
	Settings map[string]any `json:"settings,omitempty"`
	// UncheckedSettings hands Settings to the hook without the schema: for
	// a case that tests the hook's own checks of settings a chain would
	// refuse (defence in depth).
	UncheckedSettings bool `json:"unchecked_settings,omitempty"`
	// Grants: nil grants every capability; an empty list none.
	Grants  *[]string        `json:"grants,omitempty"`
	Replies map[string]Reply `json:"replies,omitempty"`
	// Want is the expected decision; Failure expects the hook to fail.
	Want    json.RawMessage `json:"want,omitempty"`
	Failure bool            `json:"want_failure,omitempty"`
	// File is where the case was read from (Write writes it there).
	File string `json:"-"`
}

// Reply is a mocked capability reply: a status and its body (the result,
// or for a non-zero status the error object).
type Reply struct {
	Status abi.Status      `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// Load reads DIR/*.json in file-name order.
func Load(dir string) ([]*Case, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no cases (*.json) in %s", dir)
	}
	sort.Strings(files)
	cases := make([]*Case, 0, len(files))
	for _, f := range files {
		c, err := Read(f)
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// Read reads one case file, strictly: an unknown field is an error, so a
// misspelt "want" never makes a case pass vacuously. Numbers stay
// json.Number, as the host's own JSON reader leaves them.
func Read(file string) (*Case, error) {
	b, err := runtime.ReadFileLimit(file, abi.DefaultMaxJSONBytes, "case_bytes")
	if err != nil {
		return nil, err
	}
	c := &Case{File: file}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	d.DisallowUnknownFields()
	if err := d.Decode(c); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: more than one JSON value (a case file holds one object)", file)
	}
	if c.Name == "" {
		c.Name = strings.TrimSuffix(filepath.Base(file), ".json")
	}
	if c.Point == "" {
		c.Point = DefaultPoint
	}
	if _, ok := abi.LookupPoint(c.Point); !ok {
		names := make([]string, 0, 10)
		for _, p := range abi.Points() {
			names = append(names, p.Name)
		}
		return nil, fmt.Errorf("%s: unknown hook point %q (the points are %s)", file, c.Point, strings.Join(names, ", "))
	}
	if c.Failure && len(c.Want) > 0 {
		return nil, fmt.Errorf("%s: a case has \"want\" or \"want_failure\", not both", file)
	}
	return c, nil
}

// Write writes c back to its file, indented, as Read reads it.
func (c *Case) Write() error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(c); err != nil {
		return err
	}
	return os.WriteFile(c.File, buf.Bytes(), 0o644)
}

// Caller answers a case's host calls: a capability not in the case's
// grants is denied (3), one with a mocked reply gets it, log.write without
// one is answered {} and its line kept, anything else is unknown (1). It
// is safe for concurrent use by multiple goroutines.
type Caller struct {
	c *Case
	// mu guards calls and logs.
	mu    sync.Mutex
	calls []string
	logs  []string
}

// NewCaller returns the Caller of c.
func NewCaller(c *Case) *Caller { return &Caller{c: c} }

// HostCall answers one host call (runtime.HostCaller).
func (m *Caller) HostCall(_ context.Context, call *abi.Call) abi.Reply {
	m.mu.Lock()
	m.calls = append(m.calls, call.Name)
	m.mu.Unlock()
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

// Calls returns the capabilities called so far, in order.
func (m *Caller) Calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// Outcome is what running a case gave.
type Outcome struct {
	// Got is the hook's decision in canonical form; nil when the hook
	// failed or did not run.
	Got []byte
	// Problem is "" when the case passes, else what went wrong.
	Problem string
	// Result is the runtime's (nil when the hook did not run).
	Result *runtime.Result
}

// SettingsCheck checks settings against a manifest's settings_schema:
// chain.ValidateSettings, which the caller passes (only the composition
// root imports chain, internal/archtest).
type SettingsCheck func(m *abi.Manifest, settings map[string]any) error

// Run runs c through rt on mod. hook is the runtime's name of the binding
// (a warm instance is kept per hook name, so give each case its own when
// settings differ between cases, as bindings differ in a chain). manifest
// is the hook's (nil: the one embedded in mod; none: settings unchecked).
// A case whose settings check refuses (chain.ValidateSettings, as a chain
// checks a binding's) fails without running, naming the case, unless it
// sets unchecked_settings.
func Run(ctx context.Context, rt *runtime.Runtime, mod *runtime.Module, c *Case, hook string, manifest *abi.Manifest, check SettingsCheck, limits runtime.Limits) Outcome {
	if manifest == nil {
		manifest = mod.Manifest()
	}
	if manifest != nil && !c.UncheckedSettings {
		if check == nil {
			return Outcome{Problem: "hookcase.Run without a settings check"}
		}
		if err := check(manifest, c.Settings); err != nil {
			return Outcome{Problem: fmt.Sprintf("case %q (%s): the settings are refused as a chain would refuse them: %v "+
				"(set \"unchecked_settings\": true to hand them to the hook anyway)", c.Name, c.File, err)}
		}
	}
	caller := NewCaller(c)
	var grants []string
	if c.Grants != nil {
		grants = *c.Grants
	}
	res, err := rt.Invoke(ctx, mod, runtime.Request{
		Tenant: "test", Hook: hook, Point: c.Point, Context: c.Context, Settings: c.Settings,
		Grants: grants, Limits: limits, HostCaller: caller,
	})
	if res == nil {
		return Outcome{Problem: fmt.Sprintf("the invocation failed: %v", err)}
	}
	out := Outcome{Result: res}
	logs := hookLogs(res, caller)
	if res.Failure != nil {
		if !c.Failure {
			out.Problem = fmt.Sprintf("the hook failed: %s: %s%s", res.Failure.Code, res.Failure.Message, logs)
		}
		return out
	}
	got, err := res.Decision.Encode()
	if err != nil {
		out.Problem = err.Error()
		return out
	}
	out.Got = got
	if c.Failure {
		out.Problem = fmt.Sprintf("decided %s, want a hook failure%s", got, logs)
		return out
	}
	want, err := c.CanonicalWant()
	if err != nil {
		out.Problem = fmt.Sprintf("%v (the hook decided %s)", err, got)
		return out
	}
	if !bytes.Equal(got, want) {
		out.Problem = "decision differs (- want, + got):\n" + Diff(want, got) + logs
	}
	return out
}

// CanonicalWant returns the case's expected decision in canonical form.
func (c *Case) CanonicalWant() ([]byte, error) {
	if len(c.Want) == 0 {
		return nil, fmt.Errorf("the case has no \"want\" (--update writes it)")
	}
	p, ok := abi.LookupPoint(c.Point)
	if !ok {
		return nil, fmt.Errorf("unknown point %q", c.Point)
	}
	d, err := abi.DecodeDecision(c.Want, p, abi.JSONLimits{})
	if err != nil {
		return nil, fmt.Errorf("the case's \"want\" is not a decision at %s: %w", c.Point, err)
	}
	return d.Encode()
}

func hookLogs(res *runtime.Result, caller *Caller) string {
	var b strings.Builder
	for _, l := range res.Logs {
		fmt.Fprintf(&b, "\n%s: %s", l.Stream, l.Text)
	}
	caller.mu.Lock()
	for _, l := range caller.logs {
		fmt.Fprintf(&b, "\nlog.write: %s", l)
	}
	caller.mu.Unlock()
	if b.Len() == 0 {
		return ""
	}
	return "\nthe hook's output:" + b.String()
}

// Diff is a line diff of two JSON documents, indented: "-" lines are a's,
// "+" lines b's, "  " lines both's.
func Diff(a, b []byte) string {
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

// maxDiffCells bounds Diff's table (lines of a × lines of b).
const maxDiffCells = 1 << 20

func prettyLines(b []byte) []string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return strings.Split(string(b), "\n")
	}
	return strings.Split(buf.String(), "\n")
}
