package chain

import (
	"errors"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// do_not_reply_again, like block and ask, belongs to guards: from an
// observer or a transformer it is ignored and reported.
func TestDoNotReplyAgainOnlyFromGuards(t *testing.T) {
	const dnra = `{"action":"continue","do_not_reply_again":true}`
	tests := []struct {
		name    string
		phase   Phase
		decide  string
		want    bool
		ignored string
	}{
		{"observer continue", Observer, dnra, false, "an observer cannot set do_not_reply_again"},
		{"observer block", Observer, `{"action":"block","do_not_reply_again":true}`, false, "an observer cannot block; observers cannot change anything; an observer cannot set do_not_reply_again"},
		{"transformer continue", Transformer, dnra, false, "a transformer cannot set do_not_reply_again"},
		{"transformer modify", Transformer, `{"action":"modify","context":{"outgoing":"changed"},"do_not_reply_again":true}`, false, "a transformer cannot set do_not_reply_again"},
		{"guard continue", Guard, dnra, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, policyConfig(t, Binding{Name: "h", Point: "message.outbound", Phase: tt.phase, Settings: decide(tt.decide)}))
			out := e.run(t, "message.outbound", map[string]any{"outgoing": "hi"})
			if out.DoNotReplyAgain != tt.want {
				t.Errorf("DoNotReplyAgain = %v, want %v", out.DoNotReplyAgain, tt.want)
			}
			st := out.Trace[0]
			if tt.ignored == "" && st.Ignored != "" || !strings.Contains(st.Ignored, tt.ignored) {
				t.Errorf("step ignored %q, want %q", st.Ignored, tt.ignored)
			}
			if rec := out.Records()[0]; rec.Ignored != st.Ignored {
				t.Errorf("audit ignored %q, trace %q", rec.Ignored, st.Ignored)
			}
		})
	}
}

// A transformer that grows the context past what a later guard accepts fails
// itself (its fail policy, its breaker); the guard never fails, so its breaker
// stays closed and clean traffic passes it.
func TestModifyBoundedByLaterInputLimits(t *testing.T) {
	big := strings.Repeat("x", 1500)
	for _, policy := range []FailPolicy{FailOpen, FailClosed} {
		t.Run(string(policy), func(t *testing.T) {
			cfg := policyConfig(t,
				Binding{Name: "grow", Point: "message.outbound", Phase: Transformer, Fail: policy,
					Settings: map[string]any{"when": "grow-me", "field": "outgoing", "append": big}},
				Binding{Name: "guard", Point: "message.outbound", Phase: Guard, Limits: runtime.Limits{MaxInputBytes: 1024},
					Settings: when("SECRET", `{"action":"block","reason":"secret"}`)},
			)
			e := newEnv(t, cfg)
			for i := 0; i < 7; i++ {
				out := e.run(t, "message.outbound", map[string]any{"outgoing": "grow-me"})
				grow := out.Trace[0]
				if i < 5 && (grow.Failure == nil || grow.Failure.Code != abi.FailOutputTooLarge || !strings.Contains(grow.Failure.Message, "binding guard")) {
					t.Fatalf("run %d: transformer step %+v, want its own output_too_large", i, grow)
				}
				if i >= 5 && (grow.Failure == nil || grow.Failure.Code != abi.FailCircuitOpen) {
					t.Fatalf("run %d: transformer's breaker did not open: %+v", i, grow.Failure)
				}
				switch policy {
				case FailOpen:
					if out.Verdict != Allow || len(out.Trace) != 2 || out.Trace[1].Failure != nil || out.Context["outgoing"] != "grow-me" {
						t.Fatalf("run %d: %s by %s/%s, trace %+v", i, out.Verdict, out.Binding, out.By, out.Trace)
					}
				case FailClosed:
					if out.Verdict != Block || out.Binding != "grow" || out.By != ByFailPolicy {
						t.Fatalf("run %d: %s by %s/%s", i, out.Verdict, out.Binding, out.By)
					}
				}
			}
			if policy == FailClosed {
				// The transformer's own policy and breaker block: the
				// platform chose to fail it closed.
				out := e.run(t, "message.outbound", map[string]any{"outgoing": "hello"})
				if out.Verdict != Block || out.Binding != "grow" || out.Failure == nil || out.Failure.Code != abi.FailCircuitOpen {
					t.Fatalf("clean traffic: %s by %s (%+v)", out.Verdict, out.Binding, out.Failure)
				}
				return
			}
			// Clean traffic: the guard's breaker never opened.
			out := e.run(t, "message.outbound", map[string]any{"outgoing": "hello"})
			if out.Verdict != Allow || out.Trace[1].Failure != nil || out.Trace[1].Breaker != "" {
				t.Fatalf("clean traffic: %s by %s, guard step %+v", out.Verdict, out.Binding, out.Trace[1])
			}
			out = e.run(t, "message.outbound", map[string]any{"outgoing": "the SECRET"})
			if out.Verdict != Block || out.Binding != "guard" || out.By != ByHook {
				t.Fatalf("guard no longer guards: %s by %s/%s", out.Verdict, out.Binding, out.By)
			}
		})
	}
}

// A modify that still fits is applied, up to the byte.
func TestModifyThatFitsIsApplied(t *testing.T) {
	cfg := policyConfig(t,
		Binding{Name: "grow", Point: "message.outbound", Phase: Transformer, Fail: FailOpen,
			Settings: map[string]any{"field": "outgoing", "append": strings.Repeat("y", 200)}},
		Binding{Name: "guard", Point: "message.outbound", Phase: Guard, Limits: runtime.Limits{MaxInputBytes: 1024}},
	)
	e := newEnv(t, cfg)
	out := e.run(t, "message.outbound", map[string]any{"outgoing": "a"})
	if out.Verdict != Allow || !out.Modified || out.Trace[0].Failure != nil || out.Trace[1].Failure != nil {
		t.Fatalf("%s modified=%v trace %+v", out.Verdict, out.Modified, out.Trace)
	}
}

// A modify must give each changed field the point's type for it; anything
// else is the transformer's invalid_output.
func TestModifyFieldTypes(t *testing.T) {
	tests := []struct {
		point, decide string
		ctx           map[string]any
		ok            bool
	}{
		{"message.outbound", `{"action":"modify","context":{"outgoing":null}}`, map[string]any{"outgoing": "a"}, false},
		{"message.outbound", `{"action":"modify","context":{"outgoing":{"x":1}}}`, map[string]any{"outgoing": "a"}, false},
		{"message.outbound", `{"action":"modify","context":{"outgoing":7}}`, map[string]any{"outgoing": "a"}, false},
		{"message.outbound", `{"action":"modify","context":{"outgoing":"b"}}`, map[string]any{"outgoing": "a"}, true},
		{"compaction", `{"action":"modify","context":{"summary":[1]}}`, map[string]any{"summary": "s"}, false},
		{"compaction", `{"action":"modify","context":{"summary":"t"}}`, map[string]any{"summary": "s"}, true},
		{"context.assemble", `{"action":"modify","context":{"items":"all of them"}}`, map[string]any{"items": []any{}}, false},
		{"context.assemble", `{"action":"modify","context":{"items":[{"role":"user"}]}}`, map[string]any{"items": []any{}}, false},
		{"context.assemble", `{"action":"modify","context":{"items":[3]}}`, map[string]any{"items": []any{}}, false},
		{"context.assemble", `{"action":"modify","context":{"items":[{"role":"user","content":"hi"}]}}`, map[string]any{"items": []any{}}, true},
		{"llm.before", `{"action":"modify","context":{"messages":{"role":"user"}}}`, map[string]any{"prompt": "p"}, false},
		{"tool.before", `{"action":"modify","context":{"arguments":{"command":"ls"}}}`, map[string]any{"tool": "t"}, true},
		{"tool.before", `{"action":"modify","context":{"arguments":null}}`, map[string]any{"tool": "t"}, false},
		{"tool.after", `{"action":"modify","context":{"result":null}}`, map[string]any{"result": "r"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.point+" "+tt.decide, func(t *testing.T) {
			e := newEnv(t, policyConfig(t, Binding{Name: "tx", Point: tt.point, Phase: Transformer, Fail: FailOpen, Settings: decide(tt.decide)}))
			out := e.run(t, tt.point, tt.ctx)
			st := out.Trace[0]
			if tt.ok {
				if st.Failure != nil || st.Applied != abi.ActionModify || !out.Modified {
					t.Fatalf("refused a well-typed modify: %+v", st)
				}
				return
			}
			if st.Failure == nil || st.Failure.Code != abi.FailInvalidOutput || out.Modified || st.Applied != abi.ActionContinue {
				t.Fatalf("accepted a wrongly typed modify: failure %+v applied %s modified %v context %v", st.Failure, st.Applied, out.Modified, out.Context)
			}
		})
	}
}

// The bound is never looser than the later binding's own limit: whatever a
// transformer's modify is let through, the guard after it takes.
func TestModifyBoundIsSound(t *testing.T) {
	e := newEnv(t, policyConfig(t, Binding{Name: "guard", Point: "message.outbound", Phase: Guard}))
	accepted, refused := 0, 0
	// A modify that grows by n bytes of JSON.
	for n := 700; n <= 1000; n += 3 {
		b := Binding{Name: "grow", Point: "message.outbound", Phase: Transformer, Fail: FailOpen,
			Settings: map[string]any{"field": "outgoing", "append": strings.Repeat("z", n)}}
		if err := e.c.Reload(t.Context(), policyConfig(t, b,
			Binding{Name: "guard", Point: "message.outbound", Phase: Guard, Limits: runtime.Limits{MaxInputBytes: 1024}})); err != nil {
			t.Fatal(err)
		}
		out := e.run(t, "message.outbound", map[string]any{"outgoing": "a"})
		if out.Trace[0].Failure == nil {
			accepted++
			if out.Trace[1].Failure != nil {
				t.Fatalf("n=%d: the modify was let through and the guard failed: %+v", n, out.Trace[1].Failure)
			}
		} else {
			refused++
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("accepted %d, refused %d: the range does not straddle the bound", accepted, refused)
	}
}

// An approver's edit is held to the same bound and types: it is refused,
// and the approval stays pending.
func TestEditBoundedAndTyped(t *testing.T) {
	cfg := approvalConfig(t, "")
	cfg.Bindings[2].Limits = runtime.Limits{MaxInputBytes: 1024}
	e := newEnv(t, cfg)
	ap := e.run(t, toolBefore, shellCall("ls")).Approval
	for _, edit := range []map[string]any{
		{"arguments": map[string]any{"command": strings.Repeat("x", 2000)}},
		{"arguments": nil},
		{"arguments": 7},
	} {
		if _, err := e.c.Resolve(t.Context(), ap.ID, Resolution{Decision: Edit, Edit: edit}); !errors.Is(err, ErrInvalidResolution) {
			t.Errorf("edit %v: %v, want ErrInvalidResolution", edit, err)
		}
	}
	if e.store.Len() != 1 {
		t.Fatal("the approval is no longer pending")
	}
	out, err := e.c.Resolve(t.Context(), ap.ID, Resolution{Decision: Edit, Edit: map[string]any{"arguments": map[string]any{"command": "ls -l"}}})
	if err != nil || out.Verdict != Allow || out.Trace[len(out.Trace)-1].Failure != nil {
		t.Fatalf("a fitting edit: %+v, %v", out, err)
	}
}

// Traffic that arrives too large for the guard is not the transformer's
// failure when its modify does not grow it.
func TestModifyOfTrafficThatCameInTooLarge(t *testing.T) {
	e := newEnv(t, policyConfig(t,
		Binding{Name: "shrink", Point: "message.outbound", Phase: Transformer, Fail: FailOpen,
			Settings: decide(`{"action":"modify","context":{"outgoing":"short"}}`)},
		Binding{Name: "guard", Point: "message.outbound", Phase: Guard, Fail: FailOpen, Limits: runtime.Limits{MaxInputBytes: 1024}},
	))
	out := e.run(t, "message.outbound", map[string]any{"outgoing": "x", "conversation": strings.Repeat("c", 2000)})
	if out.Trace[0].Failure != nil || !out.Modified {
		t.Fatalf("the transformer was blamed for traffic it did not grow: %+v", out.Trace[0].Failure)
	}
}
