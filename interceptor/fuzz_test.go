package interceptor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fuzzTools are the server's tools, picked by the fuzzer's first argument.
var fuzzTools = []string{ToolList, ToolInvoke, ToolChain}

// fuzzFixtures are the conformance fixtures and the security flows: the
// configuration of the fuzzed server (their interceptors, the first of each
// name) and the seeds (their steps, as a client sends them).
func fuzzFixtures(t testing.TB) []*fixture {
	t.Helper()
	security, err := filepath.Glob(filepath.Join("testdata", "security", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*fixture
	for _, p := range append(fixtureFiles(t), security...) {
		out = append(out, readFixture(t, p))
	}
	return out
}

// fuzzSeeds are each fixture step as the arguments of its tool call: a
// list's {event}, an invoke's params, an apply's {event, phase, payload,
// context}.
func fuzzSeeds(t testing.TB, fixtures []*fixture) (tools []uint8, args [][]byte) {
	t.Helper()
	add := func(tool uint8, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		tools, args = append(tools, tool), append(args, b)
	}
	for _, f := range fixtures {
		for _, raw := range f.Steps {
			var st step
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&st); err != nil {
				t.Fatal(err)
			}
			ev := ""
			if st.Event != nil {
				ev = *st.Event
			}
			switch st.Op {
			case "list":
				add(0, map[string]any{"event": ev})
			case "invoke":
				add(1, st.Params)
			case "apply", "chain":
				add(2, ChainParams{Event: ev, Phase: st.Phase, Payload: st.Payload, Context: st.Context})
			}
		}
	}
	return tools, args
}

// fuzzServer is a client session of a server of every fixture's
// interceptors, with its own key-value store.
func fuzzServer(f *testing.F, fixtures []*fixture) *mcp.ClientSession {
	f.Helper()
	var hooks []fixtureHook
	seen := map[string]bool{}
	for _, fx := range fixtures {
		for _, h := range fx.Interceptors {
			if !seen[h.Name] {
				seen[h.Name] = true
				hooks = append(hooks, h)
			}
		}
	}
	x, err := New(context.Background(), fixtureConfig(f, hooks), Options{Runtime: testRuntime(f), HostCaller: newHostCaller(f), Audit: Discard, Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = x.Close(context.Background()) })
	st, ct := mcp.NewInMemoryTransports()
	ss, err := NewServer(x, "fuzz").Connect(context.Background(), st, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = cs.Close() })
	return cs
}

// fuzzOutcome is what a tool call answered, durations left out: the
// canonical JSON of its structured content, or its error.
func fuzzOutcome(t *testing.T, cs *mcp.ClientSession, tool string, args json.RawMessage) (outcome string, ok bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) {
			t.Fatalf("%s %s: %v (%T), want a JSON-RPC error", tool, args, err, err)
		}
		switch werr.Code {
		case CodeInvalidParams, CodeInternalError, -32000, CodeBusy:
		default:
			t.Fatalf("%s %s: JSON-RPC error %d %q, want %d, %d, -32000 or %d", tool, args, werr.Code, werr.Message, CodeInvalidParams, CodeInternalError, CodeBusy)
		}
		if werr.Message == "" {
			t.Fatalf("%s %s: JSON-RPC error %d without a message", tool, args, werr.Code)
		}
		return werr.Error(), false
	}
	if res.IsError {
		// The SDK's refusal of arguments its schema does not take
		// ("validating \"arguments\": ..."): a tool error with a text.
		if len(res.Content) != 1 {
			t.Fatalf("%s %s: tool error without one content: %+v", tool, args, res.Content)
		}
		txt, _ := res.Content[0].(*mcp.TextContent)
		if txt == nil || txt.Text == "" {
			t.Fatalf("%s %s: tool error without a text: %+v", tool, args, res.Content)
		}
		// Its text lists properties in map order: not compared.
		return "tool error", false
	}
	doc, err := toJSONValue(res.StructuredContent)
	if err != nil {
		t.Fatalf("%s %s: structured content: %v", tool, args, err)
	}
	s, err := canonical(scrub(doc, []string{"durationMs", "totalDurationMs"}))
	if err != nil {
		t.Fatalf("%s %s: structured content: %v", tool, args, err)
	}
	return s, true
}

// withoutTimeout is args without "timeoutMs": a run the clock cuts short
// is not expected to be repeatable, nor the state it left.
func withoutTimeout(args []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || m == nil {
		return args
	}
	if _, ok := m["timeoutMs"]; !ok {
		return args
	}
	delete(m, "timeoutMs")
	b, err := json.Marshal(m)
	if err != nil {
		return args
	}
	return b
}

// FuzzServer sends what a client may send (any arguments to any of the
// server's tools: the invoke and chain params, events, phases, interceptor
// selections, payloads and contexts of any shape) to the MCP server of the
// conformance fixtures' interceptors (behaviours, the crash hook and the two
// security hooks), seeded with the fixtures' steps. It never panics; what
// the server refuses is a JSON-RPC error of the SEP's codes (or the SDK's
// own refusal of arguments its schema does not take); and two servers with
// their own stores, sent the same calls, answer each one the same (timeouts
// left out: they are the clock's).
func FuzzServer(f *testing.F) {
	fixtures := fuzzFixtures(f)
	tools, args := fuzzSeeds(f, fixtures)
	for i := range tools {
		f.Add(tools[i], args[i])
	}
	deep := strings.Repeat(`{"a":`, 300) + `"ghp_DeepT0kenNestedFarDown000001"` + strings.Repeat(`}`, 300)
	for _, s := range []struct {
		tool uint8
		args string
	}{
		{2, `{"event":"tools/call","phase":"request","payload":` + deep + `}`},
		{2, `{"event":"tools/call","phase":"request","payload":"not an object"}`},
		{2, `{"event":"tools/call","phase":"response","payload":null}`},
		{2, `{"event":"tools/call","phase":"both","payload":{}}`},
		{2, `{"event":"tools/call","phase":"request","payload":{},"interceptors":[]}`},
		{2, `{"event":"tools/call","phase":"request","payload":{},"interceptors":["nope"]}`},
		{2, `{"event":"*","phase":"response","payload":{},"timeoutMs":9223372036854775807}`},
		{2, `{"event":"tools/call","phase":"request","payload":{},"timeoutMs":-1}`},
		{2, `{"event":"tools/call","phase":"request","payload":{},"context":{"sessionId":"mcp-session:x"}}`},
		{2, `{"event":"tools/call","phase":"request","payload":{"sk_live_KeyAsAnObjectKey00001":1,"[secret:1]":2}}`},
		{1, `{"name":"","event":"","phase":"","payload":1e999}`},
		{1, `{"name":"crash","event":"tools/call","phase":"response","payload":[1,2,3]}`},
		{0, `{"event":"*"}`},
		{0, `[1]`},
		{1, `"x"`},
		{7, `{}`},
	} {
		f.Add(s.tool, []byte(s.args))
	}

	raw := fuzzServer(f, fixtures)
	one, two := fuzzServer(f, fixtures), fuzzServer(f, fixtures)
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		if !json.Valid(args) {
			return // the client's framing sends JSON only
		}
		name := fuzzTools[int(tool)%len(fuzzTools)]
		fuzzOutcome(t, raw, name, args)

		same := withoutTimeout(args)
		a, okA := fuzzOutcome(t, one, name, same)
		b, okB := fuzzOutcome(t, two, name, same)
		if a != b || okA != okB {
			t.Fatalf("%s %s: two servers answered differently:\n%s\n%s", name, same, a, b)
		}
	})
}
