package chain

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

func toolCall(tool string) map[string]any {
	return map[string]any{"tool": tool, "arguments": map[string]any{"amount": "10"}}
}

// TestToolApprovalMatches: a call to a tool the configuration names (by
// name or pattern) is held for approval without any guard hook, by
// "config"; other calls pass with no step at all.
func TestToolApprovalMatches(t *testing.T) {
	rules := []ToolApproval{{Tools: []string{"payments.*", "shell.exec", "[ab].run"}, Reason: "needs sign-off"}}
	tests := []struct {
		name    string
		ctx     map[string]any
		verdict Verdict
		steps   int
	}{
		{"exact", toolCall("shell.exec"), Pending, 1},
		{"glob", toolCall("payments.transfer"), Pending, 1},
		{"class", toolCall("a.run"), Pending, 1},
		{"other tool", toolCall("web.fetch"), Allow, 0},
		{"glob does not span more", toolCall("payments"), Allow, 0},
		{"prefix only", toolCall("shell.exec2"), Allow, 0},
		{"no tool field", map[string]any{"arguments": map[string]any{}}, Allow, 0},
		{"tool not a string", map[string]any{"tool": 7}, Allow, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := policyConfig(t)
			cfg.ToolApprovals = rules
			e := newEnv(t, cfg)
			out := e.run(t, "tool.before", tt.ctx)
			if out.Verdict != tt.verdict || len(out.Trace) != tt.steps || len(out.Records()) != tt.steps {
				t.Fatalf("verdict %s with %d steps, want %s with %d: %+v", out.Verdict, len(out.Trace), tt.verdict, tt.steps, out)
			}
			if tt.verdict != Pending {
				return
			}
			st, r := out.Trace[0], out.Records()[0]
			if out.Binding != "config:requires_approval" || out.By != ByConfig || out.Reason != "needs sign-off" || out.Approval == nil {
				t.Errorf("outcome %+v", out)
			}
			if st.Applied != abi.ActionAsk || st.By != ByConfig || st.Decision != nil || st.Approval != out.Approval.ID {
				t.Errorf("step %+v", st)
			}
			if r.Decision != "ask" || r.By != ByConfig || r.HookAction != "" || r.Binding != "config:requires_approval" || r.Reason != "needs sign-off" || r.Phase != "guard" {
				t.Errorf("audit record %+v", r)
			}
			if got, err := e.store.Get(context.Background(), out.Approval.ID); err != nil || got.Binding != "config:requires_approval" || !equal(got.Editable, []string{"arguments"}) {
				t.Errorf("stored approval %+v, %v", got, err)
			}
		})
	}
	t.Run("other points", func(t *testing.T) {
		cfg := policyConfig(t)
		cfg.ToolApprovals = rules
		e := newEnv(t, cfg)
		if out := e.run(t, "tool.after", map[string]any{"tool": "shell.exec", "result": "ok"}); out.Verdict != Allow || len(out.Trace) != 0 {
			t.Errorf("tool.after: %+v", out)
		}
	})
}

// TestToolApprovalResolve: the approval takes a guard's path: approve goes
// on to the guards, deny blocks, an edit reaches the guards after it,
// expiry applies the rule's policy.
func TestToolApprovalResolve(t *testing.T) {
	tests := []struct {
		name       string
		resolution Resolution
		advance    time.Duration
		onExpiry   ExpiryPolicy
		verdict    Verdict
		by         string
		word       string
	}{
		{"approve", Resolution{Decision: Approve, Actor: "alice"}, 0, "", Allow, "", "approved"},
		{"deny", Resolution{Decision: Deny, Reason: "no"}, 0, "", Block, ByApproval, "denied"},
		// The edit makes the arguments the guard blocks.
		{"edit reaches the guard", Resolution{Decision: Edit, Edit: map[string]any{"arguments": map[string]any{"amount": "999999"}}}, 0, "", Block, ByHook, "edited"},
		{"expired, deny", Resolution{Decision: Approve}, 2 * time.Hour, "", Block, ByApproval, "expired"},
		{"expired, approve", Resolution{Decision: Deny}, 2 * time.Hour, ExpireApprove, Allow, "", "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := policyConfig(t, Binding{Name: "limit", Point: "tool.before", Phase: Guard, Settings: when("999999", `{"action":"block","reason":"too much"}`)})
			cfg.ToolApprovals = []ToolApproval{{Name: "pay", Tools: []string{"payments.*"}, Approval: ApprovalPolicy{Timeout: time.Hour, OnExpiry: tt.onExpiry}}}
			e := newEnv(t, cfg)
			out := e.run(t, "tool.before", toolCall("payments.transfer"))
			if out.Verdict != Pending || len(out.Trace) != 1 || out.Reason != "tool payments.transfer requires approval" {
				t.Fatalf("the rule did not ask first: %+v", out)
			}
			e.clock.Advance(tt.advance)
			res, err := e.c.Resolve(context.Background(), out.Approval.ID, tt.resolution)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tt.verdict || res.By != tt.by {
				t.Fatalf("verdict %s by %q, want %s by %q: %+v", res.Verdict, res.By, tt.verdict, tt.by, res)
			}
			if r := res.Records()[0]; r.Binding != "config:pay" || r.Resolution != tt.word {
				t.Errorf("resolution record %+v", r)
			}
		})
	}
}

// TestToolApprovalOrder: the rule runs among the guards by priority, before
// the guard bindings of equal priority; a guard that blocks first leaves
// nothing to approve.
func TestToolApprovalOrder(t *testing.T) {
	block := `{"action":"block","reason":"never"}`
	for _, tt := range []struct {
		name     string
		priority int
		verdict  Verdict
		first    string
	}{
		{"equal priority: the rule first", 0, Pending, "config:requires_approval"},
		{"a guard before it", -1, Block, "g"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := policyConfig(t, Binding{Name: "g", Point: "tool.before", Phase: Guard, Priority: tt.priority, Settings: decide(block)})
			cfg.ToolApprovals = []ToolApproval{{Tools: []string{"*"}}}
			e := newEnv(t, cfg)
			out := e.run(t, "tool.before", toolCall("x"))
			if out.Verdict != tt.verdict || out.Trace[0].Binding != tt.first {
				t.Fatalf("verdict %s, trace %v", out.Verdict, names(out.Trace))
			}
			info, _ := e.c.Info()
			if got := info.Points["tool.before"]; len(got) != 2 {
				t.Errorf("Info lists %+v", got)
			}
		})
	}
}

// TestToolApprovalConfig: refused rules name their problem; a changed rule
// makes its pending approvals stale (only a deny resolves them).
func TestToolApprovalConfig(t *testing.T) {
	tests := []struct {
		name  string
		rules []ToolApproval
		want  string
	}{
		{"no tools", []ToolApproval{{}}, "lists no tools"},
		{"empty pattern", []ToolApproval{{Tools: []string{""}}}, "is not a tool name"},
		{"bad pattern", []ToolApproval{{Tools: []string{"pay[ments"}}}, "is not a tool name"},
		{"bad name", []ToolApproval{{Name: "a b", Tools: []string{"x"}}}, "the name must be"},
		{"duplicate", []ToolApproval{{Tools: []string{"x"}}, {Tools: []string{"y"}}}, "duplicate tool approval name"},
		{"negative timeout", []ToolApproval{{Tools: []string{"x"}, Approval: ApprovalPolicy{Timeout: -1}}}, "negative approval timeout"},
		{"bad expiry", []ToolApproval{{Tools: []string{"x"}, Approval: ApprovalPolicy{OnExpiry: "maybe"}}}, "unknown approval expiry policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := policyConfig(t)
			cfg.ToolApprovals = tt.rules
			_, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), Logger: quiet()})
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want a ConfigError saying %q", err, tt.want)
			}
		})
	}
	t.Run("changed rule", func(t *testing.T) {
		cfg := policyConfig(t)
		cfg.ToolApprovals = []ToolApproval{{Tools: []string{"x"}}}
		e := newEnv(t, cfg)
		out := e.run(t, "tool.before", toolCall("x"))
		d1, ok := e.c.Info()
		if !ok {
			t.Fatal("no configuration")
		}
		// The same rule again: the approval resumes.
		if err := e.c.Reload(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		cfg.ToolApprovals = []ToolApproval{{Tools: []string{"x", "y"}}}
		if err := e.c.Reload(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if d2, ok := e.c.Info(); !ok || d2.Digest == d1.Digest {
			t.Error("the configuration digest does not cover the rule's tools")
		}
		var ae *ApprovalError
		if _, err := e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Approve}); !errors.As(err, &ae) || ae.Code != ApprovalStale {
			t.Fatalf("approve after the rule changed: %v", err)
		}
		if res, err := e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Deny}); err != nil || res.Verdict != Block {
			t.Fatalf("deny after the rule changed: %+v, %v", res, err)
		}
	})
}

func TestToolApprovalFile(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"modules":{},"bindings":[],
		"tool_approvals":[{"name":"pay","tools":["payments.*"],"reason":"r","priority":-2,"approval":{"timeout":"1h","on_expiry":"approve"}}]}`),
		func(string) ([]byte, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	want := ToolApproval{Name: "pay", Tools: []string{"payments.*"}, Reason: "r", Priority: -2, Approval: ApprovalPolicy{Timeout: time.Hour, OnExpiry: ExpireApprove}}
	if len(cfg.ToolApprovals) != 1 || cfg.ToolApprovals[0].Name != want.Name || !equal(cfg.ToolApprovals[0].Tools, want.Tools) ||
		cfg.ToolApprovals[0].Priority != -2 || cfg.ToolApprovals[0].Approval != want.Approval {
		t.Errorf("parsed %+v", cfg.ToolApprovals)
	}
}
