package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// chainNormalisers replace what changes from run to run (ids, times, hashes,
// latencies) with fixed words, so chain output can be compared with golden
// files. The hash chain itself is checked by `chain verify` below and by the
// chain package's tests.
var chainNormalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"(run|id|approval)": "[0-9a-f]{24}"`), `"$1": "ID"`},
	{regexp.MustCompile(`"invocation": "[0-9a-f]{24}\.`), `"invocation": "ID.`},
	{regexp.MustCompile(`"(time|created|expires|started)": "[^"]+"`), `"$1": "TIME"`},
	{regexp.MustCompile(`"(hash|prev|audit|seal|mac)": "[0-9a-f]{16}([0-9a-f]{48})?"`), `"$1": "HASH"`},
	{regexp.MustCompile(`"latency_us": [0-9]+`), `"latency_us": 0`},
	// A step's fuel depends on its input, which holds the random run id
	// (the WAT test hooks search their input byte by byte).
	{regexp.MustCompile(`"fuel_used": [0-9]+`), `"fuel_used": "N"`},
}

func normaliseChain(b []byte) []byte {
	for _, n := range chainNormalisers {
		b = n.re.ReplaceAll(b, []byte(n.with))
	}
	return b
}

func TestChain(t *testing.T) {
	root := testutil.Root(t)
	dir := t.TempDir()
	guests := filepath.Join(root, "testdata", "guests")
	config := filepath.Join("testdata", "chain.json")
	approvals := filepath.Join(dir, "approvals")
	auditFile := filepath.Join(dir, "audit.jsonl")
	keyFile := filepath.Join(dir, "host.key")
	base := []string{"chain", "--cache-dir=", "--config", config, "--module-dir", guests, "--audit", auditFile, "--approvals", approvals, "--key", keyFile}
	dup := writeTemp(t, "dup.json", `{"modules":{"p":"policy.wasm"},"bindings":[
		{"name":"a","module":"p","point":"message.outbound","phase":"guard"},
		{"name":"a","module":"p","point":"message.outbound","phase":"guard","priority":-1}]}`)

	exec := func(t *testing.T, stdin string, args ...string) ([]byte, int) {
		t.Helper()
		stdout, _, code := runCLI(stdin, args...)
		out := bytes.ReplaceAll([]byte(stdout), []byte(root), []byte("ROOT"))
		out = bytes.ReplaceAll(out, []byte(dir), []byte("TMP"))
		return normaliseChain(out), code
	}
	steps := []struct {
		name  string
		args  []string
		stdin string
		exit  int
	}{
		{"chain-allow", append(base, "--point", "message.outbound", "--input", "-"), `{"outgoing":"hello"}`, exitOK},
		{"chain-block", append(base, "--brief", "--point", "message.outbound", "--input", "-"), `{"outgoing":"the SECRET is 42"}`, exitOK},
		{"chain-fail-closed", append(base, "--brief", "--point", "message.inbound", "--input", "-"), `{"incoming":"hi"}`, exitOK},
		{"chain-pending", append(base, "--brief", "--point", "tool.before", "--input", "-"), `{"tool":"shell.exec","arguments":{"command":"ls"}}`, exitOK},
		{"chain-verify", []string{"chain", "verify", "--key", keyFile, auditFile}, "", exitOK},
		{"chain-bad-config", []string{"chain", "--cache-dir=", "--config", dup, "--module-dir", guests, "--point", "message.outbound"}, "", exitRefused},
		{"chain-bad-point", append(base, "--point", "nowhere"), "", exitUsage},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			out, code := exec(t, s.stdin, s.args...)
			if code != s.exit {
				t.Fatalf("exit %d, want %d\n%s", code, s.exit, out)
			}
			golden(t, s.name, out)
		})
	}

	// The pending approval is on disk; a new process resolves it.
	entries, err := os.ReadDir(approvals)
	if err != nil || len(entries) != 1 {
		t.Fatalf("approvals on disk: %v, %v", entries, err)
	}
	id := strings.TrimSuffix(entries[0].Name(), ".json")
	t.Run("chain-resolve-deny", func(t *testing.T) {
		args := append([]string{"chain", "resolve"}, base[1:]...)
		args = append(args, "--brief", "--id", id, "--decision", "deny", "--actor", "alice", "--reason", "not on a Friday")
		out, code := exec(t, "", args...)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		golden(t, "chain-resolve-deny", out)
		// Resolved exactly once: its tombstone says so.
		out, code = exec(t, "", args...)
		if code != exitRefused || !bytes.Contains(out, []byte("approval_resolved")) {
			t.Errorf("second resolve: exit %d\n%s", code, out)
		}
	})

	t.Run("chain-verify-broken", func(t *testing.T) {
		b, err := os.ReadFile(auditFile)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 9 {
			t.Fatalf("%d audit records, want 9 (3 + 1 + 1 + 1 + 1 ask + 1 deny, and verify appended none)", len(lines))
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[5]), &rec); err != nil || rec["decision"] != "block" {
			t.Fatalf("record 5: %v %v", rec, err)
		}
		lines[5] = strings.Replace(lines[5], `"decision":"block"`, `"decision":"continue"`, 1)
		broken := filepath.Join(dir, "broken.jsonl")
		if err := os.WriteFile(broken, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := exec(t, "", "chain", "verify", broken)
		if code != exitRefused {
			t.Fatalf("exit %d\n%s", code, out)
		}
		golden(t, "chain-verify-broken", out)
	})
}

// The brief outcome shows a guard's short_circuit, the guards it skipped
// and why, and the wire shape of a legacy decision (ABI 1.2).
func TestChainShortCircuitBrief(t *testing.T) {
	root := testutil.Root(t)
	guests := filepath.Join(root, "testdata", "guests")
	config := writeTemp(t, "sc.json", `{"modules":{"p":"policy.wasm"},"bindings":[
		{"name":"trusted","module":"p","point":"message.inbound","phase":"guard","priority":1,
		 "settings":{"when":"TRUSTED","decide":{"action":"allow","short_circuit":true,"reason":"trusted sender"}}},
		{"name":"legacy-deny","module":"p","point":"message.inbound","phase":"guard","priority":2,
		 "settings":{"decide":{"abort":true,"reason":"legacy says no"}}}]}`)
	for _, tt := range []struct{ name, input string }{
		{"chain-short-circuit", `{"incoming":"TRUSTED hello"}`},
		{"chain-legacy-wire", `{"incoming":"hello"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(tt.input, "chain", "--cache-dir=", "--config", config, "--module-dir", guests,
				"--brief", "--point", "message.inbound", "--input", "-")
			if code != exitOK {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			golden(t, tt.name, normaliseChain([]byte(stdout)))
		})
	}
}
