//go:build !wasip1

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/hooks-examples/internal/hooktest"
	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

func newHost(t *testing.T) *sdktest.Host { return sdktest.HostFor(t, "manifest.json") }

func TestRedact(t *testing.T) {
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----"
	tests := []struct {
		name     string
		text     string
		settings map[string]any
		want     string // "" means continue
		reason   string
	}{
		{name: "nothing to redact", text: "The deploy finished at 10:42."},
		{name: "aws access key", text: "key AKIAIOSFODNN7EXAMPLE ok", want: "key [REDACTED] ok", reason: "redacted 1 secret"},
		{name: "aws temporary key", text: "ASIAIOSFODNN7EXAMPLE", want: "[REDACTED]"},
		{name: "aws key glued to a word", text: "XAKIAIOSFODNN7EXAMPLE", want: "X[REDACTED]"},
		{name: "openai key", text: "use sk-abcdefghijklmnopqrstuvwx now", want: "use [REDACTED] now"},
		{name: "openai project key", text: "sk-proj-AbC_dEf-123456789012345678", want: "[REDACTED]"},
		{name: "sk- inside a word is not a key", text: "the task-abcdefghijklmnopqrstuvwx list"},
		{name: "github token", text: "token=ghp_" + strings.Repeat("a1B2", 9), want: "token=[REDACTED]"},
		{name: "github fine-grained token", text: "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", want: "[REDACTED]"},
		{name: "slack token", text: "xoxb-1234567890-abcdefghij", want: "[REDACTED]"},
		{name: "google api key", text: "AIza" + strings.Repeat("x", 35), want: "[REDACTED]"},
		{name: "jwt", text: "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_nature-1", want: "jwt [REDACTED]"},
		{name: "bearer keeps the scheme", text: "Authorization: Bearer abc.def-ghi_jkl", want: "Authorization: Bearer [REDACTED]"},
		{name: "bearer jwt counts once", text: "Authorization: bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", want: "Authorization: bearer [REDACTED]", reason: "redacted 1 secret"},
		{name: "email", text: "mail jane.doe+x@mail.example.co.uk today", want: "mail [REDACTED] today"},
		{name: "private key block", text: "here:\n" + pem + "\nend", want: "here:\n[REDACTED]\nend"},
		{name: "several", text: "a@b.io and AKIAIOSFODNN7EXAMPLE and c@d.io", want: "[REDACTED] and [REDACTED] and [REDACTED]", reason: "redacted 3 secrets"},
		{
			name: "custom replacement", text: "a@b.io",
			settings: map[string]any{"replacement": "<email>"}, want: "<email>",
		},
		{
			name: "replacement is literal", text: "a@b.io",
			settings: map[string]any{"replacement": "$1"}, want: "$1",
		},
		{
			name: "patterns replace the defaults", text: "a@b.io order 12345",
			settings: map[string]any{"patterns": []any{`\b\d{5}\b`}}, want: "a@b.io order [REDACTED]",
		},
		{
			name: "extra patterns add to the defaults", text: "a@b.io order 12345",
			settings: map[string]any{"extra_patterns": []any{`\b\d{5}\b`}}, want: "[REDACTED] order [REDACTED]", reason: "redacted 2 secrets",
		},
		{
			name: "overlapping matches merge", text: "xxABCyy",
			settings: map[string]any{"patterns": []any{"AB", "BC", "x+"}}, want: "[REDACTED][REDACTED]yy", reason: "redacted 2 secrets",
		},
		{
			name: "empty pattern list redacts nothing", text: "a@b.io",
			settings: map[string]any{"patterns": []any{}},
		},
		{
			name: "empty matches are ignored", text: "abc",
			settings: map[string]any{"patterns": []any{"z*"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := hooktest.Reply(t, newHost(t), "hi", tt.text, tt.settings)
			hooktest.WantModify(t, dec, "outgoing", tt.want, tt.reason)
		})
	}
}

func TestPoints(t *testing.T) {
	tests := []struct {
		point   string
		context map[string]any
		field   string
		want    any
	}{
		{"message.inbound", map[string]any{"incoming": "I am a@b.io"}, "incoming", "I am [REDACTED]"},
		{"tool.before", map[string]any{"tool": "http", "arguments": map[string]any{"headers": []any{"Authorization: Bearer abcdefgh123"}, "retries": 3}}, "arguments",
			map[string]any{"headers": []any{"Authorization: Bearer [REDACTED]"}, "retries": "3"}},
		{"tool.after", map[string]any{"tool": "env", "result": []any{"AKIAIOSFODNN7EXAMPLE", true, nil}}, "result", []any{"[REDACTED]", true, nil}},
		{"llm.output.stream", map[string]any{"response": "use sk-abcdefghijklmnopqrstuvwx now", "offset": 40, "final": false}, "response", "use [REDACTED] now"},
		{"message.outbound.stream", map[string]any{"outgoing": "mail a@b.io", "offset": 0, "final": true}, "outgoing", "mail [REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.point, func(t *testing.T) {
			dec, err := newHost(t).Run(sdktest.Invocation{Point: tt.point, Context: tt.context})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := abi.Marshal(dec.Context[tt.field])
			want, _ := abi.Marshal(tt.want)
			// Numbers arrive as json.Number and encode as numbers; compare
			// the retries field loosely.
			if strings.ReplaceAll(string(want), `"3"`, `3`) != string(got) {
				t.Errorf("%s = %s, want %s", tt.field, got, want)
			}
		})
	}
}

func TestSettingsErrorsFailTheHook(t *testing.T) {
	for name, settings := range map[string]map[string]any{
		"invalid regexp":          {"patterns": []any{"(unclosed"}},
		"invalid extra regexp":    {"extra_patterns": []any{"a{2,1}"}},
		"patterns not an array":   {"patterns": "AKIA.*"},
		"replacement not string":  {"replacement": 1},
		"pattern is not a string": {"patterns": []any{1}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newHost(t).Run(sdktest.Invocation{
				Point:    "message.outbound",
				Context:  map[string]any{"outgoing": "AKIAIOSFODNN7EXAMPLE"},
				Settings: settings,
			})
			if !errors.Is(err, sdktest.ErrHookFailed) || !strings.Contains(err.Error(), "setting") {
				t.Fatalf("err = %v, want a hook failure naming the setting", err)
			}
		})
	}
}

func TestNoCapabilityCalls(t *testing.T) {
	h := newHost(t)
	if _, err := h.Run(sdktest.Invocation{Point: "message.outbound", Context: map[string]any{"outgoing": "a@b.io"}}); err != nil {
		t.Fatal(err)
	}
	if n := len(h.Calls()); n != 0 {
		t.Errorf("a pure hook made %d host calls", n)
	}
}

var update = flag.Bool("update", false, "rewrite the ports' default pattern lists from main.go's")

// TestPortsHoldTheDefaultPatterns: the C, Rust and AssemblyScript ports
// compile their own copy of DefaultPatterns (a language cannot read
// another's source); main.go's is the one source, each copy must equal it,
// in its order, and `go test -run TestPortsHoldTheDefaultPatterns -update`
// rewrites the copies from it.
func TestPortsHoldTheDefaultPatterns(t *testing.T) {
	// A list is the lines after its declaration's line, up to its closing
	// line; each element is a C or TypeScript string Go can unquote, or a
	// Rust raw string.
	quoted := regexp.MustCompile(`^\s*("(?:[^"\\]|\\.)*"|r"[^"]*"),$`)
	cQuote := func(p string) string { return strconv.Quote(p) }
	for _, port := range []struct {
		file, decl, close, indent string
		quote                     func(string) string
	}{
		{"c/hook.c", "static const char *const default_patterns[] = {", "};", "\t", cQuote},
		{"rust/hook.rs", fmt.Sprintf("const DEFAULT_PATTERNS: [&str; %d] = [", len(DefaultPatterns)), "];", "    ", func(p string) string { return `r"` + p + `"` }},
		{"assemblyscript/hook.ts", "const DEFAULT_PATTERNS: string[] = [", "];", "  ", cQuote},
	} {
		t.Run(port.file, func(t *testing.T) {
			b, err := os.ReadFile(port.file)
			if err != nil {
				t.Fatal(err)
			}
			// The declaration's line is found by its name (the Rust one
			// holds the list's length).
			name, _, _ := strings.Cut(port.decl, "[")
			head, rest, ok := strings.Cut(string(b), "\n"+name+"[")
			decl, rest, _ := strings.Cut(rest, "\n")
			body, tail, ok2 := strings.Cut(rest, "\n"+port.close+"\n")
			if !ok || !ok2 {
				t.Fatalf("no list from %q to %q", name, port.close)
			}
			if decl = name + "[" + decl; decl != port.decl && !*update {
				t.Errorf("declaration %q, want %q", decl, port.decl)
			}
			if *update {
				var w strings.Builder
				for i, p := range DefaultPatterns {
					if i > 0 {
						w.WriteString("\n")
					}
					w.WriteString(port.indent + port.quote(p) + ",")
				}
				out := head + "\n" + port.decl + "\n" + w.String() + "\n" + port.close + "\n" + tail
				if err := os.WriteFile(port.file, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				body = w.String()
			}
			var got []string
			for _, line := range strings.Split(body, "\n") {
				m := quoted.FindStringSubmatch(line)
				if m == nil {
					t.Fatalf("not a string of the list: %q", line)
				}
				s, err := strconv.Unquote(m[1])
				if raw, ok := strings.CutPrefix(m[1], "r"); ok {
					s, err = raw[1:len(raw)-1], nil
				}
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				got = append(got, s)
			}
			if !slices.Equal(got, DefaultPatterns) {
				t.Errorf("default patterns differ from main.go's (go test -run TestPortsHoldTheDefaultPatterns -update rewrites them):\n got %q\nwant %q", got, DefaultPatterns)
			}
		})
	}
}
