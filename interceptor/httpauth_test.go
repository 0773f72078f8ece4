package interceptor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/server/api"
)

// bearer adds an Authorization header to every request of a client.
type bearer struct{ value string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.value)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTPBearerToken: with HTTPOptions.Token, a request without the token
// (no header, another scheme, an empty or a wrong token, the token's
// prefix, two Authorization headers whatever they hold) is 401 with a
// problem document and a Bearer challenge, and changes nothing: an initialize opens no session, a tools/call on an open
// session runs no chain (no audit record). The right token, its scheme in
// any case and any spaces after it, is served (several spaces were
// refused). Without the check every request was served; without the
// count of headers, the token followed by a second header was (only the
// first was read).
func TestHTTPBearerToken(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef-mcp"
	sink := audit.NewMemorySink()
	cfg, err := LoadConfigFile(writeE2EConfig(t), "")
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), HostCaller: newHostCaller(t), Logger: quiet, Audit: sink})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close(context.Background()) })
	s := NewServer(x, "test")
	hs := serveHTTP(t, s, HTTPOptions{Token: token})
	// A session opened with the token, for the calls below.
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{"Bearer " + token}}})
	// sessions are the server's open sessions' ids: a refused request adds
	// none (another may close meanwhile).
	sessions := func() map[string]bool {
		ids := map[string]bool{}
		for ss := range s.Sessions() {
			ids[ss.ID()] = true
		}
		return ids
	}
	added := func(before, after map[string]bool) int {
		n := 0
		for id := range after {
			if !before[id] {
				n++
			}
		}
		return n
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	const callChain = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + ToolChain + `","arguments":{"event":"tools/call","phase":"request","context":{"sessionId":"s"},"payload":{"name":"fetch","arguments":{"note":"x"}}}}}`
	for _, tt := range []struct {
		name, auth string // auth "" sends no Authorization header
		also       string // a second Authorization header, if not ""
		ok         bool
	}{
		{"no header", "", "", false},
		{"wrong scheme", "Basic " + token, "", false},
		{"scheme only", "Bearer", "", false},
		{"empty token", "Bearer ", "", false},
		{"wrong token", "Bearer " + strings.ToUpper(token), "", false},
		{"token's prefix", "Bearer " + token[:len(token)-1], "", false},
		{"token and more", "Bearer " + token + "x", "", false},
		{"right token", "Bearer " + token, "", true},
		{"scheme in lower case", "bearer " + token, "", true},
		{"spaces after the scheme", "Bearer   " + token, "", true}, // 1*SP, RFC 9110 section 11.4
		{"tab after the scheme", "Bearer\t" + token, "", false},
		{"right token twice", "Bearer " + token, "Bearer " + token, false},
		{"right token then a wrong one", "Bearer " + token, "Bearer x", false},
		{"right token then another scheme", "Bearer " + token, "Basic eDp5", false},
		{"wrong token then the right one", "Bearer x", "Bearer " + token, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			post := func(body, session string) *http.Response {
				t.Helper()
				req, err := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if session != "" {
					req.Header.Set("Mcp-Session-Id", session)
					req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
				}
				if tt.auth != "" {
					req.Header.Set("Authorization", tt.auth)
				}
				if tt.also != "" {
					req.Header.Add("Authorization", tt.also)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = resp.Body.Close() })
				return resp
			}
			open, records := sessions(), len(sink.Records())
			for _, step := range []struct{ what, body, session string }{
				{"initialize", initialize, ""},
				{"tools/call", callChain, cs.ID()},
			} {
				resp := post(step.body, step.session)
				if tt.ok {
					_, _ = io.Copy(io.Discard, resp.Body)
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s: status %d, want 200", step.what, resp.StatusCode)
					}
					continue
				}
				var p api.Problem
				if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" ||
					!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
					t.Fatalf("%s: status %d, Content-Type %q, WWW-Authenticate %q; want 401, a problem, a Bearer challenge",
						step.what, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("WWW-Authenticate"))
				}
				if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || p.Code != api.CodeUnauthenticated || p.Status != http.StatusUnauthorized {
					t.Fatalf("%s: problem %+v (%v), want code %s", step.what, p, err, api.CodeUnauthenticated)
				}
			}
			opened, gotRecords := added(open, sessions()), len(sink.Records())
			if tt.ok && (opened != 1 || gotRecords == records) {
				t.Errorf("served: %d sessions opened, audit records %d -> %d; want one session and the chain's records", opened, records, gotRecords)
			}
			if !tt.ok && (opened != 0 || gotRecords != records) {
				t.Errorf("refused: %d sessions opened, audit records %d -> %d; want no change", opened, records, gotRecords)
			}
		})
	}
}

// TestServeCLIHTTPToken runs `wasmhooks mcp --http` with
// $WASMHOOKS_MCP_TOKEN set: an initialize without the token is 401, the
// SDK's client holding it is served. Without the token wired to the
// handler, the first initialize was served.
func TestServeCLIHTTPToken(t *testing.T) {
	const token = "fedcba9876543210fedcba9876543210-cli"
	endpoint := startCLIHTTP(t, []string{"WASMHOOKS_MCP_TOKEN=" + token})
	if code, id := initializeHTTP(t, endpoint); code != http.StatusUnauthorized || id != "" {
		t.Fatalf("initialize without the token: status %d, session %q; want 401 and none", code, id)
	}
	exercise(t, connect(t, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{"Bearer " + token}}}))
}

// sendRaw sends request (raw HTTP/1.1) to addr on a new connection, closed
// when the test ends, and returns it with a read deadline of 10 s: a server
// that holds the connection fails the test rather than hang it.
func sendRaw(t *testing.T, addr, request string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return c
}

// refusedRaw sends request (raw HTTP/1.1, a body declared and never sent)
// to addr and returns the response's status, and whether the server then
// closed the connection. A server still waiting for the body answers
// nothing: the read deadline only turns that hang into a failure.
func refusedRaw(t *testing.T, addr, request string) (status int, closed bool) {
	t.Helper()
	br := bufio.NewReader(sendRaw(t, addr, request))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response (the server waits for the body): %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_, err = br.ReadByte()
	return resp.StatusCode, err == io.EOF
}

// wantRefused sends request as refusedRaw does and fails the test unless
// it is answered 401 and its connection closed.
func wantRefused(t *testing.T, addr, request string) {
	t.Helper()
	if status, closed := refusedRaw(t, addr, request); status != http.StatusUnauthorized || !closed {
		t.Errorf("status %d, connection closed %v; want 401 and closed", status, closed)
	}
}

// unsentBodies are requests without the token that declare a body and
// never send it, at every method the transport serves.
var unsentBodies = []struct{ name, head string }{
	{"POST with a length", "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"},
	{"POST chunked", "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n"},
	{"GET with a length", "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nContent-Length: 100\r\n\r\n"},
	{"DELETE with a length", "DELETE %s HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: x\r\nContent-Length: 100\r\n\r\n"},
	{"OPTIONS with a length", "OPTIONS %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"},
}

// twoTokens is a request carrying the token twice (two Authorization
// headers), which declares a body and never sends it.
func twoTokens(token, path string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", path, token, token)
}

// TestHTTPRefusalHoldsNothing: a request without the token (or with two
// Authorization headers) that declares a body and never sends it is
// answered 401 at once and its connection closed, so a client without the
// token holds no connection or goroutine. Without the fix the 401 waited for the body first (net/http discards up
// to 256 KiB of an unread body, with no deadline): each such connection was
// held for ever, and their number is not bounded.
func TestHTTPRefusalHoldsNothing(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef-raw"
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	hs := serveHTTP(t, s, HTTPOptions{Token: token})
	requests := map[string]string{"the token twice": twoTokens(token, "/mcp")}
	for _, tt := range unsentBodies {
		requests[tt.name] = fmt.Sprintf(tt.head, "/mcp")
	}
	for name, request := range requests {
		t.Run(name, func(t *testing.T) {
			wantRefused(t, hs.Listener.Addr().String(), request)
		})
	}
}

// TestServeCLIHTTPRefusalHoldsNothing: the command answers a request
// without the token (or with two Authorization headers) 401 at any path
// (another, /mcp/, //mcp, and the server-wide OPTIONS *), at once and
// closing the connection, even when it declares a body it never sends. Without authentication before routing,
// the mux's 404 and 301 and net/http's OPTIONS * answered without the
// token, after waiting for the body with no deadline: a connection held
// for ever by a client without the token.
func TestServeCLIHTTPRefusalHoldsNothing(t *testing.T) {
	const token = "fedcba9876543210fedcba9876543210-raw"
	endpoint := startCLIHTTP(t, []string{"WASMHOOKS_MCP_TOKEN=" + token})
	addr := strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/mcp")
	for _, path := range []string{"/mcp", "/other"} {
		t.Run(path+" the token twice", func(t *testing.T) {
			wantRefused(t, addr, twoTokens(token, path))
		})
	}
	for _, path := range []string{"/mcp", "/other", "/mcp/", "//mcp", "/%6Dcp", "*"} {
		for _, tt := range unsentBodies {
			if path == "*" && !strings.HasPrefix(tt.name, "OPTIONS") {
				continue
			}
			t.Run(path+" "+tt.name, func(t *testing.T) {
				wantRefused(t, addr, fmt.Sprintf(tt.head, path))
			})
		}
	}
}
