package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var durationRE = regexp.MustCompile(`"duration_ms": [0-9.e+-]+`)

// golden compares got with testdata/NAME.golden, after normalising timings.
var fuelUsedRE = regexp.MustCompile(`"fuel_used": [0-9]+`)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = durationRE.ReplaceAll(got, []byte(`"duration_ms": 0`))
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/wasmhooks -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRun(t *testing.T) {
	root := testutil.Root(t)
	shapes := filepath.Join(root, "testdata", "guests", "shapes.wasm")
	scripted := filepath.Join(root, "testdata", "guests", "scripted.wasm")
	input := writeTemp(t, "in.json", `{"incoming":"hi","outgoing":"hello"}`)
	trap := writeTemp(t, "trap.json", `{"outgoing":"@@U"}`)
	garbage := writeTemp(t, "garbage.wasm", "not wasm")
	tests := []struct {
		name  string
		args  []string
		stdin string
		exit  int
	}{
		{"wat-continue", []string{"run", "--hook", shapes, "--input", input}, "", exitOK},
		{"wat-canonical", []string{"run", "--hook", shapes, "--input", input, "--settings", `{"shape":"canonical"}`}, "", exitOK},
		{"wat-top-level", []string{"run", "--hook", shapes, "--input", "-", "--settings", `{"shape":"top-level"}`}, `{"outgoing":"x"}`, exitOK},
		{"wat-outcome", []string{"run", "--hook", shapes, "--input", input, "--settings", `{"shape":"outcome"}`}, "", exitOK},
		{"wat-legacy", []string{"run", "--hook", shapes, "--input", input, "--settings", `{"shape":"legacy"}`}, "", exitOK},
		{"fail-closed", []string{"run", "--hook", scripted, "--input", trap}, "", exitOK},
		{"fail-open", []string{"run", "--hook", scripted, "--input", trap, "--fail", "open"}, "", exitOK},
		{"timeout", []string{"run", "--hook", scripted, "--input", writeTemp(t, "loop.json", `{"outgoing":"@@L"}`), "--timeout", "100ms", "--fuel", "4611686018427387904"}, "", exitOK},
		{"load-refused", []string{"run", "--hook", garbage}, "", exitRefused},
		{"bad-input", []string{"run", "--hook", shapes, "--input", "-"}, `{"a":1,"a":2}`, exitUsage},
		{"bad-point", []string{"run", "--hook", shapes, "--point", "nowhere"}, "", exitUsage},
		{"phase-transformer-block", []string{"run", "--hook", shapes, "--input", input, "--settings", `{"shape":"legacy"}`, "--phase", "transformer"}, "", exitOK},
		{"phase-transformer-modify", []string{"run", "--hook", shapes, "--input", input, "--settings", `{"shape":"canonical"}`, "--phase", "transformer"}, "", exitOK},
		{"phase-fail-default", []string{"run", "--hook", scripted, "--point", "message.inbound", "--input", "-", "--phase", "transformer"}, `{"incoming":"@@U"}`, exitOK},
		{"bad-grant", []string{"run", "--hook", shapes, "--grant", "kv.get,shell.exec"}, "", exitUsage},
		{"input-invocation", []string{"run", "--hook", shapes, "--input", "-"}, `{"abi":1,"point":"message.outbound","context":{"outgoing":"x"}}`, exitUsage},
		{"validate", []string{"validate", shapes}, "", exitOK},
		{"validate-refused", []string{"validate", garbage}, "", exitRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := tt.args
			if args[0] == "run" { // no disk cache in tests
				args = append([]string{"run", "--cache-dir="}, args[1:]...)
			}
			code := run(context.Background(), args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.exit {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.exit, stdout.String(), stderr.String())
			}
			out := bytes.ReplaceAll(stdout.Bytes(), []byte(root), []byte("ROOT"))
			out = bytes.ReplaceAll(out, []byte(filepath.Dir(garbage)), []byte("TMP"))
			if tt.name == "timeout" {
				// How far a runaway loop gets before its deadline depends
				// on the machine.
				out = fuelUsedRE.ReplaceAll(out, []byte(`"fuel_used": "N"`))
			}
			golden(t, tt.name, out)
		})
	}
}
