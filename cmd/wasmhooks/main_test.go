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
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var durationRE = regexp.MustCompile(`"duration_ms": [0-9.e+-]+`)

// golden compares got with testdata/NAME.golden, after normalising timings.
var fuelUsedRE = regexp.MustCompile(`"fuel_used": [0-9]+`)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = durationRE.ReplaceAll(got, []byte(`"duration_ms": 0`))
	testutil.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// runCLI runs the command line with args, stdin as its standard input, as
// main does, and returns what it printed on stdout and stderr and its exit
// code.
func runCLI(stdin string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// runCLIWithin is runCLI with nothing on standard input, failing t if the
// command has not returned in 30 s (it blocks, or reads without end).
func runCLIWithin(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	type result struct {
		stdout, stderr string
		code           int
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.stdout, r.stderr, r.code = runCLI("", args...)
		done <- r
	}()
	select {
	case r := <-done:
		return r.stdout, r.stderr, r.code
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not return", args)
		return "", "", 0
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
			args := tt.args
			if args[0] == "run" { // no disk cache in tests
				args = append([]string{"run", "--cache-dir="}, args[1:]...)
			}
			stdout, stderr, code := runCLI(tt.stdin, args...)
			if code != tt.exit {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.exit, stdout, stderr)
			}
			out := bytes.ReplaceAll([]byte(stdout), []byte(root), []byte("ROOT"))
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

// `run` is a chain of one binding: what the chain refuses in its
// configuration, `run` refuses with the code and exit status of the flag or
// module behind it, and its own usage is answered as the other commands'.
func TestRunRefusals(t *testing.T) {
	root := testutil.Root(t)
	shapes := filepath.Join(root, "testdata", "guests", "shapes.wasm")
	base, err := os.ReadFile(shapes)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := runtime.EmbedManifest(base, []byte(`{"name":"shapes","points":["message.inbound"],
		"settings_schema":{"type":"object","properties":{"shape":{"type":"string"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(t.TempDir(), "shapes.wasm")
	if err := os.WriteFile(hook, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		exit   int
		stdout string // in stdout
		stderr string // in stderr
	}{
		{"settings not matching the schema", []string{"--hook", hook, "--point", "message.inbound", "--settings", `{"shape":1}`}, exitRefused, `"code": "invalid_settings"`, ""},
		{"settings matching the schema", []string{"--hook", hook, "--point", "message.inbound", "--settings", `{"shape":"legacy"}`}, exitOK, `"legacy block"`, ""},
		{"point the manifest does not allow", []string{"--hook", hook}, exitUsage, `does not allow point message.outbound`, ""},
		{"name the chain refuses", []string{"--hook", shapes, "--name", "a name"}, exitUsage, `the name must be 1-64 letters`, ""},
		{"memory over the ceiling", []string{"--hook", shapes, "--memory-pages", "1000000"}, exitUsage, `"code": "limit_exceeded"`, ""},
		{"observer failing closed", []string{"--hook", shapes, "--phase", "observer", "--fail", "closed"}, exitUsage, `an observer cannot fail closed`, ""},
		{"unknown phase", []string{"--hook", shapes, "--phase", "bouncer"}, exitUsage, `unknown phase \"bouncer\" (want observer, transformer or guard)`, ""},
		{"unknown fail policy", []string{"--hook", shapes, "--fail", "ajar"}, exitUsage, `unknown fail policy \"ajar\" (want open or closed)`, ""},
		{"named hook", []string{"--hook", shapes, "--name", "my-hook", "--settings", `{"shape":"legacy"}`}, exitOK, `"legacy block"`, ""},
		{"help", []string{"--help"}, exitOK, "-phase", ""},
		{"unknown flag", []string{"--hook", shapes, "--nope"}, exitUsage, "", "-phase"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runCLI("", append([]string{"run", "--cache-dir="}, tt.args...)...)
			if code != tt.exit || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, want %d with %q in stdout and %q in stderr\nstdout: %s\nstderr: %s",
					code, tt.exit, tt.stdout, tt.stderr, stdout, stderr)
			}
		})
	}
}

// A context object that happens to have a member named "context" among
// others is a context, not an invocation document.
func TestIsInvocation(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"point":"message.outbound","context":{"outgoing":"x"}}`: true,
		`{"abi":1,"context":{},"settings":{},"meta":{}}`:          true,
		`{"context":{"outgoing":"x"}}`:                            true,
		`{"outgoing":"x","context":{"a":1}}`:                      false,
		`{"point":"message.outbound","context":"not an object"}`:  false,
		`{"outgoing":"hello"}`:                                    false,
	} {
		_, err := readContext("-", strings.NewReader(doc))
		if got := err != nil; got != want {
			t.Errorf("%s: refused %v, want %v (%v)", doc, got, want, err)
		}
	}
}

// --help is an answer, not a usage error: every command prints its synopsis
// and each flag's help on stdout and exits 0 (issue 15: `run --help` exited
// 2, `chain --help` printed the synopsis alone).
func TestHelpExitsZero(t *testing.T) {
	for _, tt := range []struct {
		args []string
		flag string // a flag its help describes
	}{
		{[]string{"run", "--help"}, "-phase"},
		{[]string{"run", "-h"}, "-fuel"},
		{[]string{"chain", "--help"}, "-audit-checkpoint"},
		{[]string{"chain", "resolve", "--help"}, "-decision"},
		{[]string{"chain", "verify", "--help"}, "-checkpoint"},
	} {
		stdout, stderr, code := runCLI("", tt.args...)
		if code != exitOK || !strings.Contains(stdout, tt.flag) || !strings.Contains(stdout, "usage:") {
			t.Errorf("%v: exit %d, want 0 with the usage and %s on stdout\nstdout: %s\nstderr: %s", tt.args, code, tt.flag, stdout, stderr)
		}
	}
}
