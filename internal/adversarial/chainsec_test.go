package adversarial

// Issue 10, sections 7 and 8: hostile hooks in a chain (phases that claim
// what belongs to guards, a transformer that grows the traffic past what the
// guards after it take, wrongly typed modifies) and a hostile writer of the
// approvals directory and of the audit log. Each chain runs on the world's
// runtime and runner, so the invariants are checked after every case.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/approvaltest"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

var chainsecKey = []byte("adversarial host key, 32 bytes or longer")

// chainsecWorld is a chain on a world, its approvals in a directory and its
// audit log keyed, with a checkpoint, as cmd/wasmhooks keeps them.
type chainsecWorld struct {
	w                         *world
	c                         *chain.Chain
	dir, approvals, log, ckpt string
}

func policyWasm(t *testing.T) []byte {
	return testutil.ReadFile(t, filepath.Join("testdata", "guests", "policy.wasm"))
}

func decideSettings(t *testing.T, d string) map[string]any {
	var v any
	if err := json.Unmarshal([]byte(d), &v); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"decide": v}
}

func newChainsecWorld(t *testing.T, bindings ...chain.Binding) *chainsecWorld {
	t.Helper()
	w := newWorld(t)
	dir := t.TempDir()
	cw := &chainsecWorld{w: w, dir: dir, approvals: filepath.Join(dir, "approvals"), log: filepath.Join(dir, "audit.jsonl"), ckpt: filepath.Join(dir, "ckpt", "audit.checkpoint")}
	if err := os.MkdirAll(filepath.Dir(cw.ckpt), 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := chain.NewDirApprovals(cw.approvals)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := audit.OpenFile(cw.log, audit.FileOptions{Key: chainsecKey, Checkpoint: cw.ckpt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	cw.c, err = chain.New(context.Background(), chainsecConfig(t, bindings...), chain.Options{
		Runtime: w.rt, HostCaller: w.runner, Audit: sink, Approvals: store, ApprovalKey: chainsecKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cw.c.Close(context.Background()) })
	return cw
}

func chainsecConfig(t *testing.T, bindings ...chain.Binding) chain.Config {
	cfg := chain.Config{Modules: map[string][]byte{"policy": policyWasm(t)}}
	for _, b := range bindings {
		if b.Module == "" {
			b.Module = "policy"
		}
		cfg.Bindings = append(cfg.Bindings, b)
	}
	return cfg
}

func (cw *chainsecWorld) run(t *testing.T, point string, ctx map[string]any) *chain.Outcome {
	t.Helper()
	out, err := cw.c.Run(context.Background(), chain.Input{Tenant: "acme", Point: point, Context: ctx})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out
}

// §7: do_not_reply_again from an observer or a transformer is ignored and
// reported, as their block and ask are.
func TestChainsecDoNotReplyAgainBelongsToGuards(t *testing.T) {
	cw := newChainsecWorld(t,
		chain.Binding{Name: "obs", Point: "message.outbound", Phase: chain.Observer, Settings: decideSettings(t, `{"action":"continue","do_not_reply_again":true}`)},
		chain.Binding{Name: "tx", Point: "message.outbound", Phase: chain.Transformer, Fail: chain.FailOpen,
			Settings: decideSettings(t, `{"action":"modify","context":{"outgoing":"x"},"do_not_reply_again":true}`)},
	)
	out := cw.run(t, "message.outbound", map[string]any{"outgoing": "hi"})
	if out.DoNotReplyAgain {
		t.Fatal("an observer or a transformer set do_not_reply_again")
	}
	if len(out.Trace) != 2 || len(out.Records()) != 2 {
		t.Fatalf("trace %+v, audit %+v; want the two steps", out.Trace, out.Records())
	}
	for i, st := range out.Trace {
		if !strings.Contains(st.Ignored, "do_not_reply_again") || !strings.Contains(out.Records()[i].Ignored, "do_not_reply_again") {
			t.Errorf("step %s: ignored %q, audit %q", st.Binding, st.Ignored, out.Records()[i].Ignored)
		}
	}
}

// §7: a transformer that grows the text to its output limit cannot make the
// guard after it fail: the overrun is the transformer's own failure, the
// guard's breaker never opens, and the guard still blocks what it should.
func TestChainsecTransformerCannotFailAGuardBySize(t *testing.T) {
	cw := newChainsecWorld(t,
		chain.Binding{Name: "grow", Point: "message.outbound", Phase: chain.Transformer, Fail: chain.FailOpen,
			Settings: map[string]any{"when": "grow", "field": "outgoing", "append": strings.Repeat("A", 48<<10)}},
		chain.Binding{Name: "guard", Point: "message.outbound", Phase: chain.Guard, Limits: runtime.Limits{MaxInputBytes: 32 << 10},
			Settings: map[string]any{"when": "rm -rf", "decide": map[string]any{"action": "block", "reason": "destructive"}}},
	)
	for i := 0; i < 8; i++ {
		out := cw.run(t, "message.outbound", map[string]any{"outgoing": "grow"})
		if out.Verdict != chain.Allow || out.Trace[1].Failure != nil {
			t.Fatalf("run %d: %s by %s, guard %+v", i, out.Verdict, out.Binding, out.Trace[1].Failure)
		}
		if f := out.Trace[0].Failure; f == nil || (f.Code != abi.FailOutputTooLarge && f.Code != abi.FailCircuitOpen) {
			t.Fatalf("run %d: transformer %+v", i, f)
		}
	}
	out := cw.run(t, "message.outbound", map[string]any{"outgoing": "rm -rf /"})
	if out.Verdict != chain.Block || out.Binding != "guard" || out.By != chain.ByHook {
		t.Fatalf("clean traffic: %s by %s/%s", out.Verdict, out.Binding, out.By)
	}
}

// §7: a modify must give each changed field the point's type for it.
func TestChainsecWronglyTypedModify(t *testing.T) {
	for _, tt := range []struct{ point, field, value string }{
		{"message.outbound", "outgoing", "null"},
		{"message.outbound", "outgoing", `{"a":1}`},
		{"message.outbound", "outgoing", "12"},
		{"context.assemble", "items", `"text"`},
		{"context.assemble", "items", `[{"role":1,"content":"x"}]`},
		{"compaction", "summary", "[]"},
	} {
		t.Run(tt.point+"/"+tt.value, func(t *testing.T) {
			cw := newChainsecWorld(t, chain.Binding{Name: "tx", Point: tt.point, Phase: chain.Transformer, Fail: chain.FailOpen,
				Settings: decideSettings(t, `{"action":"modify","context":{"`+tt.field+`":`+tt.value+`}}`)})
			out := cw.run(t, tt.point, map[string]any{tt.field: "before"})
			if f := out.Trace[0].Failure; f == nil || f.Code != abi.FailInvalidOutput || out.Modified {
				t.Fatalf("failure %+v, modified %v, context %v", f, out.Modified, out.Context)
			}
		})
	}
}

// approvalChain: a guard that asks about shell commands, then one that
// blocks rm -rf.
func approvalChain(t *testing.T) *chainsecWorld {
	return newChainsecWorld(t,
		chain.Binding{Name: "ask", Point: "tool.before", Phase: chain.Guard, Priority: 1,
			Settings: map[string]any{"when": "shell.exec", "decide": map[string]any{"action": "ask", "reason": "shell"}}},
		chain.Binding{Name: "no-rm", Point: "tool.before", Phase: chain.Guard, Priority: 2,
			Settings: map[string]any{"when": "rm -rf", "decide": map[string]any{"action": "block", "reason": "destructive"}}},
	)
}

// §8: whoever can write the approvals directory cannot make the chain resume
// a run other than the one the host paused: every rewrite is a typed refusal
// that leaves the file as it was, and nothing runs or is recorded.
func TestChainsecTamperedApprovals(t *testing.T) {
	state := approvaltest.EditState
	tests := []struct {
		name string
		edit func(map[string]any)
		raw  string
		code string
	}{
		{"next -1", state(func(st map[string]any) { st["next"] = -1 }), "", chain.ApprovalSeal},
		{"next skips no-rm", state(func(st map[string]any) { st["next"] = 2 }), "", chain.ApprovalSeal},
		{"tenant", func(m map[string]any) { m["tenant"] = "victim"; m["state"].(map[string]any)["tenant"] = "victim" }, "", chain.ApprovalSeal},
		{"point", func(m map[string]any) { m["point"] = "message.outbound" }, "", chain.ApprovalSeal},
		{"binding", func(m map[string]any) { m["binding"] = "no-rm" }, "", chain.ApprovalSeal},
		{"module", func(m map[string]any) { m["module"] = strings.Repeat("f", 64) }, "", chain.ApprovalSeal},
		{"expiry", func(m map[string]any) { m["expires"] = "2999-01-01T00:00:00Z" }, "", chain.ApprovalSeal},
		{"config", state(func(st map[string]any) { st["config"] = "sha256:other" }), "", chain.ApprovalSeal},
		{"id", func(m map[string]any) { m["id"] = "abcdef" }, "", chain.ApprovalSeal},
		{"garbage", nil, `{"garbage": true}`, chain.ApprovalSeal},
		{"not json", nil, `]`, chain.ApprovalCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cw := approvalChain(t)
			ap := cw.run(t, "tool.before", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "rm -rf /"}}).Approval
			path := filepath.Join(cw.approvals, ap.ID+".json")
			b := approvaltest.TamperFile(t, path, tt.raw, tt.edit)
			n, err := audit.VerifyFileWith(cw.log, audit.VerifyOptions{Key: chainsecKey})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []chain.ResolutionDecision{chain.Approve, chain.Deny} {
				_, err := cw.c.Resolve(context.Background(), ap.ID, chain.Resolution{Decision: d})
				var ae *chain.ApprovalError
				if !errors.As(err, &ae) || ae.Code != tt.code {
					t.Fatalf("Resolve(%s) = %v, want %s", d, err, tt.code)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, b) {
				t.Error("the refused file was changed")
			}
			if m, err := audit.VerifyFileWith(cw.log, audit.VerifyOptions{Key: chainsecKey}); err != nil || m != n {
				t.Errorf("%d audit records after the refusals (%v), want %d", m, err, n)
			}
		})
	}
	t.Run("restored after it was resolved", func(t *testing.T) {
		cw := approvalChain(t)
		ap := cw.run(t, "tool.before", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "ls"}}).Approval
		path := filepath.Join(cw.approvals, ap.ID+".json")
		saved, _ := os.ReadFile(path)
		if _, err := cw.c.Resolve(context.Background(), ap.ID, chain.Resolution{Decision: chain.Approve}); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(path, saved, 0o600)
		_, err := cw.c.Resolve(context.Background(), ap.ID, chain.Resolution{Decision: chain.Approve})
		var ae *chain.ApprovalError
		if !errors.As(err, &ae) || ae.Code != chain.ApprovalResolved {
			t.Fatalf("second resolution of a restored file: %v", err)
		}
	})
	t.Run("module swapped by a reload", func(t *testing.T) {
		cw := approvalChain(t)
		ap := cw.run(t, "tool.before", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "ls"}}).Approval
		cfg := chainsecConfig(t,
			chain.Binding{Name: "ask", Module: "other", Point: "tool.before", Phase: chain.Guard, Priority: 1,
				Settings: map[string]any{"when": "shell.exec", "decide": map[string]any{"action": "ask", "reason": "shell"}}},
			chain.Binding{Name: "no-rm", Point: "tool.before", Phase: chain.Guard, Priority: 2})
		cfg.Modules["other"] = append(append([]byte(nil), cfg.Modules["policy"]...), 0x00, 0x05, 0x03, 'o', 't', 'h', 0x01)
		if err := cw.c.Reload(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		_, err := cw.c.Resolve(context.Background(), ap.ID, chain.Resolution{Decision: chain.Approve})
		var ae *chain.ApprovalError
		if !errors.As(err, &ae) || ae.Code != chain.ApprovalStale {
			t.Fatalf("approve after the module changed: %v", err)
		}
	})
}

// §8: whoever can write the audit log but not read the key cannot rewrite it
// so that it verifies with the key and the checkpoint kept apart.
func TestChainsecAuditTamper(t *testing.T) {
	rechain := audittest.Rechain
	tests := []struct {
		name   string
		edit   func([]audit.Record) []audit.Record
		rehash bool // the plain hash chain does not see it
	}{
		{"edit", func(r []audit.Record) []audit.Record { r[1].Decision = "continue"; return r }, false},
		{"edit and rehash", func(r []audit.Record) []audit.Record { r[1].Decision = "continue"; return rechain(r) }, true},
		{"insert", func(r []audit.Record) []audit.Record {
			return rechain(append(r[:1:1], append([]audit.Record{r[0]}, r[1:]...)...))
		}, true},
		{"delete", func(r []audit.Record) []audit.Record { return rechain(append(r[:1:1], r[2:]...)) }, true},
		{"reorder", func(r []audit.Record) []audit.Record { r[0], r[1] = r[1], r[0]; return rechain(r) }, true},
		{"truncate", func(r []audit.Record) []audit.Record { return r[:1] }, true},
		{"append forgery", func(r []audit.Record) []audit.Record {
			f := r[len(r)-1]
			f.Decision, f.Reason, f.MAC = "continue", "all good", ""
			return rechain(append(r, f))
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cw := newChainsecWorld(t, chain.Binding{Name: "guard", Point: "message.outbound", Phase: chain.Guard,
				Settings: map[string]any{"when": "SECRET", "decide": map[string]any{"action": "block", "reason": "secret"}}})
			cw.run(t, "message.outbound", map[string]any{"outgoing": "hello"})
			cw.run(t, "message.outbound", map[string]any{"outgoing": "the SECRET"})
			cw.run(t, "message.outbound", map[string]any{"outgoing": "bye"})
			recs, err := audit.ReadFile(cw.log)
			if err != nil || len(recs) != 3 || recs[1].Decision != "block" {
				t.Fatalf("%d records, %v", len(recs), err)
			}
			var buf bytes.Buffer
			for _, r := range tt.edit(recs) {
				b, _ := json.Marshal(r)
				buf.Write(append(b, '\n'))
			}
			os.WriteFile(cw.log, buf.Bytes(), 0o600)
			if _, err := audit.VerifyFile(cw.log); tt.rehash && err != nil {
				t.Errorf("the plain chain was meant to miss this: %v", err)
			}
			ckpt, err := audit.ReadCheckpoint(cw.ckpt)
			if err != nil {
				t.Fatal(err)
			}
			_, err = audit.VerifyFileWith(cw.log, audit.VerifyOptions{Key: chainsecKey, Checkpoint: ckpt})
			var ve *audit.VerifyError
			if !errors.As(err, &ve) {
				t.Fatalf("VerifyFileWith = %v", err)
			}
		})
	}
}
