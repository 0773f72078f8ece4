package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmhooks/wasmhooks/interceptor"
)

// The MCP server itself is tested end to end, over stdio with this command,
// in package interceptor (TestServeStdio, TestServeHTTP).

func TestMCPHelpAndRefusals(t *testing.T) {
	bad := writeTemp(t, "bad.json", `{"modules": {}, "interceptors": [{"name": "x", "type": "validation", "events": ["*"], "module": "nope"}]}`)
	unknown := writeTemp(t, "unknown.json", `{"interceptors": [], "bindings": []}`)
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mcp", "--help"}, exitOK, "-http"},
		{[]string{"mcp"}, exitUsage, ""},
		{[]string{"mcp", "--config", bad, "--cache-dir", ""}, exitRefused, `unknown module \"nope\"`},
		{[]string{"mcp", "--config", unknown, "--cache-dir", ""}, exitRefused, "invalid_config"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr)
		if code != tt.code || !strings.Contains(stdout.String(), tt.want) {
			t.Errorf("%v: exit %d, want %d with %q\nstdout: %s\nstderr: %s", tt.args, code, tt.code, tt.want, stdout.String(), stderr.String())
		}
	}
}

// TestMCPHTTPAuth: `mcp --http` takes its bearer token from --token-file
// (owner-only, trimmed) or $WASMHOOKS_MCP_TOKEN, and refuses an empty or
// short one, or one no header carries (a control character: every request
// was refused), naming where it came from (the variable set but blank too: it
// served without a token, as if unset); without a token it refuses a
// non-loopback address unless --insecure-no-auth, and warns on loopback.
// The configuration here is refused (invalid_config, exit 1) after those
// checks, so exit 1 means the authentication settings were accepted.
// Without the checks every row was accepted silently.
func TestMCPHTTPAuth(t *testing.T) {
	secret := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const token = "0123456789abcdef0123456789abcdef"
	good := secret("token", "\n"+token+"\n", 0o600)
	empty := secret("empty", " \n", 0o600)
	short := secret("short", token[1:], 0o600)
	open := secret("open", token, 0o644)
	twoLines := secret("two-lines", token+"\n"+token+"\n", 0o600)
	cfg := writeTemp(t, "unknown.json", `{"interceptors": [], "bindings": []}`)
	for _, tt := range []struct {
		name       string
		env        string // $WASMHOOKS_MCP_TOKEN
		args       []string
		code       int
		want, warn string // in stdout, in stderr
	}{
		{"token file empty", "", []string{"--http", "127.0.0.1:0", "--token-file", empty}, exitUsage, "--token-file " + empty + " is empty", ""},
		{"token file short", "", []string{"--http", "127.0.0.1:0", "--token-file", short}, exitUsage, "--token-file " + short + ": the token is 31 bytes, shorter than 32", ""},
		{"token file of two lines", "", []string{"--http", "127.0.0.1:0", "--token-file", twoLines}, exitUsage, "--token-file " + twoLines + ": the token holds a control character (byte 32)", ""},
		{"token file others read", "", []string{"--http", "127.0.0.1:0", "--token-file", open}, exitUsage, "chmod 600", ""},
		{"token file missing", "", []string{"--http", "127.0.0.1:0", "--token-file", good + ".nope"}, exitUsage, "--token-file: ", ""},
		{"env token blank", " \n", []string{"--http", "127.0.0.1:0"}, exitUsage, "$WASMHOOKS_MCP_TOKEN is set but empty", ""},
		{"env token short", "short", []string{"--http", "127.0.0.1:0"}, exitUsage, "$WASMHOOKS_MCP_TOKEN: the token is 5 bytes", ""},
		{"token file wins over env", "short", []string{"--http", "127.0.0.1:0", "--token-file", good}, exitRefused, "invalid_config", ""},
		{"env token", token, []string{"--http", "0.0.0.0:0"}, exitRefused, "invalid_config", ""},
		{"token file, any address", "", []string{"--http", "0.0.0.0:0", "--token-file", good}, exitRefused, "invalid_config", ""},
		{"no token, all addresses", "", []string{"--http", "0.0.0.0:0"}, exitUsage, "listens beyond loopback", ""},
		{"no token, host omitted", "", []string{"--http", ":0"}, exitUsage, "or --insecure-no-auth", ""},
		{"no token, insecure", "", []string{"--http", "0.0.0.0:0", "--insecure-no-auth"}, exitRefused, "invalid_config", "warning: --insecure-no-auth"},
		{"no token, loopback", "", []string{"--http", "127.0.0.1:0"}, exitRefused, "invalid_config", "warning: no token"},
		{"no token, localhost", "", []string{"--http", "localhost:0"}, exitRefused, "invalid_config", "warning: no token"},
		{"token and insecure", "", []string{"--http", "0.0.0.0:0", "--token-file", good, "--insecure-no-auth"}, exitUsage, "contradicts", ""},
		{"token file without --http", "", []string{"--token-file", good}, exitUsage, "only with --http", ""},
		{"insecure without --http", "", []string{"--insecure-no-auth"}, exitUsage, "only with --http", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envMCPToken, tt.env)
			if tt.env == "" {
				os.Unsetenv(envMCPToken) // t.Setenv restores it
			}
			var stdout, stderr bytes.Buffer
			args := append([]string{"mcp", "--config", cfg, "--cache-dir", ""}, tt.args...)
			code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tt.code, tt.want, stdout.String(), stderr.String())
			}
			if got := strings.Contains(stderr.String(), "warning"); got != (tt.warn != "") || !strings.Contains(stderr.String(), tt.warn) {
				t.Errorf("stderr %q, want warning %q", stderr.String(), tt.warn)
			}
		})
	}
}

// TestMCPHTTPBodyTimeout: `mcp --http`'s server gives a token holder's
// body HTTPOptions.BodyTimeout to arrive at any path, not only /mcp's
// handler: a body that stops coming has its connection closed. Without the
// bound before routing, the mux's 404 (another path) and OPTIONS * waited
// for the rest of the body with no deadline (net/http reads an unread body
// after the answer), a connection held for ever.
func TestMCPHTTPBodyTimeout(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef-cmd"
	hs := mcpHTTPServer(mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil),
		interceptor.HTTPOptions{Token: token, BodyTimeout: 200 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	for _, target := range []string{"POST /mcp", "POST /other", "GET /mcp/", "OPTIONS *"} {
		t.Run(target, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _ = io.WriteString(c, target+" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+token+
				"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{")
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // only ends a connection held
			var ne net.Error
			if _, err := io.Copy(io.Discard, c); errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the connection is still open 10 s after its body stopped")
			}
		})
	}
}
