package interceptor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmhooks/wasmhooks/chain/audit"
)

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
