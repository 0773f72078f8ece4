package interceptor

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// brokenAudit fails every append with the error of a file sink, which names
// the file.
type brokenAudit struct{}

func (brokenAudit) Append(context.Context, *audit.Record) error {
	return errors.New("write /var/lib/wasmhooks/private/audit.log: no space left on device")
}

// TestChainErrorIsAStableCode: a chain that fails (here its audit record is
// not stored) is answered -32603 with a stable reason ("audit"), never the
// error's text: that named the host's audit file to the client (the SEP:
// detailed errors are logged, not returned).
func TestChainErrorIsAStableCode(t *testing.T) {
	cfg := fixtureConfig(t, []fixtureHook{{Name: "v", Type: TypeValidation, Behavior: "allow-all", Events: []string{"*"}}})
	x, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), HostCaller: newHostCaller(t), Audit: brokenAudit{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close(context.Background()) })
	cs := inMemoryClient(t, x)
	payload := map[string]any{"name": "echo", "arguments": map[string]any{}}
	for tool, args := range map[string]map[string]any{
		ToolInvoke: {"name": "v", "event": "tools/call", "phase": "request", "payload": payload},
		ToolChain:  {"event": "tools/call", "phase": "request", "payload": payload},
	} {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != CodeInternalError {
			t.Fatalf("%s: %v, want JSON-RPC error %d", tool, err, CodeInternalError)
		}
		var data struct{ Reason string }
		if json.Unmarshal(werr.Data, &data) != nil || data.Reason != "audit" || strings.Contains(werr.Message+string(werr.Data), "/var/lib") {
			t.Errorf("%s: error %q, data %s; want reason \"audit\" and no path", tool, werr.Message, werr.Data)
		}
	}
}

// TestReplayChecksEveryExpectation: the replay refuses a fixture whose
// expectation it would not check (a field it does not know) or whose
// values disagree with their canonical forms (a fixture edited in one
// place), rather than pass it; the unedited fixture passes.
func TestReplayChecksEveryExpectation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	dir := filepath.Join(conformanceDir(), "protocol")
	for _, tc := range []struct {
		name, file string
		edit       func(expect map[string]any)
		ok         bool
	}{
		{"list as generated", "list-all.json", func(map[string]any) {}, true},
		{"chain as generated", "chain-fail-open.json", func(map[string]any) {}, true},
		{"an unknown expectation", "chain-fail-open.json", func(e map[string]any) { e["finalPayloadSchema"] = map[string]any{} }, false},
		{"a result its canonical form is not", "list-all.json", func(e map[string]any) { e["result"] = map[string]any{"interceptors": []any{}} }, false},
		{"a final payload its canonical form is not", "chain-fail-open.json", func(e map[string]any) { e["finalPayload"] = map[string]any{} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := readFixture(t, filepath.Join(dir, tc.file))
			var st map[string]any
			if err := json.Unmarshal(f.Steps[0], &st); err != nil {
				t.Fatal(err)
			}
			tc.edit(st["expect"].(map[string]any))
			raw, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			f.Steps[0] = raw
			if why := replay(t, f); (why == "") != tc.ok {
				t.Fatalf("replay: %q, want it to pass: %t", why, tc.ok)
			}
		})
	}
}

// TestArgumentsReadAsHooksRead: the arguments of a call are read as strictly
// as a hook reads its input (abi.ParseJSON: depth, numbers, duplicate keys),
// and what a hook could not read is refused -32602 before any hook runs.
// They were read leniently: a payload holding an integer past 2^53, 1e400 or
// nesting past what a hook reads made every hook fail, so a fail-open
// validator that blocks the call let it through; and of duplicate keys the
// hooks saw the last, where the MCP server the gateway forwards the request
// to may read the first.
func TestArgumentsReadAsHooksRead(t *testing.T) {
	x := newExecutor(t, Descriptor{Name: "note", Type: TypeValidation, Events: []string{"*"}, FailOpen: true, Module: "behaviors", Settings: map[string]any{"behavior": "require-note"}})
	cs := inMemoryClient(t, x)
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name, arguments string
		status          string // "" for a refusal: -32602, or the SDK's (1e400)
	}{
		{"no note", `{}`, StatusValidationFailed},
		{"no note, nested as deep as a hook reads", `{"a":` + nested(60) + `}`, StatusValidationFailed},
		{"no note, an integer past 2^53", `{"id":9007199254740993}`, ""},
		{"no note, a number past float64", `{"x":1e400}`, ""},
		{"no note, nested deeper than a hook reads", `{"a":` + nested(61) + `}`, ""},
		{"an empty note, then a note", `{"note":"","note":"hi"}`, ""},
	} {
		for _, phase := range []string{PhaseRequest, PhaseResponse} {
			t.Run(phase+"/"+tc.name, func(t *testing.T) {
				args := json.RawMessage(`{"event":"tools/call","phase":"` + phase + `","payload":{"name":"x","arguments":` + tc.arguments + `}}`)
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolChain, Arguments: args})
				var werr *jsonrpc.Error
				switch {
				case tc.status == "" && err == nil && res.IsError:
				case tc.status == "" && (!errors.As(err, &werr) || werr.Code != CodeInvalidParams):
					t.Fatalf("%v %+v, want JSON-RPC error %d", err, res, CodeInvalidParams)
				case tc.status == "":
				case err != nil || res.IsError:
					t.Fatalf("%v %+v", err, res)
				default:
					var cr ChainResult
					b, _ := json.Marshal(res.StructuredContent)
					if json.Unmarshal(b, &cr) != nil || cr.Status != tc.status {
						t.Fatalf("status %q, want %q: %s", cr.Status, tc.status, b)
					}
				}
			})
		}
	}
}
