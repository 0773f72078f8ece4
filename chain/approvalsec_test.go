package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// dirEnv is approvalConfig with its approvals in a directory, as the CLI
// keeps them, under testKey.
func dirEnv(t *testing.T) (*env, string) {
	dir := t.TempDir()
	store, err := NewDirApprovals(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, approvalConfig(t, ""), func(o *Options) { o.Approvals = store; o.ApprovalKey = testKey })
	return e, dir
}

// TestTamperedApprovalsAreRefused rewrites a stored approval, field by field,
// as whoever can write the approvals directory could, and resolves it: each
// is a typed refusal that leaves the approval pending and records nothing.
// A "resealed" case rewrites it and seals it again with the key, as the host
// would have: the checks behind the seal must still refuse it.
func TestTamperedApprovalsAreRefused(t *testing.T) {
	tests := []struct {
		name   string
		reseal bool
		edit   func(ap *Approval, raw map[string]any)
		code   string
	}{
		{"next -1", false, func(_ *Approval, m map[string]any) { m["state"].(map[string]any)["next"] = -1 }, ApprovalSeal},
		{"next -1, resealed", true, func(ap *Approval, _ map[string]any) { ap.State.Next = -1 }, ApprovalOutOfRange},
		{"next skips a guard", false, func(_ *Approval, m map[string]any) { m["state"].(map[string]any)["next"] = 3 }, ApprovalSeal},
		{"next skips a guard, resealed", true, func(ap *Approval, _ map[string]any) { ap.State.Next = 3 }, ApprovalOutOfRange},
		{"next far out, resealed", true, func(ap *Approval, _ map[string]any) { ap.State.Next = 1 << 40 }, ApprovalOutOfRange},
		{"tenant", false, func(_ *Approval, m map[string]any) {
			m["tenant"] = "other"
			m["state"].(map[string]any)["tenant"] = "other"
		}, ApprovalSeal},
		{"paused run's tenant, resealed", true, func(ap *Approval, _ map[string]any) { ap.State.Tenant = "other" }, ApprovalMismatch},
		{"point, resealed", true, func(ap *Approval, _ map[string]any) { ap.Point = "nowhere"; ap.State.Point = "nowhere" }, ApprovalMismatch},
		{"expiry", false, func(_ *Approval, m map[string]any) { m["expires"] = "2099-01-01T00:00:00Z" }, ApprovalSeal},
		{"on expiry", false, func(_ *Approval, m map[string]any) { m["on_expiry"] = "approve" }, ApprovalSeal},
		{"binding", false, func(_ *Approval, m map[string]any) { m["binding"] = "no-rm" }, ApprovalSeal},
		{"binding, resealed", true, func(ap *Approval, _ map[string]any) { ap.Binding = "no-rm" }, ApprovalOutOfRange},
		{"module", false, func(_ *Approval, m map[string]any) { m["module"] = "00" }, ApprovalSeal},
		{"module, resealed", true, func(ap *Approval, _ map[string]any) { ap.Module = "00" }, ApprovalOutOfRange},
		{"context", false, func(_ *Approval, m map[string]any) {
			m["state"].(map[string]any)["context"] = map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "rm -rf /home"}}
		}, ApprovalSeal},
		{"approved list", false, func(_ *Approval, m map[string]any) { m["state"].(map[string]any)["approved"] = []any{"no-rm"} }, ApprovalSeal},
		{"seal removed", false, func(_ *Approval, m map[string]any) { delete(m, "seal") }, ApprovalSeal},
		{"seal not hex", false, func(_ *Approval, m map[string]any) { m["seal"] = "zz" }, ApprovalSeal},
		{"garbage", false, func(_ *Approval, m map[string]any) {
			clear(m)
			m["garbage"] = true
		}, ApprovalSeal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, dir := dirEnv(t)
			out := e.run(t, toolBefore, shellCall("rm -rf /"))
			id := out.Approval.ID
			path := filepath.Join(dir, id+".json")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tt.reseal {
				ap, err := decodeApproval(id, b)
				if err != nil {
					t.Fatal(err)
				}
				tt.edit(ap, nil)
				if ap.Seal, err = e.c.seal(ap); err != nil {
					t.Fatal(err)
				}
				b, _ = json.Marshal(ap)
			} else {
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				tt.edit(nil, m)
				b, _ = json.Marshal(m)
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			records := len(e.sink.Records())
			for _, r := range []Resolution{{Decision: Approve}, {Decision: Deny}} {
				_, err := e.c.Resolve(context.Background(), id, r)
				var ae *ApprovalError
				if !errors.As(err, &ae) || ae.Code != tt.code || !errors.Is(err, ErrApprovalRefused) {
					t.Fatalf("Resolve(%s) = %v, want an ApprovalError %s", r.Decision, err, tt.code)
				}
			}
			// Past its expiry too: the expiry policy does not apply to it.
			e.clock.Advance(2 * time.Minute)
			if outs, err := e.c.ExpirePending(context.Background()); err != nil || len(outs) != 0 {
				t.Fatalf("ExpirePending = %v, %v", outs, err)
			}
			after, err := os.ReadFile(path)
			if err != nil || string(after) != string(b) {
				t.Fatalf("the refused approval was not left as it was: %v", err)
			}
			if n := len(e.sink.Records()); n != records {
				t.Fatalf("%d audit records after refusals, want %d", n, records)
			}
		})
	}
}

// A stored approval that does not decode is refused as corrupt.
func TestCorruptApprovalIsRefused(t *testing.T) {
	e, dir := dirEnv(t)
	id := e.run(t, toolBefore, shellCall("ls")).Approval.ID
	if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.Resolve(context.Background(), id, Resolution{Decision: Approve})
	var ae *ApprovalError
	if !errors.As(err, &ae) || ae.Code != ApprovalCorrupt {
		t.Fatalf("Resolve = %v", err)
	}
}

// An approval stored under another approval's id is refused.
func TestApprovalUnderAnotherIDIsRefused(t *testing.T) {
	e, dir := dirEnv(t)
	a := e.run(t, toolBefore, shellCall("ls")).Approval.ID
	b := e.run(t, toolBefore, shellCall("rm -rf /")).Approval.ID
	blob, err := os.ReadFile(filepath.Join(dir, a+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, b+".json"), blob, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.Resolve(context.Background(), b, Resolution{Decision: Approve})
	var ae *ApprovalError
	if !errors.As(err, &ae) || ae.Code != ApprovalMismatch {
		t.Fatalf("Resolve = %v", err)
	}
}

// A resolved approval put back (a restored file, a replayed Put) never
// resolves again, in either store.
func TestResolvedApprovalNeverResolvesAgain(t *testing.T) {
	t.Run("dir", func(t *testing.T) {
		e, dir := dirEnv(t)
		id := e.run(t, toolBefore, shellCall("ls")).Approval.ID
		path := filepath.Join(dir, id+".json")
		saved, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := e.c.Resolve(context.Background(), id, Resolution{Decision: Deny}); err != nil || out.Verdict != Block {
			t.Fatalf("Resolve = %v, %v", out, err)
		}
		if err := os.WriteFile(path, saved, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, r := range []Resolution{{Decision: Approve}, {Decision: Deny}} {
			_, err := e.c.Resolve(context.Background(), id, r)
			var ae *ApprovalError
			if !errors.As(err, &ae) || ae.Code != ApprovalResolved || !errors.Is(err, ErrUnknownApproval) {
				t.Fatalf("Resolve of a restored file = %v", err)
			}
		}
		e.clock.Advance(time.Hour)
		if outs, err := e.c.ExpirePending(context.Background()); err != nil || len(outs) != 0 {
			t.Fatalf("ExpirePending resolved a restored file: %v, %v", outs, err)
		}
	})
	t.Run("memory", func(t *testing.T) {
		e := newEnv(t, approvalConfig(t, ""))
		ap := e.run(t, toolBefore, shellCall("ls")).Approval
		if _, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Deny}); err != nil {
			t.Fatal(err)
		}
		// The store may refuse the copy (MemoryApprovals does) or keep
		// it; it is never resolved again.
		if err := e.store.Put(context.Background(), ap); err != nil && !errors.Is(err, ErrApprovalRefused) {
			t.Fatal(err)
		}
		if _, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve}); !errors.Is(err, ErrApprovalRefused) {
			t.Fatalf("Resolve of a replayed approval = %v", err)
		}
	})
}

// An approval sealed by one host is refused by a chain with another key (or
// with none shared).
func TestApprovalFromAnotherKeyIsRefused(t *testing.T) {
	store := NewMemoryApprovals()
	e1 := newEnv(t, approvalConfig(t, ""), func(o *Options) { o.Approvals = store; o.ApprovalKey = testKey })
	id := e1.run(t, toolBefore, shellCall("ls")).Approval.ID
	e2 := newEnv(t, approvalConfig(t, ""), func(o *Options) { o.Approvals = store })
	_, err := e2.c.Resolve(context.Background(), id, Resolution{Decision: Approve})
	var ae *ApprovalError
	if !errors.As(err, &ae) || ae.Code != ApprovalSeal {
		t.Fatalf("Resolve = %v", err)
	}
	if store.Len() != 1 {
		t.Fatal("the refused approval is no longer pending")
	}
	if _, err := New(context.Background(), approvalConfig(t, ""), Options{Runtime: testRuntime(t), ApprovalKey: []byte("short")}); err == nil {
		t.Error("a 5-byte approval key was accepted")
	}
}

// withCustomSection returns wasm with an extra custom section: the same
// behaviour, another digest.
func withCustomSection(wasm []byte) []byte {
	return append(append([]byte(nil), wasm...), 0x00, 0x05, 0x03, 'a', 'b', 'c', 0x01)
}

// After a reload binds another module under the name that asked, the
// approval (given to the first module's ask) does not let the request past
// the new module unseen: approve is refused as stale; deny still resolves it.
func TestApprovalForAnotherModuleIsStale(t *testing.T) {
	e := newEnv(t, approvalConfig(t, ""))
	ap := e.run(t, toolBefore, shellCall("ls")).Approval
	cfg := approvalConfig(t, "")
	cfg.Modules["policy2"] = withCustomSection(cfg.Modules["policy"])
	cfg.Bindings[1].Module = "policy2"
	if err := e.c.Reload(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Resolution{{Decision: Approve}, {Decision: Edit, Edit: map[string]any{"arguments": map[string]any{"command": "ls"}}}} {
		_, err := e.c.Resolve(context.Background(), ap.ID, r)
		var ae *ApprovalError
		if !errors.As(err, &ae) || ae.Code != ApprovalStale {
			t.Fatalf("Resolve(%s) = %v, want approval_stale", r.Decision, err)
		}
	}
	if e.store.Len() != 1 {
		t.Fatal("the stale approval is no longer pending")
	}
	out, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Deny, Reason: "stale"})
	if err != nil || out.Verdict != Block || out.By != ByApproval {
		t.Fatalf("deny of a stale approval: %+v, %v", out, err)
	}
}

// On a configuration that changed but kept the module that asked, the run
// restarts and the approved binding is not asked again; a binding of the same
// name with another module is (the approval names the module).
func TestRestartedRunAsksANewModuleAgain(t *testing.T) {
	e := newEnv(t, approvalConfig(t, ""))
	ap := e.run(t, toolBefore, shellCall("ls")).Approval
	cfg := approvalConfig(t, "")
	cfg.Bindings = append(cfg.Bindings, Binding{Name: "ask-again", Module: "policy", Point: toolBefore, Phase: Guard, Priority: 3,
		Settings: when("shell.exec", `{"action":"ask","reason":"second opinion"}`)})
	if err := e.c.Reload(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	out, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve})
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdict != Pending || out.Binding != "ask-again" {
		t.Fatalf("%s by %s", out.Verdict, out.Binding)
	}
	var approved bool
	for _, st := range out.Trace[3:] {
		if st.Binding == "ask-shell" && st.By == ByApproval && st.Applied == abi.ActionContinue {
			approved = true
		}
	}
	if !approved {
		t.Fatalf("the approved binding was not passed on the restart: %+v", out.Trace)
	}
}

// FuzzStoredApproval: whatever a store hands back for an id, Resolve and
// ExpirePending return an outcome for a genuine approval or a typed error,
// never a panic; a changed approval never resolves.
func FuzzStoredApproval(f *testing.F) {
	t := &testing.T{}
	e := newEnv(t, approvalConfig(t, ""), func(o *Options) { o.ApprovalKey = testKey })
	ap := e.run(t, toolBefore, shellCall("rm -rf /")).Approval
	genuine, _ := json.Marshal(ap)
	f.Add(genuine)
	f.Add([]byte(`{"garbage": true}`))
	f.Add([]byte(`{"id":"` + ap.ID + `","state":{"next":-1}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e.store.mu.Lock()
		e.store.items[ap.ID] = &memApproval{data: b, expires: ap.Expires}
		e.store.mu.Unlock()
		out, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve})
		switch {
		case err == nil && !bytes.Equal(b, genuine):
			// Only an encoding of the genuine approval (whitespace,
			// key order) may resolve, and then as it was asked.
			if out.Run != ap.Run || out.Tenant != ap.Tenant || out.Verdict != Block || out.Binding != "no-rm" {
				t.Fatalf("a changed approval resolved: %+v", out)
			}
		case err != nil && !errors.Is(err, ErrApprovalRefused) && !errors.Is(err, ErrUnknownApproval):
			t.Fatalf("untyped error %v", err)
		}
	})
}
