package chain

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// Seed 002's decision words (ABI 1.2) apply as the canonical actions they
// stand for, with the same phase rules and the same checks as a modify, and
// the trace and the audit record say which wire shape the hook used: a
// legacy {"abort":true} is told apart from a canonical block.
func TestDecisionWordsAndWire(t *testing.T) {
	const outbound = "message.outbound"
	tests := []struct {
		name    string
		phase   Phase
		decide  string
		verdict Verdict
		applied abi.Action
		wire    abi.Shape
		fail    abi.FailureCode // the step's failure, "" for none
		out     string          // outgoing after the run
	}{
		{"allow", Guard, `{"action":"allow"}`, Allow, abi.ActionContinue, abi.ShapeGuardrail, "", "hi"},
		{"allow with reason", Guard, `{"action":"allow","reason":"clean"}`, Allow, abi.ActionContinue, abi.ShapeGuardrail, "", "hi"},
		{"rewrite", Transformer, `{"action":"rewrite","payload":{"outgoing":"bye"},"reason":"r"}`, Allow, abi.ActionModify, abi.ShapeGuardrail, "", "bye"},
		{"rewrite from a guard is ignored", Guard, `{"action":"rewrite","payload":{"outgoing":"bye"}}`, Allow, abi.ActionContinue, abi.ShapeGuardrail, "", "hi"},
		{"rewrite of a wrong type", Transformer, `{"action":"rewrite","payload":{"outgoing":5}}`, Block, abi.ActionBlock, "", abi.FailInvalidOutput, "hi"},
		{"rewrite of a null", Transformer, `{"action":"rewrite","payload":{"outgoing":null}}`, Block, abi.ActionBlock, "", abi.FailInvalidOutput, "hi"},
		{"rewrite of an unchangeable field", Transformer, `{"action":"rewrite","payload":{"incoming":"x"}}`, Block, abi.ActionBlock, "", abi.FailInvalidOutput, "hi"},
		{"rewrite of an unknown field", Transformer, `{"action":"rewrite","payload":{"outgoin":"x"}}`, Block, abi.ActionBlock, "", abi.FailInvalidOutput, "hi"},
		{"rewrite payload not an object", Transformer, `{"action":"rewrite","payload":"bye"}`, Block, abi.ActionBlock, "", abi.FailInvalidOutput, "hi"},
		{"require_approval", Guard, `{"action":"require_approval","reason":"check"}`, Pending, abi.ActionAsk, abi.ShapeGuardrail, "", "hi"},
		{"canonical block", Guard, `{"action":"block","reason":"no"}`, Block, abi.ActionBlock, "", "", "hi"},
		{"legacy abort", Guard, `{"abort":true,"reason":"no"}`, Block, abi.ActionBlock, abi.ShapeLegacy, "", "hi"},
		{"legacy continue", Guard, `{"abort":false}`, Allow, abi.ActionContinue, abi.ShapeLegacy, "", "hi"},
		{"outcome block", Guard, `{"decision":"block"}`, Block, abi.ActionBlock, abi.ShapeOutcome, "", "hi"},
		{"top-level modify", Transformer, `{"action":"modify","outgoing":"bye"}`, Allow, abi.ActionModify, abi.ShapeTopLevel, "", "bye"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, policyConfig(t, Binding{Name: "h", Point: outbound, Phase: tt.phase, Fail: FailClosed, Settings: decide(tt.decide)}))
			out := e.run(t, outbound, map[string]any{"outgoing": "hi"})
			st, rec := out.Trace[0], out.Records()[0]
			if out.Verdict != tt.verdict || st.Applied != tt.applied || out.Context["outgoing"] != tt.out {
				t.Fatalf("verdict %s, applied %s, outgoing %v; want %s, %s, %s (step %+v)", out.Verdict, st.Applied, out.Context["outgoing"], tt.verdict, tt.applied, tt.out, st)
			}
			if (st.Failure == nil) != (tt.fail == "") || st.Failure != nil && st.Failure.Code != tt.fail {
				t.Errorf("failure %+v, want %q", st.Failure, tt.fail)
			}
			if st.Wire != tt.wire || rec.Wire != string(tt.wire) {
				t.Errorf("wire: trace %q, audit %q, want %q", st.Wire, rec.Wire, tt.wire)
			}
			if rec.Decision != string(tt.applied) {
				t.Errorf("audit decision %q, want %q", rec.Decision, tt.applied)
			}
			if err := audit.Verify(e.sink.Records()); err != nil {
				t.Errorf("audit chain: %v", err)
			}
		})
	}
}

// require_approval's "pending" travels in the approval, sealed with it, and
// the run resumes from it like any ask.
func TestRequireApprovalCarriesPending(t *testing.T) {
	const pending = `{"tool":"transfer_funds","args":{"amount":100}}`
	cfg := policyConfig(t,
		Binding{Name: "approve-transfers", Point: toolBefore, Phase: Guard,
			Settings: decide(`{"action":"require_approval","pending":` + pending + `,"reason":"financial transfer requires human sign-off"}`)},
	)
	e := newEnv(t, cfg)
	out := e.run(t, toolBefore, map[string]any{"tool": "transfer_funds", "arguments": map[string]any{"amount": 100}})
	if out.Verdict != Pending || out.Approval == nil || out.Reason != "financial transfer requires human sign-off" {
		t.Fatalf("outcome %+v", out)
	}
	if want := mustJSON(pending); !reflect.DeepEqual(out.Approval.Pending, want) {
		t.Errorf("approval pending %v, want %v", out.Approval.Pending, want)
	}
	if out.Trace[0].Wire != abi.ShapeGuardrail || out.Records()[0].Wire != "guardrail" || out.Records()[0].Decision != "ask" {
		t.Errorf("step %+v, record %+v", out.Trace[0], out.Records()[0])
	}
	// The stored approval keeps it, under the seal: changing it is refused.
	stored, err := e.store.Get(context.Background(), out.Approval.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored.Pending, out.Approval.Pending) {
		t.Errorf("stored pending %v", stored.Pending)
	}
	res, err := e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Approve, Actor: "alice"})
	if err != nil || res.Verdict != Allow {
		t.Fatalf("Resolve: %+v, %v", res, err)
	}
	// A second run's approval with its pending changed in the store is
	// refused: the seal covers it.
	out = e.run(t, toolBefore, map[string]any{"tool": "transfer_funds", "arguments": map[string]any{"amount": 100}})
	forged, err := e.store.Get(context.Background(), out.Approval.ID)
	if err != nil {
		t.Fatal(err)
	}
	forged.Pending = map[string]any{"tool": "transfer_funds", "args": map[string]any{"amount": 1}}
	if err := e.store.Put(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	var aerr *ApprovalError
	if _, err := e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Approve}); !errors.As(err, &aerr) || aerr.Code != ApprovalSeal {
		t.Errorf("a changed pending: %v, want %s", err, ApprovalSeal)
	}
}

// A guard's short_circuit ends the run with allow: the guards after it do
// not run, and each is in the trace and the audit log as skipped, naming the
// guard. From an observer or a transformer it is ignored and reported.
func TestShortCircuit(t *testing.T) {
	const (
		outbound = "message.outbound"
		sc       = `{"action":"continue","short_circuit":true,"reason":"trusted sender"}`
		block    = `{"action":"block","reason":"later guard"}`
	)
	tests := []struct {
		name     string
		bindings []Binding
		verdict  Verdict
		by       string // Outcome.ShortCircuit
		skipped  []string
		ignored  string // the short-circuiting step's Ignored
	}{
		{"guard skips the guards after it", []Binding{
			{Name: "sc", Phase: Guard, Priority: 1, Settings: decide(sc)},
			{Name: "g2", Phase: Guard, Priority: 2, Settings: decide(block)},
			{Name: "g3", Phase: Guard, Priority: 3, Settings: decide(block)},
		}, Allow, "sc", []string{"g2", "g3"}, ""},
		{"seed 002's allow", []Binding{
			{Name: "sc", Phase: Guard, Priority: 1, Settings: decide(`{"action":"allow","short_circuit":true}`)},
			{Name: "g2", Phase: Guard, Priority: 2, Settings: decide(block)},
		}, Allow, "sc", []string{"g2"}, ""},
		{"guards before it still decide", []Binding{
			{Name: "g1", Phase: Guard, Priority: 1, Settings: decide(block)},
			{Name: "sc", Phase: Guard, Priority: 2, Settings: decide(sc)},
		}, Block, "", nil, ""},
		{"last guard", []Binding{
			{Name: "g1", Phase: Guard, Priority: 1, Settings: decide(`{"action":"continue"}`)},
			{Name: "sc", Phase: Guard, Priority: 2, Settings: decide(sc)},
		}, Allow, "sc", nil, ""},
		{"short_circuit false", []Binding{
			{Name: "sc", Phase: Guard, Priority: 1, Settings: decide(`{"action":"continue","short_circuit":false}`)},
			{Name: "g2", Phase: Guard, Priority: 2, Settings: decide(block)},
		}, Block, "", nil, ""},
		{"observer cannot", []Binding{
			{Name: "sc", Phase: Observer, Settings: decide(sc)},
			{Name: "g2", Phase: Guard, Settings: decide(block)},
		}, Block, "", nil, "an observer cannot short_circuit; only guards can"},
		{"transformer cannot", []Binding{
			{Name: "sc", Phase: Transformer, Settings: decide(sc)},
			{Name: "g2", Phase: Guard, Settings: decide(block)},
		}, Block, "", nil, "a transformer cannot short_circuit; only guards can"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.bindings {
				tt.bindings[i].Point = outbound
			}
			e := newEnv(t, policyConfig(t, tt.bindings...))
			out := e.run(t, outbound, map[string]any{"outgoing": "hi"})
			if out.Verdict != tt.verdict || out.ShortCircuit != tt.by {
				t.Fatalf("verdict %s, short-circuited by %q; want %s, %q", out.Verdict, out.ShortCircuit, tt.verdict, tt.by)
			}
			if len(out.Trace) != len(tt.bindings) || len(out.Records()) != len(out.Trace) {
				if !(tt.verdict == Block && tt.by == "") {
					t.Fatalf("trace %v, %d records", names(out.Trace), len(out.Records()))
				}
			}
			var skipped []string
			for i, st := range out.Trace {
				rec := out.Records()[i]
				if st.By != ByShortCircuit {
					if st.Binding == "sc" && st.Ignored != tt.ignored {
						t.Errorf("sc ignored %q, want %q", st.Ignored, tt.ignored)
					}
					continue
				}
				skipped = append(skipped, st.Binding)
				if st.Applied != abi.ActionContinue || st.Decision != nil || st.Invocation != "" || st.FuelUsed != 0 ||
					!strings.Contains(st.Reason, "guard sc short-circuited") || st.Audit != rec.Hash {
					t.Errorf("skipped step %+v", st)
				}
				if rec.Binding != st.Binding || rec.By != ByShortCircuit || rec.Decision != "continue" || rec.Reason != st.Reason || rec.Input != rec.Output {
					t.Errorf("skipped record %+v", rec)
				}
			}
			if !equal(skipped, tt.skipped) {
				t.Errorf("skipped %v, want %v", skipped, tt.skipped)
			}
			if err := audit.Verify(e.sink.Records()); err != nil {
				t.Errorf("audit chain: %v", err)
			}
		})
	}
}

// A short_circuit after an approval's resumption ends the resumed run too.
func TestShortCircuitAfterApproval(t *testing.T) {
	cfg := policyConfig(t,
		Binding{Name: "ask", Point: toolBefore, Phase: Guard, Priority: 1, Settings: decide(`{"action":"ask"}`)},
		Binding{Name: "sc", Point: toolBefore, Phase: Guard, Priority: 2, Settings: decide(`{"action":"allow","short_circuit":true}`)},
		Binding{Name: "deny-all", Point: toolBefore, Phase: Guard, Priority: 3, Settings: decide(`{"action":"block"}`)},
	)
	e := newEnv(t, cfg)
	out := e.run(t, toolBefore, map[string]any{"tool": "t", "arguments": map[string]any{}})
	if out.Verdict != Pending {
		t.Fatalf("verdict %s", out.Verdict)
	}
	res, err := e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Approve})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Allow || res.ShortCircuit != "sc" || res.Trace[len(res.Trace)-1].By != ByShortCircuit {
		t.Fatalf("outcome %s by %q, trace %v", res.Verdict, res.ShortCircuit, names(res.Trace))
	}
}

// A guard's short_circuit skips guard hooks, never a ToolApproval: that is
// the platform's configuration. The approval pauses the run; once approved,
// the guards after the short-circuit stay skipped.
func TestShortCircuitKeepsToolApprovals(t *testing.T) {
	cfg := policyConfig(t,
		Binding{Name: "sc", Point: toolBefore, Phase: Guard, Priority: 1, Settings: decide(`{"action":"allow","short_circuit":true}`)},
		Binding{Name: "deny-all", Point: toolBefore, Phase: Guard, Priority: 3, Settings: decide(`{"action":"block"}`)},
	)
	cfg.ToolApprovals = []ToolApproval{{Name: "pay", Tools: []string{"payments.*"}, Priority: 2}}
	e := newEnv(t, cfg)
	out := e.run(t, toolBefore, map[string]any{"tool": "payments.send", "arguments": map[string]any{}})
	if out.Verdict != Pending || out.By != ByConfig || out.ShortCircuit != "sc" {
		t.Fatalf("%s by %s (short-circuited by %q), trace %v", out.Verdict, out.By, out.ShortCircuit, names(out.Trace))
	}
	res, err := e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Approve})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Trace[len(res.Trace)-1]
	if res.Verdict != Allow || res.ShortCircuit != "sc" || last.Binding != "deny-all" || last.By != ByShortCircuit {
		t.Fatalf("%s, short-circuited by %q, trace %v (last %+v)", res.Verdict, res.ShortCircuit, names(res.Trace), last)
	}
	// Another tool: nothing asks, and deny-all is skipped.
	out = e.run(t, toolBefore, map[string]any{"tool": "search", "arguments": map[string]any{}})
	if out.Verdict != Allow || !equal(names(out.Trace), []string{"sc", "deny-all"}) {
		t.Fatalf("%s, trace %v", out.Verdict, names(out.Trace))
	}
}

// When the configuration changed while the run was paused, the run restarts
// from its first binding: the guard that short-circuited runs again rather
// than being skipped by its own earlier short-circuit.
func TestShortCircuitRestartsWithTheConfiguration(t *testing.T) {
	bindings := func(denyPriority int) Config {
		cfg := policyConfig(t,
			Binding{Name: "sc", Point: toolBefore, Phase: Guard, Priority: 1, Settings: decide(`{"action":"allow","short_circuit":true}`)},
			Binding{Name: "deny-all", Point: toolBefore, Phase: Guard, Priority: denyPriority, Settings: decide(`{"action":"block"}`)},
		)
		cfg.ToolApprovals = []ToolApproval{{Name: "pay", Tools: []string{"payments.*"}, Priority: 2}}
		return cfg
	}
	e := newEnv(t, bindings(3))
	out := e.run(t, toolBefore, map[string]any{"tool": "payments.send", "arguments": map[string]any{}})
	if out.Verdict != Pending {
		t.Fatalf("verdict %s", out.Verdict)
	}
	if err := e.c.Reload(context.Background(), bindings(4)); err != nil {
		t.Fatal(err)
	}
	res, err := e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Approve})
	if err != nil {
		t.Fatal(err)
	}
	var again *Step
	for i := range res.Trace[2:] { // after the first run's two steps and the resolution
		if st := &res.Trace[2+i]; st.Binding == "sc" {
			again = st
		}
	}
	if res.Verdict != Allow || again == nil || again.By != ByHook {
		t.Fatalf("%s, trace %v, sc after the restart %+v", res.Verdict, names(res.Trace), again)
	}
}
