package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

const outbound = "message.outbound"

func TestOrder(t *testing.T) {
	// Declared out of order on purpose: phase first, then priority, then
	// the order of declaration for equal priorities.
	cfg := policyConfig(t,
		Binding{Name: "g-5", Point: outbound, Phase: Guard, Priority: 5},
		Binding{Name: "t-10-first", Point: outbound, Phase: Transformer, Priority: 10, Settings: appendTo("outgoing", "+t10a")},
		Binding{Name: "o-1", Point: outbound, Phase: Observer, Priority: 1},
		Binding{Name: "t-5", Point: outbound, Phase: Transformer, Priority: 5, Settings: appendTo("outgoing", "+t5")},
		Binding{Name: "g-1", Point: outbound, Phase: Guard, Priority: 1},
		Binding{Name: "t-10-second", Point: outbound, Phase: Transformer, Priority: 10, Settings: appendTo("outgoing", "+t10b")},
		Binding{Name: "o-neg", Point: outbound, Phase: Observer, Priority: -3},
		Binding{Name: "t-10-third", Point: outbound, Phase: Transformer, Priority: 10, Settings: appendTo("outgoing", "+t10c")},
		Binding{Name: "elsewhere", Point: "message.inbound", Phase: Guard},
	)
	e := newEnv(t, cfg)
	out := e.run(t, outbound, map[string]any{"outgoing": "x"})
	want := []string{"o-neg", "o-1", "t-5", "t-10-first", "t-10-second", "t-10-third", "g-1", "g-5"}
	if got := names(out.Trace); !equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	// Modifies compose in order: each transformer saw the one before.
	if got := out.Context["outgoing"]; got != "x+t5+t10a+t10b+t10c" {
		t.Errorf("outgoing = %q", got)
	}
	if out.Verdict != Allow || !out.Modified {
		t.Errorf("verdict %s modified %v", out.Verdict, out.Modified)
	}
	info, _ := e.c.Info()
	var order []string
	for _, b := range info.Points[outbound] {
		order = append(order, b.Name)
	}
	if !equal(order, want) {
		t.Errorf("Info order %v, want %v", order, want)
	}
}

func TestConfigRefused(t *testing.T) {
	schemaHook, err := runtime.EmbedManifest(policyWasm(t), []byte(`{"name":"strict","points":["message.outbound"],
		"settings_schema":{"type":"object","additionalProperties":false,"properties":{"decide":{"type":"object"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ok := Binding{Name: "ok", Point: outbound, Phase: Guard}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"duplicate name", policyConfig(t, ok, Binding{Name: "ok", Point: "tool.before", Phase: Guard}), `binding 1 ("ok"): duplicate binding name`},
		{"bad name", policyConfig(t, Binding{Name: "a b", Point: outbound, Phase: Guard}), "the name must be"},
		{"unknown point", policyConfig(t, Binding{Name: "x", Point: "nowhere", Phase: Guard}), `unknown hook point "nowhere"`},
		{"unknown phase", policyConfig(t, Binding{Name: "x", Point: outbound, Phase: "filter"}), `unknown phase "filter"`},
		{"unknown module", policyConfig(t, Binding{Name: "x", Module: "nope", Point: outbound, Phase: Guard}), `unknown module "nope"`},
		{"unknown fail policy", policyConfig(t, Binding{Name: "x", Point: outbound, Phase: Guard, Fail: "maybe"}), `unknown fail policy "maybe"`},
		{"observer fails closed", policyConfig(t, Binding{Name: "x", Point: outbound, Phase: Observer, Fail: FailClosed}), "an observer cannot fail closed"},
		{"bad expiry", policyConfig(t, Binding{Name: "x", Point: outbound, Phase: Guard, Approval: ApprovalPolicy{OnExpiry: "later"}}), "unknown approval expiry policy"},
		{"negative limit", policyConfig(t, Binding{Name: "x", Point: outbound, Phase: Guard, Limits: runtime.Limits{MaxHostCalls: -1}}), "negative limit"},
		{"negative timeout", policyConfig(t, Binding{Name: "x", Point: outbound, Phase: Guard, Limits: runtime.Limits{Timeout: -1}}), "negative timeout"},
		// The runtime's ceiling (DefaultMaxMemoryPages): accepted here, it
		// would fail every invocation (issue 10, section 9).
		{"memory over the runtime's ceiling", policyConfig(t, Binding{Name: "x", Point: outbound, Phase: Guard, Limits: runtime.Limits{MemoryPages: runtime.DefaultMaxMemoryPages + 1}}), "memory_pages is 4097, over the limit of 4096"},
		{"memory below the module's minimum", policyConfig(t, Binding{Name: "x", Module: "scripted", Point: outbound, Phase: Guard, Limits: runtime.Limits{MemoryPages: 2}}), "memory_pages (module minimum)"},
		{"fuel over the ceiling", policyConfig(t, Binding{Name: "x", Point: outbound, Phase: Guard, Limits: runtime.Limits{Fuel: runtime.MaxFuel + 1}}), "fuel is"},
		{"stack over the ceiling", policyConfig(t, Binding{Name: "x", Point: outbound, Phase: Guard, Limits: runtime.Limits{MaxStackBytes: runtime.MaxStackBytesLimit + 1}}), "MaxStackBytes"},
		{"module refused", Config{Modules: map[string][]byte{"bad": []byte("not wasm")}, Bindings: []Binding{{Name: "x", Module: "bad", Point: outbound, Phase: Guard}}}, `module "bad": invalid module`},
		{"settings against the schema", Config{Modules: map[string][]byte{"strict": schemaHook}, Bindings: []Binding{{Name: "x", Module: "strict", Point: outbound, Phase: Guard, Settings: map[string]any{"when": "x"}}}}, "settings do not match the hook's settings_schema"},
		{"point the manifest does not allow", Config{Modules: map[string][]byte{"strict": schemaHook}, Bindings: []Binding{{Name: "x", Module: "strict", Point: "tool.before", Phase: Guard}}}, "does not allow point tool.before"},
	}
	e := newEnv(t, policyConfig(t, Binding{Name: "keep", Point: outbound, Phase: Transformer, Settings: appendTo("outgoing", "!")}))
	before, _ := e.c.Info()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.c.Reload(context.Background(), tt.cfg)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Reload = %v, want a *ConfigError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			// The configuration in force stays.
			after, _ := e.c.Info()
			if after.Digest != before.Digest || after.Version != before.Version {
				t.Errorf("configuration changed: %+v -> %+v", before, after)
			}
			if out := e.run(t, outbound, map[string]any{"outgoing": "x"}); out.Context["outgoing"] != "x!" {
				t.Errorf("old configuration not in force: %v", out.Context)
			}
		})
	}
	// Settings that do not match their schema are a typed cause, for a
	// caller that names it (the CLI's run, a chain of one binding).
	mismatch := Config{Modules: map[string][]byte{"strict": schemaHook}, Bindings: []Binding{{Name: "x", Module: "strict", Point: outbound, Phase: Guard, Settings: map[string]any{"when": "x"}}}}
	if err := e.c.Reload(context.Background(), mismatch); !errors.Is(err, ErrInvalidSettings) {
		t.Errorf("Reload = %v, want ErrInvalidSettings among its causes", err)
	}
	// The valid variant of the schema case is accepted.
	good := Config{Modules: map[string][]byte{"strict": schemaHook}, Bindings: []Binding{{Name: "x", Module: "strict", Point: outbound, Phase: Guard, Settings: decide(`{"action":"continue"}`)}}}
	if err := e.c.Reload(context.Background(), good); err != nil {
		t.Fatalf("valid configuration refused: %v", err)
	}
}

func TestPhasePermissions(t *testing.T) {
	decisions := map[abi.Action]string{
		abi.ActionContinue: `{"action":"continue"}`,
		abi.ActionModify:   `{"action":"modify","context":{"outgoing":"changed"}}`,
		abi.ActionBlock:    `{"action":"block","reason":"no"}`,
		abi.ActionAsk:      `{"action":"ask","reason":"maybe"}`,
	}
	type want struct {
		applied abi.Action
		ignored bool
		verdict Verdict
	}
	tests := []struct {
		phase  Phase
		action abi.Action
		want   want
	}{
		{Observer, abi.ActionContinue, want{abi.ActionContinue, false, Allow}},
		{Observer, abi.ActionModify, want{abi.ActionContinue, true, Allow}},
		{Observer, abi.ActionBlock, want{abi.ActionContinue, true, Allow}},
		{Observer, abi.ActionAsk, want{abi.ActionContinue, true, Allow}},
		{Transformer, abi.ActionContinue, want{abi.ActionContinue, false, Allow}},
		{Transformer, abi.ActionModify, want{abi.ActionModify, false, Allow}},
		{Transformer, abi.ActionBlock, want{abi.ActionContinue, true, Allow}},
		{Transformer, abi.ActionAsk, want{abi.ActionContinue, true, Allow}},
		{Guard, abi.ActionContinue, want{abi.ActionContinue, false, Allow}},
		{Guard, abi.ActionModify, want{abi.ActionContinue, true, Allow}},
		{Guard, abi.ActionBlock, want{abi.ActionBlock, false, Block}},
		{Guard, abi.ActionAsk, want{abi.ActionAsk, false, Pending}},
	}
	for _, tt := range tests {
		t.Run(string(tt.phase)+"/"+string(tt.action), func(t *testing.T) {
			e := newEnv(t, policyConfig(t, Binding{Name: "b", Point: outbound, Phase: tt.phase, Settings: decide(decisions[tt.action])}))
			out := e.run(t, outbound, map[string]any{"outgoing": "original"})
			st := out.Trace[0]
			if st.Decision == nil || st.Decision.Action != tt.action {
				t.Fatalf("hook decision %+v, want %s", st.Decision, tt.action)
			}
			if st.Applied != tt.want.applied || (st.Ignored != "") != tt.want.ignored || out.Verdict != tt.want.verdict {
				t.Errorf("applied %s ignored %q verdict %s; want %+v", st.Applied, st.Ignored, out.Verdict, tt.want)
			}
			wantOut := "original"
			if tt.want.applied == abi.ActionModify {
				wantOut = "changed"
			}
			if out.Context["outgoing"] != wantOut || out.Modified != (wantOut != "original") {
				t.Errorf("context %v modified %v", out.Context, out.Modified)
			}
			rec := e.sink.Records()[0]
			if rec.Decision != string(tt.want.applied) || rec.HookAction != string(tt.action) || (rec.Ignored != "") != tt.want.ignored {
				t.Errorf("audit record %+v", rec)
			}
		})
	}
}

func TestModifyOfAFieldThePointDoesNotAllowIsAFailure(t *testing.T) {
	e := newEnv(t, policyConfig(t, Binding{Name: "t", Point: outbound, Phase: Transformer,
		Settings: decide(`{"action":"modify","context":{"incoming":"rewritten"}}`)}))
	out := e.run(t, outbound, map[string]any{"incoming": "hi", "outgoing": "x"})
	st := out.Trace[0]
	if st.Failure == nil || st.Failure.Code != abi.FailInvalidOutput {
		t.Fatalf("failure %+v, want invalid_output", st.Failure)
	}
	// message.outbound transformers fail closed by default.
	if out.Verdict != Block || out.By != ByFailPolicy || out.Context["incoming"] != "hi" {
		t.Errorf("outcome %+v", out)
	}
}

func TestBlockShortCircuits(t *testing.T) {
	cfg := policyConfig(t,
		Binding{Name: "first", Point: outbound, Phase: Guard, Priority: 1, Settings: decide(`{"action":"block","reason":"leaks","user_message":"Sorry.","do_not_reply_again":true}`)},
		Binding{Name: "second", Point: outbound, Phase: Guard, Priority: 2, Settings: map[string]any{"log": "must not run"}},
	)
	e := newEnv(t, cfg)
	out := e.run(t, outbound, map[string]any{"outgoing": "x"})
	if out.Verdict != Block || out.Binding != "first" || out.By != ByHook || out.Reason != "leaks" || out.UserMessage != "Sorry." || !out.DoNotReplyAgain {
		t.Errorf("outcome %+v", out)
	}
	if got := names(out.Trace); !equal(got, []string{"first"}) {
		t.Errorf("trace %v: the second guard ran", got)
	}
	if n := len(e.sink.Records()); n != 1 {
		t.Errorf("%d audit records, want 1", n)
	}
}

func TestGuardsSeeTheTransformedPayload(t *testing.T) {
	guard := Binding{Name: "guard", Point: outbound, Phase: Guard, Settings: when("SECRET", `{"action":"block","reason":"secret"}`)}
	redact := Binding{Name: "redact", Point: outbound, Phase: Transformer, Settings: decide(`{"action":"modify","context":{"outgoing":"[redacted]"}}`)}
	// Declared guard first: phases order them anyway.
	e := newEnv(t, policyConfig(t, guard, redact))
	if out := e.run(t, outbound, map[string]any{"outgoing": "the SECRET is 42"}); out.Verdict != Allow || out.Context["outgoing"] != "[redacted]" {
		t.Errorf("with the transformer: %+v", out)
	}
	e2 := newEnv(t, policyConfig(t, guard))
	if out := e2.run(t, outbound, map[string]any{"outgoing": "the SECRET is 42"}); out.Verdict != Block {
		t.Errorf("without the transformer: %+v", out)
	}
}

func TestNoBindingsAllows(t *testing.T) {
	e := newEnv(t, policyConfig(t))
	out := e.run(t, "memory.write", map[string]any{"key": "k", "value": "v"})
	if out.Verdict != Allow || out.Modified || len(out.Trace) != 0 || len(out.Records()) != 0 {
		t.Errorf("outcome %+v", out)
	}
}

func TestInvalidInput(t *testing.T) {
	e := newEnv(t, policyConfig(t))
	for _, in := range []Input{{Point: outbound}, {Tenant: "a", Point: "nowhere"}} {
		if _, err := e.c.Run(context.Background(), in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidInput", in, err)
		}
	}
	e.c.Close(context.Background())
	if _, err := e.c.Run(context.Background(), Input{Tenant: "a", Point: outbound}); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close = %v", err)
	}
}

// TestFailPolicies provokes each failure code from a real guest and checks
// both policies: open continues, closed blocks, and neither is confused with a
// hook's own block.
func TestFailPolicies(t *testing.T) {
	initFails := testutil.WAT(t, `(module
		(import "hook_v1" "host_call" (func (param i32 i32 i32 i32 i32 i32) (result i64)))
		(memory (export "memory") 1)
		(func (export "_initialize") unreachable)
		(func (export "hook_v1_handle") (param i32) (result i64) (i64.const 0)))`)
	tests := []struct {
		code     abi.FailureCode
		module   string
		settings map[string]any
		limits   runtime.Limits
	}{
		{abi.FailTrap, "scripted", script("U"), runtime.Limits{}},
		{abi.FailTimeout, "scripted", script("L"), runtime.Limits{Timeout: 50 * time.Millisecond}},
		{abi.FailMemory, "scripted", script("G00000100S00100000"), runtime.Limits{MemoryPages: 8}},
		{abi.FailInvalidOutput, "scripted", script("Z"), runtime.Limits{}},
		{abi.FailInvalidOutput, "policy", decide(`{"action":"permit"}`), runtime.Limits{}},
		{abi.FailOutputTooLarge, "policy", decide(`{"action":"continue"}`), runtime.Limits{MaxOutputBytes: 8}},
		{abi.FailABIViolation, "scripted", script("O0010000000000010"), runtime.Limits{}},
		{abi.FailInit, "init", nil, runtime.Limits{}},
		{"limit_exceeded", "policy", nil, runtime.Limits{MaxInputBytes: 16}}, // the runtime refused the invocation
	}
	for _, tt := range tests {
		for _, policy := range []FailPolicy{FailOpen, FailClosed} {
			t.Run(string(tt.code)+"/"+tt.module+"/"+string(policy), func(t *testing.T) {
				cfg := policyConfig(t, Binding{Name: "hook", Module: tt.module, Point: outbound, Phase: Guard,
					Settings: tt.settings, Limits: tt.limits, Fail: policy})
				cfg.Modules["init"] = initFails
				e := newEnv(t, cfg)
				out := e.run(t, outbound, map[string]any{"outgoing": "x"})
				st := out.Trace[0]
				if st.Failure == nil || st.Failure.Code != tt.code {
					t.Fatalf("failure %+v, want %s", st.Failure, tt.code)
				}
				if st.Decision != nil || st.By != ByFailPolicy || st.FailPolicy != policy {
					t.Errorf("step %+v", st)
				}
				rec := e.sink.Records()[0]
				if rec.Failure == nil || rec.Failure.Code != tt.code || rec.By != ByFailPolicy || rec.HookAction != "" {
					t.Errorf("audit record %+v", rec)
				}
				switch policy {
				case FailOpen:
					if out.Verdict != Allow || out.Failure != nil || st.Applied != abi.ActionContinue {
						t.Errorf("fail open: %+v", out)
					}
				case FailClosed:
					if out.Verdict != Block || out.By != ByFailPolicy || out.Failure == nil || out.Failure.Code != tt.code ||
						!strings.Contains(out.Reason, "fail-closed policy blocks") || out.UserMessage != "" {
						t.Errorf("fail closed: %+v", out)
					}
				}
			})
		}
	}
}

// TestFailureCodesFromLaterRuntimes: codes the runtime adds later (fuel,
// stack) flow through the same policies.
func TestFailureCodesFromLaterRuntimes(t *testing.T) {
	for _, code := range []abi.FailureCode{"fuel_exhausted", "stack_exhausted"} {
		for _, policy := range []FailPolicy{FailOpen, FailClosed} {
			t.Run(string(code)+"/"+string(policy), func(t *testing.T) {
				e := newEnv(t, policyConfig(t, Binding{Name: "hook", Point: outbound, Phase: Transformer, Fail: policy}),
					withInvoke(t, func(context.Context, *runtime.Module, runtime.Request) (*runtime.Result, error) {
						f := &abi.Failure{Code: code, Message: "ran out"}
						return &runtime.Result{Failure: f}, f
					}))
				out := e.run(t, outbound, map[string]any{"outgoing": "x"})
				want := Allow
				if policy == FailClosed {
					want = Block
				}
				if out.Verdict != want || out.Trace[0].Failure.Code != code {
					t.Errorf("outcome %+v", out)
				}
			})
		}
	}
}

func TestDefaultFailPolicies(t *testing.T) {
	for _, p := range abi.Points() {
		if got := DefaultFailPolicy(p.Name, Guard); got != FailClosed {
			t.Errorf("%s guard: %s", p.Name, got)
		}
		if got := DefaultFailPolicy(p.Name, Observer); got != FailOpen {
			t.Errorf("%s observer: %s", p.Name, got)
		}
		if p.AllowsPhase(abi.PhaseTransformer) && p.Fail != "open" && p.Fail != "closed" {
			t.Errorf("%s has no transformer default", p.Name)
		}
	}
	// An observer's failure never blocks.
	e := newEnv(t, policyConfig(t, Binding{Name: "o", Module: "scripted", Point: outbound, Phase: Observer, Settings: script("U")}))
	if out := e.run(t, outbound, nil); out.Verdict != Allow || out.Trace[0].Failure == nil {
		t.Errorf("observer failure: %+v", out)
	}
}

func TestCallerGivingUpIsNotAVerdict(t *testing.T) {
	e := newEnv(t, policyConfig(t, Binding{Name: "loop", Module: "scripted", Point: outbound, Phase: Guard, Settings: script("L")}))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	out, err := e.c.Run(ctx, Input{Tenant: "acme", Point: outbound})
	if err == nil || out != nil {
		t.Fatalf("Run = %+v, %v; want an error and no outcome", out, err)
	}
	if n := len(e.sink.Records()); n != 0 {
		t.Errorf("%d audit records for a run without a verdict", n)
	}
}

func TestAuditRecords(t *testing.T) {
	cfg := policyConfig(t,
		Binding{Name: "o", Point: outbound, Phase: Observer},
		Binding{Name: "t", Point: outbound, Phase: Transformer, Settings: decide(`{"action":"modify","context":{"outgoing":"[redacted]"},"reason":"secret"}`)},
		Binding{Name: "g", Point: outbound, Phase: Guard},
	)
	e := newEnv(t, cfg)
	in := map[string]any{"incoming": "hi", "outgoing": "key=sk-live-123"}
	out := e.run(t, outbound, in)
	recs := e.sink.Records()
	if len(recs) != 3 || len(out.Records()) != 3 {
		t.Fatalf("%d records (%d in the outcome), want 3: one per verdict, allows included", len(recs), len(out.Records()))
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	inD, outD := audit.Digest(in), audit.Digest(out.Context)
	if recs[0].Input != inD || recs[0].Output != inD || recs[1].Input != inD || recs[1].Output != outD || recs[2].Input != outD {
		t.Errorf("digests do not follow the context")
	}
	mod := recs[1]
	if mod.Decision != "modify" || mod.Reason != "secret" || len(mod.Diff) != 1 || mod.Diff[0].Field != "outgoing" ||
		mod.Diff[0].Before != audit.Digest("key=sk-live-123") || mod.Diff[0].After != audit.Digest("[redacted]") {
		t.Errorf("modify record %+v", mod)
	}
	if mod.Diff[0].BeforeValue != nil {
		t.Errorf("the audit log kept the value a redaction removed")
	}
	for i, r := range recs {
		if r.Tenant != "acme" || r.Point != outbound || r.Run != out.Run || r.Module != e.c.cur.Load().byName["o"].digest || r.Config != out.Config || r.Hash != out.Trace[i].Audit {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	// Tampering is caught.
	recs[1].Reason = "nothing to see"
	var ve *audit.VerifyError
	if err := audit.Verify(recs); !errors.As(err, &ve) || ve.Index != 1 {
		t.Errorf("Verify after modification = %v, want index 1", err)
	}

	// With AuditValues the values are kept.
	e2 := newEnv(t, cfg, func(o *Options) { o.AuditValues = true })
	e2.run(t, outbound, in)
	if d := e2.sink.Records()[1].Diff[0]; d.BeforeValue != "key=sk-live-123" || d.AfterValue != "[redacted]" {
		t.Errorf("diff with values %+v", d)
	}
}

type failingSink struct{}

func (failingSink) Append(context.Context, *audit.Record) error { return errors.New("disk full") }

func TestAuditFailureStopsTheRun(t *testing.T) {
	e := newEnv(t, policyConfig(t, Binding{Name: "g", Point: outbound, Phase: Guard}), func(o *Options) { o.Audit = failingSink{} })
	out, err := e.c.Run(context.Background(), Input{Tenant: "acme", Point: outbound})
	if !errors.Is(err, ErrAudit) || out != nil {
		t.Errorf("Run = %+v, %v; want ErrAudit", out, err)
	}
}

// TestTraceDecisionsOutliveLaterRuns: a step invokes into a pooled
// runtime.Result, and the runtime reuses the Decision a Result points to;
// the decision a trace holds must not be the one a later run overwrites.
func TestTraceDecisionsOutliveLaterRuns(t *testing.T) {
	e := newEnv(t, policyConfig(t, Binding{Name: "guard", Point: outbound, Phase: Guard,
		Settings: when("boom", `{"action":"block","reason":"boom"}`)}))
	first := e.run(t, outbound, map[string]any{"outgoing": "boom"})
	if first.Verdict != Block || first.Trace[0].Decision == nil || first.Trace[0].Decision.Action != abi.ActionBlock {
		t.Fatalf("first run: %+v", first)
	}
	for i := 0; i < 5; i++ {
		if out := e.run(t, outbound, map[string]any{"outgoing": "calm"}); out.Verdict != Allow {
			t.Fatalf("later run: %+v", out)
		}
	}
	if d := first.Trace[0].Decision; d.Action != abi.ActionBlock || d.Reason != "boom" {
		t.Errorf("the first run's decision became %+v", d)
	}
}

// TestOutcomeRecordsAreTheStoredOnes: Outcome keeps each fact once (a
// record's fields it shares with its step come from Trace), and Records
// gives back exactly what the sink stored, field for field and so hash for
// hash, for runs that modify (values on and off), fail, ask and resume (the
// resolution record first), and the JSON form still has them as "audit".
func TestOutcomeRecordsAreTheStoredOnes(t *testing.T) {
	check := func(t *testing.T, e *env, out *Outcome, stored []audit.Record) {
		t.Helper()
		got := out.Records()
		if !reflect.DeepEqual(got, stored) {
			t.Fatalf("records\n%+v\nstored\n%+v", got, stored)
		}
		for _, r := range got {
			if h, err := audit.Hash(&r); err != nil || h != r.Hash {
				t.Errorf("record %d hashes to %s (%v), stored %s", r.Seq, h, err, r.Hash)
			}
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Audit []json.RawMessage `json:"audit"`
			Trace []json.RawMessage `json:"trace"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.Audit) != len(stored) || len(doc.Trace) != len(out.Trace) {
			t.Fatalf("JSON form %s (%v): want %d records as audit", b, err, len(stored))
		}
		for i := range stored {
			want, _ := json.Marshal(&stored[i])
			if string(doc.Audit[i]) != string(want) {
				t.Errorf("audit[%d] %s, want %s", i, doc.Audit[i], want)
			}
		}
	}
	modify := policyConfig(t,
		Binding{Name: "o", Point: outbound, Phase: Observer},
		Binding{Name: "t", Point: outbound, Phase: Transformer, Settings: decide(`{"action":"modify","context":{"outgoing":"[redacted]"},"reason":"secret"}`)},
		Binding{Name: "broken", Module: "scripted", Point: outbound, Phase: Guard, Fail: FailOpen, Settings: script("U")},
		Binding{Name: "g", Point: outbound, Phase: Guard},
	)
	for _, values := range []bool{false, true} {
		t.Run(fmt.Sprintf("modify and fail, values %t", values), func(t *testing.T) {
			e := newEnv(t, modify, func(o *Options) { o.AuditValues = values })
			out := e.run(t, outbound, map[string]any{"outgoing": "key=sk-live-123"})
			if len(out.Trace) != 4 || out.Trace[2].Failure == nil {
				t.Fatalf("trace %+v", out.Trace)
			}
			check(t, e, out, e.sink.Records())
		})
	}
	t.Run("ask, then resume", func(t *testing.T) {
		e := newEnv(t, approvalConfig(t, ""))
		out := e.run(t, toolBefore, shellCall("rm -rf /tmp/x"))
		check(t, e, out, e.sink.Records())
		n := len(e.sink.Records())
		res, err := e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Edit, Actor: "carol",
			Edit: map[string]any{"arguments": map[string]any{"command": "ls"}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Records()[0].Resolution != "edited" {
			t.Fatalf("first record %+v, want the resolution", res.Records()[0])
		}
		check(t, e, res, e.sink.Records()[n:])
	})
}
