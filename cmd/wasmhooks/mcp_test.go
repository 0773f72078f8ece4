package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
