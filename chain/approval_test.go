package chain

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
)

const toolBefore = "tool.before"

// approvalConfig: a guard that asks about shell commands, then a guard that
// blocks destructive ones. Resuming must run the second guard.
func approvalConfig(t *testing.T, expiry ExpiryPolicy) Config {
	return policyConfig(t,
		Binding{Name: "log", Point: toolBefore, Phase: Observer},
		Binding{Name: "ask-shell", Point: toolBefore, Phase: Guard, Priority: 1,
			Settings: when("shell.exec", `{"action":"ask","reason":"shell commands need a human","user_message":"Waiting for approval."}`),
			Approval: ApprovalPolicy{Timeout: time.Minute, OnExpiry: expiry}},
		Binding{Name: "no-rm", Point: toolBefore, Phase: Guard, Priority: 2,
			Settings: when("rm -rf", `{"action":"block","reason":"destructive command"}`)},
	)
}

func shellCall(cmd string) map[string]any {
	return map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": cmd}}
}

func TestApprovals(t *testing.T) {
	tests := []struct {
		name       string
		cmd        string
		resolution Resolution
		advance    time.Duration
		expiry     ExpiryPolicy
		verdict    Verdict
		by         string
		binding    string
		word       string
		command    string
	}{
		{"approve then the next guard runs and blocks", "rm -rf /tmp/x", Resolution{Decision: Approve, Actor: "alice"}, 0, "", Block, ByHook, "no-rm", "approved", "rm -rf /tmp/x"},
		{"approve then allow", "ls /tmp", Resolution{Decision: Approve, Actor: "alice"}, 0, "", Allow, "", "", "approved", "ls /tmp"},
		{"deny", "ls /tmp", Resolution{Decision: Deny, Actor: "bob", Reason: "not today"}, 0, "", Block, ByApproval, "ask-shell", "denied", "ls /tmp"},
		{"edit then the next guard sees the edit", "rm -rf /tmp/x", Resolution{Decision: Edit, Actor: "carol", Edit: map[string]any{"arguments": map[string]any{"command": "ls /tmp/x"}}}, 0, "", Allow, "", "", "edited", "ls /tmp/x"},
		{"expired: deny by default, whatever the resolution", "ls /tmp", Resolution{Decision: Approve}, time.Minute, "", Block, ByApproval, "ask-shell", "expired", "ls /tmp"},
		{"expired: approve when configured", "ls /tmp", Resolution{Decision: Deny}, 2 * time.Minute, ExpireApprove, Allow, "", "", "expired", "ls /tmp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, approvalConfig(t, tt.expiry))
			out := e.run(t, toolBefore, shellCall(tt.cmd))
			if out.Verdict != Pending || out.Approval == nil || out.Binding != "ask-shell" || out.Reason != "shell commands need a human" || out.UserMessage != "Waiting for approval." {
				t.Fatalf("first run: %+v", out)
			}
			ap := out.Approval
			if ap.Binding != "ask-shell" || ap.Module == "" || ap.Proposed["tool"] != "shell.exec" || !ap.Expires.Equal(e.clock.Now().Add(time.Minute)) ||
				len(ap.Editable) != 1 || ap.Editable[0] != "arguments" || ap.State.Next != 2 {
				t.Errorf("approval %+v", ap)
			}
			if got := names(out.Trace); !equal(got, []string{"log", "ask-shell"}) {
				t.Errorf("trace %v", got)
			}
			e.clock.Advance(tt.advance)
			res, err := e.c.Resolve(context.Background(), ap.ID, tt.resolution)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if res.Verdict != tt.verdict || res.By != tt.by || res.Binding != tt.binding || res.Run != out.Run {
				t.Errorf("outcome %s by %q binding %q (reason %q), want %s by %q binding %q", res.Verdict, res.By, res.Binding, res.Reason, tt.verdict, tt.by, tt.binding)
			}
			cmd := res.Context["arguments"].(map[string]any)["command"]
			if cmd != tt.command {
				t.Errorf("command %v, want %s", cmd, tt.command)
			}
			resolution := res.Trace[2]
			if resolution.Resolution != tt.word || resolution.By != ByApproval || resolution.Approval != ap.ID || resolution.Actor != tt.resolution.Actor {
				t.Errorf("resolution step %+v", resolution)
			}
			// Resumed from where it paused: the observer and the
			// asking guard did not run again.
			wantTrace := []string{"log", "ask-shell", "ask-shell"}
			if tt.verdict == Allow || tt.binding == "no-rm" {
				wantTrace = append(wantTrace, "no-rm")
			}
			if got := names(res.Trace); !equal(got, wantTrace) {
				t.Errorf("trace %v, want %v", got, wantTrace)
			}
			if err := audit.Verify(e.sink.Records()); err != nil {
				t.Error(err)
			}
			if r := res.Records()[0]; r.Resolution != tt.word || r.Approval != ap.ID || r.Binding != "ask-shell" {
				t.Errorf("resolution record %+v", r)
			}
			// Resolved exactly once.
			if _, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve}); !errors.Is(err, ErrUnknownApproval) {
				t.Errorf("second Resolve = %v", err)
			}
		})
	}
}

func TestInvalidResolutionLeavesTheApprovalPending(t *testing.T) {
	e := newEnv(t, approvalConfig(t, ""))
	ap := e.run(t, toolBefore, shellCall("ls")).Approval
	for _, r := range []Resolution{
		{Decision: "maybe"},
		{Decision: Edit},
		{Decision: Edit, Edit: map[string]any{"tool": "fs.read"}},
		{Decision: Approve, Edit: map[string]any{"arguments": map[string]any{}}},
	} {
		if _, err := e.c.Resolve(context.Background(), ap.ID, r); !errors.Is(err, ErrInvalidResolution) {
			t.Errorf("Resolve(%+v) = %v, want ErrInvalidResolution", r, err)
		}
	}
	if e.store.Len() != 1 {
		t.Fatalf("approval no longer pending")
	}
	if _, err := e.c.Resolve(context.Background(), "feedface", Resolution{Decision: Approve}); !errors.Is(err, ErrUnknownApproval) {
		t.Errorf("unknown id: %v", err)
	}
}

func TestExpirePending(t *testing.T) {
	e := newEnv(t, approvalConfig(t, ""))
	first := e.run(t, toolBefore, shellCall("ls")).Approval
	e.clock.Advance(30 * time.Second)
	e.run(t, toolBefore, shellCall("ls"))
	e.clock.Advance(30 * time.Second)
	outs, err := e.c.ExpirePending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].Run != first.Run || outs[0].Verdict != Block || outs[0].Trace[2].Resolution != "expired" {
		t.Fatalf("expired outcomes %+v", outs)
	}
	if e.store.Len() != 1 {
		t.Errorf("%d pending, want the younger one", e.store.Len())
	}
}

// TestApprovalSurvivesARestart encodes a pending approval to JSON, as a
// durable store would, and resumes it on a fresh Chain built from the same
// configuration, with a fresh store.
func TestApprovalSurvivesARestart(t *testing.T) {
	cfg := approvalConfig(t, "")
	key := func(o *Options) { o.ApprovalKey = testKey }
	e1 := newEnv(t, cfg, key)
	// Numbers in the context must come back as the same JSON numbers.
	in := shellCall("rm -rf /tmp/x")
	in["arguments"].(map[string]any)["timeout"] = json.Number("30")
	out := e1.run(t, toolBefore, in)
	blob, err := json.Marshal(out.Approval)
	if err != nil {
		t.Fatal(err)
	}
	e1.c.Close(context.Background())

	dir := t.TempDir()
	store, err := NewDirApprovals(dir)
	if err != nil {
		t.Fatal(err)
	}
	ap, err := decodeApproval(out.Approval.ID, blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(context.Background(), ap); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, cfg, key, func(o *Options) { o.Approvals = store })
	e2.clock.Set(e1.clock.Now())
	res, err := e2.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Edit, Edit: map[string]any{"arguments": map[string]any{"command": "ls /tmp/x", "timeout": json.Number("30")}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Allow || !res.Modified || res.Run != out.Run || res.Config != out.Config {
		t.Errorf("resumed: %+v", res)
	}
	if got := names(res.Trace); !equal(got, []string{"log", "ask-shell", "ask-shell", "no-rm"}) {
		t.Errorf("trace %v", got)
	}
	if _, err := store.Get(context.Background(), ap.ID); !errors.Is(err, ErrUnknownApproval) {
		t.Errorf("approval still stored: %v", err)
	}
}

// TestResumeOnAChangedConfiguration: the run restarts on the configuration
// in force, and the approved guard is not asked again.
func TestResumeOnAChangedConfiguration(t *testing.T) {
	e := newEnv(t, approvalConfig(t, ""))
	ap := e.run(t, toolBefore, shellCall("ls")).Approval
	cfg2 := approvalConfig(t, "")
	cfg2.Bindings = append(cfg2.Bindings, Binding{Name: "stamp", Module: "policy", Point: toolBefore, Phase: Transformer,
		Settings: decide(`{"action":"modify","context":{"arguments":{"command":"ls","dry_run":true}}}`)})
	if err := e.c.Reload(context.Background(), cfg2); err != nil {
		t.Fatal(err)
	}
	res, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"log", "ask-shell", "ask-shell", "log", "stamp", "ask-shell", "no-rm"}
	if got := names(res.Trace); !equal(got, want) {
		t.Errorf("trace %v, want %v", got, want)
	}
	if res.Verdict != Allow || res.Trace[5].Applied != abi.ActionContinue || res.Trace[5].By != ByApproval {
		t.Errorf("outcome %s, step %+v", res.Verdict, res.Trace[5])
	}
	if res.Context["arguments"].(map[string]any)["dry_run"] != true {
		t.Errorf("the new transformer did not run: %v", res.Context)
	}
}

func TestDirApprovalsRefusesPathsAsIDs(t *testing.T) {
	store, err := NewDirApprovals(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"../x", "", "ABC", "a/b"} {
		if _, err := store.Get(context.Background(), id); !errors.Is(err, ErrUnknownApproval) {
			t.Errorf("Get(%q) = %v", id, err)
		}
	}
}

// switchSink fails while fail is set.
type switchSink struct {
	audit.MemorySink
	fail bool
}

func (s *switchSink) Append(ctx context.Context, r *audit.Record) error {
	if s.fail {
		return errors.New("disk full")
	}
	return s.MemorySink.Append(ctx, r)
}

func TestResolutionThatCannotBeAuditedLeavesTheApprovalPending(t *testing.T) {
	sink := &switchSink{}
	e := newEnv(t, approvalConfig(t, ""), func(o *Options) { o.Audit = sink })
	ap := e.run(t, toolBefore, shellCall("ls")).Approval
	sink.fail = true
	if _, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve}); !errors.Is(err, ErrAudit) {
		t.Fatalf("Resolve = %v, want ErrAudit", err)
	}
	sink.fail = false
	out, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve})
	if err != nil || out.Verdict != Allow {
		t.Fatalf("second Resolve = %+v, %v", out, err)
	}
	if err := audit.Verify(sink.Records()); err != nil {
		t.Error(err)
	}
}
