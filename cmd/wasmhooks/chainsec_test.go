package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/approvaltest"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// chainSecEnv runs the CLI's chain in a fresh directory: a pending approval
// on disk and a keyed audit log with its checkpoint.
type chainSecEnv struct {
	dir, approvals, auditFile, keyFile string
	base                               []string
}

func newChainSecEnv(t *testing.T) *chainSecEnv {
	t.Helper()
	root := testutil.Root(t)
	dir := t.TempDir()
	e := &chainSecEnv{dir: dir, approvals: filepath.Join(dir, "approvals"), auditFile: filepath.Join(dir, "audit.jsonl"), keyFile: filepath.Join(dir, "host.key")}
	e.base = []string{"--cache-dir=", "--config", filepath.Join("testdata", "chain.json"), "--module-dir", filepath.Join(root, "testdata", "guests"),
		"--audit", e.auditFile, "--approvals", e.approvals, "--key", e.keyFile}
	for _, in := range []string{`{"outgoing":"hello"}`, `{"outgoing":"the SECRET is 42"}`} {
		if out, code := e.exec(t, in, append(append([]string{"chain"}, e.base...), "--point", "message.outbound", "--input", "-")...); code != exitOK {
			t.Fatalf("exit %d: %s", code, out)
		}
	}
	if out, code := e.exec(t, `{"tool":"shell.exec","arguments":{"command":"rm -rf /"}}`, append(append([]string{"chain"}, e.base...), "--point", "tool.before", "--input", "-")...); code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	return e
}

func (e *chainSecEnv) exec(t *testing.T, stdin string, args ...string) ([]byte, int) {
	t.Helper()
	stdout, _, code := runCLI(stdin, args...)
	return []byte(stdout), code
}

func (e *chainSecEnv) pending(t *testing.T) string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(e.approvals, "*.json"))
	if len(names) != 1 {
		t.Fatalf("%d approvals on disk", len(names))
	}
	return strings.TrimSuffix(filepath.Base(names[0]), ".json")
}

func (e *chainSecEnv) resolve(t *testing.T, id, decision string) ([]byte, int) {
	return e.exec(t, "", append(append([]string{"chain", "resolve"}, e.base...), "--id", id, "--decision", decision)...)
}

// TestChainResolveRefusesTamperedApprovals: `chain resolve` on a rewritten
// approval file gives a typed error and exit 1, never a Go panic, and leaves
// the file as it was.
func TestChainResolveRefusesTamperedApprovals(t *testing.T) {
	state := approvaltest.EditState
	tests := []struct {
		name string
		edit func(m map[string]any)
		raw  string
		code string
	}{
		{"next -1", state(func(st map[string]any) { st["next"] = -1 }), "", "approval_seal"},
		{"next skips a guard", state(func(st map[string]any) { st["next"] = 9 }), "", "approval_seal"},
		{"tenant", func(m map[string]any) { m["tenant"] = "other"; m["state"].(map[string]any)["tenant"] = "other" }, "", "approval_seal"},
		{"expiry", func(m map[string]any) { m["expires"] = "2099-01-01T00:00:00Z" }, "", "approval_seal"},
		{"module", func(m map[string]any) { m["module"] = strings.Repeat("0", 64) }, "", "approval_seal"},
		{"garbage", nil, `{"garbage": true}`, "approval_seal"},
		{"not json", nil, `{"garb`, "approval_corrupt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newChainSecEnv(t)
			id := e.pending(t)
			path := filepath.Join(e.approvals, id+".json")
			b := approvaltest.TamperFile(t, path, tt.raw, tt.edit)
			out, code := e.resolve(t, id, "approve")
			var doc errorDoc
			if code != exitRefused || json.Unmarshal(out, &doc) != nil || doc.Error.Code != tt.code {
				t.Fatalf("exit %d, want %d with %s:\n%s", code, exitRefused, tt.code, out)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, b) {
				t.Errorf("the refused approval file changed")
			}
		})
	}
	t.Run("restored after resolution", func(t *testing.T) {
		e := newChainSecEnv(t)
		id := e.pending(t)
		path := filepath.Join(e.approvals, id+".json")
		saved, _ := os.ReadFile(path)
		if out, code := e.resolve(t, id, "deny"); code != exitOK {
			t.Fatalf("deny: exit %d %s", code, out)
		}
		if err := os.WriteFile(path, saved, 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := e.resolve(t, id, "approve")
		if code != exitRefused || !bytes.Contains(out, []byte(`"approval_resolved"`)) {
			t.Fatalf("restored file: exit %d %s", code, out)
		}
	})
	t.Run("another host key", func(t *testing.T) {
		e := newChainSecEnv(t)
		id := e.pending(t)
		e.base[len(e.base)-1] = filepath.Join(e.dir, "other.key")
		e.base[6] = filepath.Join(e.dir, "other-audit.jsonl") // the audit log under the other key
		out, code := e.resolve(t, id, "approve")
		if code != exitRefused || !bytes.Contains(out, []byte(`"approval_seal"`)) {
			t.Fatalf("exit %d %s", code, out)
		}
	})
}

// TestChainVerifyWithKey: `chain verify --key` finds every rewrite of the
// log that someone without the key can make; without --key a rewritten,
// rehashed log verifies (and the command says only the hash chain was
// checked).
func TestChainVerifyWithKey(t *testing.T) {
	rechain := audittest.Rechain
	tests := []struct {
		name string
		edit func([]audit.Record) []audit.Record
	}{
		{"block rewritten as continue, rehashed", func(r []audit.Record) []audit.Record {
			for i := range r {
				if r[i].Decision == "block" {
					r[i].Decision = "continue"
				}
			}
			return rechain(r)
		}},
		{"forged record appended", func(r []audit.Record) []audit.Record {
			f := r[0]
			f.Binding = "forged"
			return rechain(append(r, f))
		}},
		{"inserted", func(r []audit.Record) []audit.Record {
			return rechain(append(r[:2:2], append([]audit.Record{r[0]}, r[2:]...)...))
		}},
		{"deleted", func(r []audit.Record) []audit.Record { return rechain(append(r[:1:1], r[2:]...)) }},
		{"reordered", func(r []audit.Record) []audit.Record { r[0], r[1] = r[1], r[0]; return rechain(r) }},
		{"truncated", func(r []audit.Record) []audit.Record { return r[:len(r)-2] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newChainSecEnv(t)
			if out, code := e.exec(t, "", "chain", "verify", "--key", e.keyFile, e.auditFile); code != exitOK || !bytes.Contains(out, []byte(`"keyed": true`)) {
				t.Fatalf("untouched log: exit %d %s", code, out)
			}
			recs, err := audit.ReadFile(e.auditFile)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			for _, r := range tt.edit(recs) {
				b, _ := json.Marshal(r)
				buf.Write(append(b, '\n'))
			}
			if err := os.WriteFile(e.auditFile, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, code := e.exec(t, "", "chain", "verify", e.auditFile); code != exitOK {
				t.Fatalf("unkeyed verify is meant to miss this rewrite: exit %d %s", code, out)
			}
			out, code := e.exec(t, "", "chain", "verify", "--key", e.keyFile, e.auditFile)
			if code != exitRefused || !bytes.Contains(out, []byte(`"audit_broken"`)) {
				t.Fatalf("keyed verify: exit %d %s", code, out)
			}
			// The next run does not append after the rewritten log.
			out, code = e.exec(t, `{"outgoing":"hi"}`, append(append([]string{"chain"}, e.base...), "--point", "message.outbound", "--input", "-")...)
			if code != exitRefused || !bytes.Contains(out, []byte(`"audit"`)) {
				t.Fatalf("chain on a rewritten log: exit %d %s", code, out)
			}
		})
	}
	t.Run("missing checkpoint", func(t *testing.T) {
		e := newChainSecEnv(t)
		os.Remove(e.auditFile + ".checkpoint")
		out, code := e.exec(t, "", "chain", "verify", "--key", e.keyFile, e.auditFile)
		if code != exitRefused || !bytes.Contains(out, []byte(`"checkpoint_missing"`)) {
			t.Fatalf("exit %d %s", code, out)
		}
	})
	t.Run("key readable by others", func(t *testing.T) {
		e := newChainSecEnv(t)
		os.Chmod(e.keyFile, 0o644)
		out, code := e.exec(t, "", "chain", "verify", "--key", e.keyFile, e.auditFile)
		if code != exitRefused || !bytes.Contains(out, []byte(`"key"`)) {
			t.Fatalf("exit %d %s", code, out)
		}
	})
}
