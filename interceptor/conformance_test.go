package interceptor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The adapter of the MCP interceptors conformance suite (ADAPTER.md:
// createSession, list, invoke, chain) over the MCP server, through a client
// of the official SDK (what the server puts on the wire is what is
// compared), and the replay of its fixtures.

// conformanceDir is where the fixtures are: $MCP_CONFORMANCE_DIR, else the
// copy of the suite's protocol fixtures in testdata (a clean clone has no
// ../shared; the copy is byte-identical to the suite's).
func conformanceDir() string {
	if d := os.Getenv("MCP_CONFORMANCE_DIR"); d != "" {
		return d
	}
	return filepath.Join("testdata", "conformance")
}

type fixture struct {
	ID           string            `json:"id"`
	Kind         string            `json:"kind"`
	Requirement  string            `json:"requirement"`
	Description  string            `json:"description"`
	Interceptors []fixtureHook     `json:"interceptors"`
	Steps        []json.RawMessage `json:"steps"`
	Volatile     []string          `json:"volatile"`
}

type fixtureHook struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Behavior string   `json:"behavior"`
	Events   []string `json:"events"`
	Phases   string   `json:"phases"`
	Mode     string   `json:"mode"`
	FailOpen bool     `json:"failOpen"`
}

type step struct {
	Op      string             `json:"op"`
	Event   *string            `json:"event"`
	Phase   string             `json:"phase"`
	Payload any                `json:"payload"`
	Context *InvocationContext `json:"context"`
	Params  *InvokeParams      `json:"params"`
	Expect  struct {
		// Result is the wire JSON Canonical is the canonical form of,
		// FinalPayload the payload FinalPayloadCanonical is: each pair
		// is checked to agree, so that a fixture edited in one place
		// only fails rather than passes unchecked.
		Result                any      `json:"result"`
		Canonical             string   `json:"canonical"`
		ErrorCode             *int     `json:"errorCode"`
		Decision              string   `json:"decision"`
		FinalPayload          any      `json:"finalPayload"`
		FinalPayloadCanonical *string  `json:"finalPayloadCanonical"`
		Forbids               []string `json:"forbids"`
		Requires              []string `json:"requires"`
	} `json:"expect"`
}

// decodeStrict decodes raw into v, numbers as json.Number, refusing a field
// v does not have: an expectation the adapter does not know would otherwise
// pass unchecked.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// session is the adapter's session: a fresh executor and key-value store,
// served by an MCP server to a client of the official SDK.
type session struct{ cs *mcp.ClientSession }

// behaviorModule maps a behaviour to its module and settings.
func behaviorModule(b string) (module string, settings map[string]any, grants []string) {
	switch b {
	case "cross-boundary-guard", "secretless-redactor":
		return b, nil, []string{"kv.get", "kv.set"}
	}
	return "behaviors", map[string]any{"behavior": b}, nil
}

// fixtureConfig is the configuration of a fixture's interceptors, their
// modules built.
func fixtureConfig(t testing.TB, hooks []fixtureHook) Config {
	t.Helper()
	cfg := Config{Modules: map[string][]byte{}}
	for _, h := range hooks {
		mod, settings, grants := behaviorModule(h.Behavior)
		if _, ok := cfg.Modules[mod]; !ok {
			cfg.Modules[mod] = buildHook(t, mod)
		}
		cfg.Interceptors = append(cfg.Interceptors, Descriptor{
			Name: h.Name, Type: h.Type, Events: h.Events, Phases: h.Phases, Mode: h.Mode, FailOpen: h.FailOpen,
			Module: mod, Settings: settings, Grants: grants,
		})
	}
	return cfg
}

func createSession(t *testing.T, hooks []fixtureHook) *session {
	t.Helper()
	x, err := New(context.Background(), fixtureConfig(t, hooks), Options{Runtime: testRuntime(t), HostCaller: newHostCaller(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close(context.Background()) })
	return &session{cs: inMemoryClient(t, x)}
}

// inMemoryClient serves x to a client of the official SDK over in-memory
// transports, both closed when the test ends.
func inMemoryClient(t *testing.T, x *Executor) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := NewServer(x, "test").Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return connect(t, ct)
}

// call calls tool with args: its structured content as a JSON value, or
// the JSON-RPC error it answered.
func (s *session) call(tool string, args any) (any, *jsonrpc.Error, error) {
	res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return nil, werr, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if res.IsError {
		return nil, nil, fmt.Errorf("%s: tool error %+v", tool, res.Content)
	}
	v, err := toJSONValue(res.StructuredContent)
	return v, nil, err
}

func (s *session) list(event string) (any, error) {
	v, werr, err := s.call(ToolList, ListParams{Event: event})
	if werr != nil {
		return nil, werr
	}
	return v, err
}

func (s *session) invoke(p InvokeParams) (ok bool, result any, code int, err error) {
	v, werr, err := s.call(ToolInvoke, p)
	if werr != nil {
		return false, nil, int(werr.Code), nil
	}
	return err == nil, v, 0, err
}

func (s *session) chain(event, phase string, payload any, sessionID string) (decision string, final any, err error) {
	var ictx *InvocationContext
	if sessionID != "" {
		ictx = &InvocationContext{SessionID: sessionID}
	}
	v, werr, err := s.call(ToolChain, ChainParams{Event: event, Phase: phase, Payload: payload, Context: ictx})
	if werr != nil {
		return "", nil, werr
	}
	if err != nil {
		return "", nil, err
	}
	r, _ := v.(map[string]any)
	if r["status"] != StatusSuccess {
		return "deny", nil, nil
	}
	return "allow", r["finalPayload"], nil
}

// agrees reports why the value v of a fixture disagrees with its canonical
// form want ("" when it agrees).
func agrees(v any, want string) string {
	got, err := canonical(v)
	if err != nil {
		return err.Error()
	}
	if got != want {
		return fmt.Sprintf("the fixture's value is %s, its canonical form %s", got, want)
	}
	return ""
}

// replay runs one fixture and returns why it failed ("" when it passed).
func replay(t *testing.T, f *fixture) string {
	if len(f.Steps) == 0 {
		return "no steps: the fixture checks nothing"
	}
	s := createSession(t, f.Interceptors)
	for i, raw := range f.Steps {
		var st step
		if err := decodeStrict(raw, &st); err != nil {
			return fmt.Sprintf("step %d: %v", i, err)
		}
		if st.Expect.Result != nil {
			if why := agrees(st.Expect.Result, st.Expect.Canonical); why != "" {
				return fmt.Sprintf("step %d: %s", i, why)
			}
		}
		if st.Expect.FinalPayload != nil {
			if st.Expect.FinalPayloadCanonical == nil {
				return fmt.Sprintf("step %d: finalPayload without finalPayloadCanonical", i)
			}
			if why := agrees(st.Expect.FinalPayload, *st.Expect.FinalPayloadCanonical); why != "" {
				return fmt.Sprintf("step %d: %s", i, why)
			}
		}
		actualCanon := func(v any) (string, error) {
			doc, err := toJSONValue(v)
			if err != nil {
				return "", err
			}
			return canonical(scrub(doc, f.Volatile))
		}
		switch st.Op {
		case "list":
			ev := ""
			if st.Event != nil {
				ev = *st.Event
			}
			res, err := s.list(ev)
			if err != nil {
				return fmt.Sprintf("step %d (list): %v", i, err)
			}
			got, err := actualCanon(res)
			if err != nil {
				return fmt.Sprintf("step %d: %v", i, err)
			}
			if got != st.Expect.Canonical {
				return fmt.Sprintf("step %d (list): got %s\nwant %s", i, got, st.Expect.Canonical)
			}
		case "invoke":
			ok, res, code, err := s.invoke(*st.Params)
			if err != nil {
				return fmt.Sprintf("step %d (invoke): %v", i, err)
			}
			if st.Expect.ErrorCode != nil {
				if ok || code != *st.Expect.ErrorCode {
					return fmt.Sprintf("step %d (invoke): want error %d, got ok=%t code %d", i, *st.Expect.ErrorCode, ok, code)
				}
				continue
			}
			if !ok {
				return fmt.Sprintf("step %d (invoke): error %d", i, code)
			}
			got, err := actualCanon(res)
			if err != nil {
				return fmt.Sprintf("step %d: %v", i, err)
			}
			if got != st.Expect.Canonical {
				return fmt.Sprintf("step %d (invoke): got %s\nwant %s", i, got, st.Expect.Canonical)
			}
		case "apply", "chain":
			ev := ""
			if st.Event != nil {
				ev = *st.Event
			}
			sid := ""
			if st.Context != nil {
				sid = st.Context.SessionID
			}
			decision, final, err := s.chain(ev, st.Phase, st.Payload, sid)
			if err != nil {
				return fmt.Sprintf("step %d (apply): %v", i, err)
			}
			if decision != st.Expect.Decision {
				return fmt.Sprintf("step %d (apply): decision %s, want %s", i, decision, st.Expect.Decision)
			}
			if st.Expect.FinalPayloadCanonical == nil && st.Expect.Forbids == nil && st.Expect.Requires == nil {
				continue
			}
			got, err := actualCanon(final)
			if err != nil {
				return fmt.Sprintf("step %d: %v", i, err)
			}
			if w := st.Expect.FinalPayloadCanonical; w != nil && got != *w {
				return fmt.Sprintf("step %d (apply): final payload %s\nwant %s", i, got, *w)
			}
			for _, f := range st.Expect.Forbids {
				if strings.Contains(got, f) {
					return fmt.Sprintf("step %d (apply): final payload %s holds %q", i, got, f)
				}
			}
			for _, r := range st.Expect.Requires {
				if !strings.Contains(got, r) {
					return fmt.Sprintf("step %d (apply): final payload %s lacks %q", i, got, r)
				}
			}
		default:
			return fmt.Sprintf("step %d: unknown op %q", i, st.Op)
		}
	}
	return ""
}

// readFixture reads the fixture at path p.
func readFixture(t testing.TB, p string) *fixture {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := decodeStrict(raw, &f); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return &f
}

// fixtureFiles are the fixtures under conformanceDir(), sorted.
func fixtureFiles(t testing.TB) []string {
	t.Helper()
	dir := conformanceDir()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".json") && filepath.Base(p) != "manifest.json" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("fixtures under %s: %v", dir, err)
	}
	if len(files) == 0 {
		t.Fatalf("no fixtures under %s", dir)
	}
	sort.Strings(files)
	return files
}

// TestConformance replays every fixture under conformanceDir() and reports
// "conformance: PASSED/TOTAL" with a line per requirement tag. It fails
// unless every fixture passes.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	files := fixtureFiles(t)
	type tally struct{ passed, total int }
	byTag := map[string]*tally{}
	passed := 0
	for _, p := range files {
		f := readFixture(t, p)
		tg := byTag[f.Requirement]
		if tg == nil {
			tg = &tally{}
			byTag[f.Requirement] = tg
		}
		tg.total++
		var why string
		t.Run(f.ID, func(t *testing.T) {
			if why = replay(t, f); why != "" {
				t.Error(why)
			}
		})
		if why == "" {
			passed++
			tg.passed++
		}
	}
	tags := make([]string, 0, len(byTag))
	for tag := range byTag {
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	fmt.Printf("conformance: %d/%d\n", passed, len(files))
	for _, tag := range tags {
		fmt.Printf("  %-45s %d/%d\n", tag, byTag[tag].passed, byTag[tag].total)
	}
	if passed != len(files) {
		t.Errorf("conformance: %d/%d fixtures passed", passed, len(files))
	}
}

// TestSecurityFlows replays, with the conformance algorithm, flows of the
// two security hooks written for this repository (testdata/security): cases
// the hooks were not tuned to, kept as regression tests.
func TestSecurityFlows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	files, err := filepath.Glob(filepath.Join("testdata", "security", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no flows: %v", err)
	}
	for _, p := range files {
		f := readFixture(t, p)
		t.Run(f.ID, func(t *testing.T) {
			if why := replay(t, f); why != "" {
				t.Error(why)
			}
		})
	}
}
