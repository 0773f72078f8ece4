package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	extism "github.com/extism/go-sdk"

	"github.com/wasmhooks/wasmhooks/bench/internal/redact"
)

// BenchmarkCases runs every case as a sub-benchmark. CI runs it once per
// case with -benchtime=1x so that none can rot; `make bench` runs the table
// (cmd/benchtable) instead.
func BenchmarkCases(b *testing.B) {
	for _, c := range Cases() {
		if c.Run == nil {
			continue
		}
		b.Run(c.Name, c.Run)
	}
}

// TestSharedRedaction holds the two WAT guests to the same redaction code:
// they may differ only in how bytes get in and out.
func TestSharedRedaction(t *testing.T) {
	shared := func(file string) string {
		b, err := os.ReadFile(filepath.Join("guests", file))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		i, j := strings.Index(s, "\n  ;; BEGIN SHARED\n"), strings.Index(s, "\n  ;; END SHARED\n")
		if i < 0 || j < i {
			t.Fatalf("%s has no shared section", file)
		}
		return s[i:j]
	}
	if shared("redact.wat") != shared("extism_redact.wat") {
		t.Error("the shared redaction code of redact.wat and extism_redact.wat differs")
	}
}

func TestRedact(t *testing.T) {
	for _, c := range []struct {
		in, out string
		n       int
	}{
		{"", "", 0},
		{"no secret", "no secret", 0},
		{"AKIAIOSFODNN7EXAMPLE", "[REDACTED]", 1},
		{"xAKIAIOSFODNN7EXAMPLEx AKIA0123456789ABCDEF", "x[REDACTED]x [REDACTED]", 2},
		{"AKIAIOSFODNN7EXAMPLe", "AKIAIOSFODNN7EXAMPLe", 0},
		{"AKIAAKIAIOSFODNN7EXAMPLE", "[REDACTED]MPLE", 1},
		{"AKIAakiaIOSFODNN7EXAMPLE AKIA", "AKIAakiaIOSFODNN7EXAMPLE AKIA", 0},
	} {
		out, n := redact.Redact(c.in)
		if out != c.out || n != c.n {
			t.Errorf("Redact(%q) = %q, %d; want %q, %d", c.in, out, n, c.out, c.n)
		}
	}
	if got := Text(); len(got) != TextBytes || strings.Count(got, Secret) != 1 {
		t.Errorf("Text() is %d bytes with %d secrets", len(got), strings.Count(got, Secret))
	}
}

// TestVariantsAgree checks that every redaction variant returns the same
// canonical decision, byte for byte, including on text that needs escaping.
func TestVariantsAgree(t *testing.T) {
	e, err := Setup()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := e.Extism(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	for _, text := range []string{
		Text(),
		"nothing to see",
		"two: AKIAIOSFODNN7EXAMPLE and \"AKIA0123456789ABCDEF\"\n<tab>\t\u2028 é 😀 AKIAIOSFODNN7EXAMPLE",
	} {
		req := e.Request
		req.Context = map[string]any{"outgoing": text}
		doc, err := document(req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := NativeJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{GoRedact, WATRedact} {
			m, err := e.Module(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.RT.Invoke(ctx, m, req)
			if err != nil {
				t.Fatal(name, err)
			}
			got, err := res.Decision.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s on %q:\n%s\nwant\n%s", name, text, got, want)
			}
		}
		got, err := ExtismCall(p, "redact", doc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("extism on %q:\n%s\nwant\n%s", text, got, want)
		}
	}
}
