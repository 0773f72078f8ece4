package chain

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

// An audit-mode binding (MCP interceptors' mode "audit") runs and records
// what it would have done, in the trace (Shadow) and the audit record
// (Ignored, hook_action), but never blocks, asks or changes the traffic,
// whatever it decides and whatever its fail policy says about a failure.
func TestAuditModeNeverAltersTraffic(t *testing.T) {
	tests := []struct {
		name      string
		b         Binding
		wantWould abi.Action
	}{
		{"guard block", Binding{Phase: Guard, Settings: decide(`{"action":"block","reason":"no","do_not_reply_again":true}`)}, abi.ActionBlock},
		{"guard ask", Binding{Phase: Guard, Settings: decide(`{"action":"ask","reason":"sure?"}`)}, abi.ActionAsk},
		{"transformer modify", Binding{Phase: Transformer, Settings: appendTo("outgoing", "+shadow")}, abi.ActionModify},
		{"fail closed", Binding{Module: "scripted", Phase: Guard, Fail: FailClosed, Settings: script("U")}, abi.ActionBlock},
		{"continue", Binding{Phase: Guard, Settings: decide(`{"action":"continue"}`)}, abi.ActionContinue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.b
			b.Name, b.Point, b.Mode = "audited", outbound, ModeAudit
			e := newEnv(t, policyConfig(t, b))
			out := e.run(t, outbound, map[string]any{"incoming": "hi", "outgoing": "reply"})
			if out.Verdict != Allow || out.Modified || out.DoNotReplyAgain || out.Context["outgoing"] != "reply" || out.Approval != nil {
				t.Fatalf("outcome %+v, want allow with the traffic unchanged", out)
			}
			st := out.Trace[0]
			if st.Applied != abi.ActionContinue || st.Shadow == nil || st.Shadow.Applied != tt.wantWould {
				t.Fatalf("step applied %s, shadow %+v; want continue with shadow %s", st.Applied, st.Shadow, tt.wantWould)
			}
			if tt.wantWould == abi.ActionModify && (st.Shadow.Context["outgoing"] != "reply+shadow" || len(st.Shadow.Changed) != 1) {
				t.Errorf("shadow change %+v, want outgoing reply+shadow", st.Shadow)
			}
			rec := out.Records()[0]
			if rec.Decision != string(abi.ActionContinue) || rec.Input != rec.Output {
				t.Errorf("audit record decision %s, input %s output %s: want continue, unchanged", rec.Decision, rec.Input, rec.Output)
			}
			if tt.wantWould != abi.ActionContinue && !strings.Contains(rec.Ignored, "audit mode: would "+string(tt.wantWould)) {
				t.Errorf("audit record ignored %q, want the would-be %s", rec.Ignored, tt.wantWould)
			}
		})
	}
}

func TestAuditModeRefusesUnknownMode(t *testing.T) {
	_, err := New(context.Background(), policyConfig(t, Binding{Name: "x", Point: outbound, Phase: Guard, Mode: "shadow"}), Options{Runtime: testRuntime(t), Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), `unknown mode "shadow"`) {
		t.Fatalf("err = %v, want the unknown mode refused", err)
	}
}

func TestAuditModeInConfigFile(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"modules": {"m": "m.wasm"}, "bindings": [{"name": "a", "module": "m", "point": "tool.before", "phase": "guard", "mode": "audit"}]}`),
		func(string) ([]byte, error) { return nil, nil })
	if err != nil || cfg.Bindings[0].Mode != ModeAudit {
		t.Fatalf("ParseConfig: %v, mode %q", err, cfg.Bindings[0].Mode)
	}
}

// An audit-mode guard's short_circuit is a would-be decision like any other:
// it never skips the guards after it.
func TestAuditModeShortCircuitSkipsNothing(t *testing.T) {
	e := newEnv(t, policyConfig(t,
		Binding{Name: "audited", Point: outbound, Phase: Guard, Priority: 0, Mode: ModeAudit,
			Settings: decide(`{"action":"continue","short_circuit":true}`)},
		Binding{Name: "enforced", Point: outbound, Phase: Guard, Priority: 10,
			Settings: decide(`{"action":"block","reason":"no"}`)},
	))
	out := e.run(t, outbound, map[string]any{"incoming": "hi", "outgoing": "reply"})
	if out.Verdict != Block || out.ShortCircuit != "" {
		t.Fatalf("verdict %s, short circuit %q: want the enforced guard's block, nothing skipped", out.Verdict, out.ShortCircuit)
	}
}
