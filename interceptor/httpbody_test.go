package interceptor

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// closedAfterBody sends request (raw HTTP/1.1, its body not all sent) to
// addr and returns what the server answered before closing the connection.
// A server still waiting for the body holds the connection: the test
// fails once it has done so for 10 s.
func closedAfterBody(t *testing.T, addr, request string) string {
	t.Helper()
	var got strings.Builder
	if _, err := io.Copy(&got, sendRaw(t, addr, request)); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection is still open 10 s after its body stopped (answer so far %q)", got.String())
		}
	}
	return got.String()
}

// bodyRequests are requests that carry the token and declare a body they
// do not send whole, for the body's bound: read by the handler (a POST)
// or left unread (a GET without a session, refused before its body is
// read, which net/http then reads).
func bodyRequests(token, path string) map[string]string {
	auth := "Host: 127.0.0.1\r\nAuthorization: Bearer " + token + "\r\n"
	post := "POST " + path + " HTTP/1.1\r\n" + auth + "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
	return map[string]string{
		"POST, half its length":     post + "Content-Length: 100\r\n\r\n{\"jsonrpc\":",
		"POST chunked, never ended": post + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"jso\r\n",
		"GET, its body never sent":  "GET " + path + " HTTP/1.1\r\n" + auth + "Accept: text/event-stream\r\nContent-Length: 100\r\n\r\n",
	}
}

// TestHTTPBodyTimeout: a token holder's request whose body has not all
// arrived within HTTPOptions.BodyTimeout has its connection closed,
// whether the handler reads the body or leaves it unread. A call that
// runs past the bound once its body arrived, and a session's event stream
// (a GET without a body), are not cut. Without the bound each such
// connection, and its goroutine, was held for as long as the client liked
// (net/http has no body deadline, and a server-wide ReadTimeout would cut
// the streams); without the deadline lifted at the body's end, the call
// was cut.
func TestHTTPBodyTimeout(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef-body"
	const bound = 200 * time.Millisecond
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "outlast"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(5 * bound):
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "outlasted"}}}, nil, nil
		}
	})
	hs := serveHTTP(t, s, HTTPOptions{Token: token, BodyTimeout: bound})
	addr := hs.Listener.Addr().String()
	for name, request := range bodyRequests(token, "/mcp") {
		t.Run(name, func(t *testing.T) {
			closedAfterBody(t, addr, request)
		})
	}
	t.Run("a call outlasts the bound", func(t *testing.T) {
		cs := connect(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{"Bearer " + token}}})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "outlast"})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("call: %+v, %v; want it served", res, err)
		}
	})
	t.Run("an event stream outlasts the bound", func(t *testing.T) {
		status, session := initializeHTTPAuth(t, hs.URL, "Bearer "+token)
		if status != http.StatusOK || session == "" {
			t.Fatalf("initialize: status %d, session %q", status, session)
		}
		c := sendRaw(t, addr, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+token+
			"\r\nAccept: text/event-stream\r\nMcp-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: "+session+"\r\n\r\n")
		br := bufio.NewReader(c)
		stream, err := http.ReadResponse(br, nil)
		if err != nil || stream.StatusCode != http.StatusOK {
			t.Fatalf("GET: %v, %v; want the session's event stream", stream, err)
		}
		events := bufio.NewReader(stream.Body)
		for line := "-"; line != "\n"; { // the SDK's first event (": ok")
			if line, err = events.ReadString('\n'); err != nil {
				t.Fatalf("the event stream's first event: %v", err)
			}
		}
		time.Sleep(5 * bound) // the stream lives past the bound
		_ = c.SetReadDeadline(time.Now().Add(bound))
		if _, err := events.Peek(1); err != nil { // another event, or nothing yet
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("the event stream ended: %v", err)
			}
		}
	})
}
