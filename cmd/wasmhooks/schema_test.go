package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// exponentialSchema is the review's schema: n $defs, each an allOf of two
// $refs to the previous one, so that validating {} against d<n> validates it
// 2^n times.
func exponentialSchema(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","$defs":{"d0":{"type":"object"}`)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `,"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i-1, i-1)
	}
	fmt.Fprintf(&b, `},"$ref":"#/$defs/d%d"}`, n)
	return b.String()
}

// Threat: a hook's settings_schema is its author's, so untrusted: a 2.6 KB
// schema that validates {} 2^40 times hung chain.New, Reload (under its
// lock) and `wasmhooks run`, while `validate` and `manifest embed` accepted
// it, and also accepted a schema that does not compile, which `run` then
// refused (issue 10, section 3). Defence: one check of a settings schema
// (chain.CheckSettingsSchema: no references, at most MaxSettingsSchemaValues
// values, must compile) that `validate`, `manifest embed`, `run` and `chain`
// all call. This test proves, over a table of schemas, that the four agree
// and that none of them takes long.
func TestSettingsSchemaOneVerdict(t *testing.T) {
	root := testutil.Root(t)
	base, err := os.ReadFile(filepath.Join(root, "testdata", "guests", "shapes.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	var many strings.Builder
	many.WriteString(`{"type":"object","not":{"enum":[0`)
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&many, ",%d", i)
	}
	many.WriteString(`]}}`)
	tests := []struct {
		name, schema string
		ok           bool
	}{
		{"empty", `{}`, true},
		{"object", `{"type":"object"}`, true},
		{"properties", `{"type":"object","properties":{"shape":{"type":"string","maxLength":20}},"additionalProperties":false}`, true},
		{"defs without refs", `{"type":"object","$defs":{"unused":{"type":"string"}}}`, true},
		{"combinators", `{"type":"object","allOf":[{"type":"object"},{"not":{"required":["z"]}}],"anyOf":[{"maxProperties":3},{"type":"object"}]}`, true},
		{"exponential refs", exponentialSchema(40), false},
		{"one local ref", `{"$defs":{"a":{"type":"object"}},"$ref":"#/$defs/a"}`, false},
		{"remote ref", `{"$ref":"https://example.com/schema.json"}`, false},
		{"file ref", `{"$ref":"file:///etc/passwd"}`, false},
		{"nested dynamic ref", `{"type":"object","properties":{"a":{"$dynamicRef":"#x"}}}`, false},
		{"does not compile", `{"type":"objekt"}`, false},
		{"bad minimum", `{"type":"object","minProperties":-1}`, false},
		{"unknown meta-schema", `{"$schema":"https://example.com/meta","type":"object"}`, false},
		{"too many values", many.String(), false},
	}
	dir := t.TempDir()
	exec := func(t *testing.T, args ...string) (int, string) {
		t.Helper()
		stdout, stderr, code := runCLIWithin(t, args...) // a refused schema is refused in milliseconds
		return code, stdout + stderr
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifest := fmt.Sprintf(`{"name":"schema-%d","points":["message.outbound"],"settings_schema":%s}`, i, tt.schema)
			manPath := filepath.Join(dir, fmt.Sprintf("m%d.json", i))
			if err := os.WriteFile(manPath, []byte(manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			// The module as a toolchain would embed it, bypassing the CLI.
			wasm, err := runtime.EmbedManifest(base, []byte(manifest))
			if err != nil {
				t.Fatalf("EmbedManifest: %v", err)
			}
			hook := filepath.Join(dir, fmt.Sprintf("h%d.wasm", i))
			if err := os.WriteFile(hook, wasm, 0o600); err != nil {
				t.Fatal(err)
			}
			config := filepath.Join(dir, fmt.Sprintf("c%d.json", i))
			if err := os.WriteFile(config, fmt.Appendf(nil, `{"modules":{"m":%q},"bindings":[{"name":"b","module":"m","point":"message.outbound","phase":"guard"}]}`, hook), 0o600); err != nil {
				t.Fatal(err)
			}
			want := exitOK
			if !tt.ok {
				want = exitRefused
			}
			for _, args := range [][]string{
				{"validate", hook},
				{"manifest", "embed", "--manifest", manPath, "--out", filepath.Join(dir, fmt.Sprintf("o%d.wasm", i)), filepath.Join(root, "testdata", "guests", "shapes.wasm")},
				{"run", "--cache-dir=", "--hook", hook},
				{"chain", "--cache-dir=", "--config", config, "--point", "message.outbound"},
			} {
				code, out := exec(t, args...)
				if code != want {
					t.Errorf("%s: exit %d, want %d\n%s", args[0], code, want, out)
					continue
				}
				if !tt.ok && !strings.Contains(out, "settings_schema") {
					t.Errorf("%s: the refusal does not name the settings_schema:\n%s", args[0], out)
				}
			}
		})
	}
}
