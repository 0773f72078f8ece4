package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// scriptClock reads unarmed until it is armed, then script(n) at its n-th
// read (from 1): a clock that moves at a chosen point of a resolution.
type scriptClock struct {
	mu      sync.Mutex
	unarmed time.Time
	script  func(read int) time.Time
	armed   bool
	reads   int
}

func (c *scriptClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return c.unarmed
	}
	c.reads++
	return c.script(c.reads)
}

func (c *scriptClock) arm() {
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
}

// takeStore arms its clock when an approval is taken.
type takeStore struct {
	*MemoryApprovals
	clock *scriptClock
}

func (s takeStore) Take(ctx context.Context, id string) (*Approval, error) {
	a, err := s.MemoryApprovals.Take(ctx, id)
	s.clock.arm()
	return a, err
}

// TestResolveDecidesOnce: the decision an approval is resumed with is the one
// it was admitted with. A human's deny of a stale approval (its binding now
// runs another module) whose expiry policy approves was admitted as a deny,
// then resumed as "expired, approved" when the clock crossed its expiry in
// between: a stale approval resolved by approve, and a human's deny turned
// into an approval.
func TestResolveDecidesOnce(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	// Once the approval is taken: before its expiry once (the last
	// check), past it ever after.
	clk := &scriptClock{unarmed: t0, script: func(read int) time.Time {
		if read == 1 {
			return t0
		}
		return t0.Add(time.Hour)
	}}
	store := takeStore{NewMemoryApprovals(), clk}
	e := newEnv(t, approvalConfig(t, ExpireApprove), func(o *Options) { o.Approvals = store; o.Now = clk.Now })
	ap := e.run(t, toolBefore, shellCall("ls")).Approval
	if ap == nil {
		t.Fatal("no approval")
	}
	cfg := approvalConfig(t, ExpireApprove)
	cfg.Modules["policy2"] = withCustomSection(cfg.Modules["policy"])
	cfg.Bindings[1].Module = "policy2"
	if err := e.c.Reload(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	out, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Deny, Actor: "bob", Reason: "no"})
	var ae *ApprovalError
	switch {
	case errors.As(err, &ae):
		// Refused as it stood when it was checked: acceptable, nothing ran.
	case err != nil:
		t.Fatal(err)
	case out.Verdict != Block:
		t.Fatalf("a deny admitted for a stale approval resumed as %s (%s); want block", out.Verdict, out.Trace[len(out.Trace)-1].Resolution)
	}
}

// manifestFilledWith returns a manifest whose settings_schema holds, in
// container (an object member of the schema), as many members made by
// member(i) as fit a manifest of abi.MaxManifestBytes.
func manifestFilledWith(t *testing.T, container string, member func(i int) string) *abi.Manifest {
	t.Helper()
	var b strings.Builder
	head := `{"name":"evil","settings_schema":{"type":"object","` + container + `":{`
	b.WriteString(head)
	for i := 0; ; i++ {
		m := member(i)
		if b.Len()+len(m)+8 > abi.MaxManifestBytes {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m)
	}
	b.WriteString(`}}}`)
	man, err := abi.DecodeManifest([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return man
}

// Threat: a settings_schema whose regular expressions cost the host far more
// than their size: 3,300 patternProperties keys `\pL{1000}N` in a 64 KiB
// manifest took 1.5 s and held 150 MiB of compiled programs (793 MiB
// allocated) at every New, Reload and `wasmhooks run`, for each such module
// of a configuration at once. Defence: CheckSettingsSchema bounds the
// instructions of the schema's patterns, estimated from their syntax before
// anything is compiled (MaxSettingsSchemaRegexpInsts).
func TestSettingsSchemaRegexpCost(t *testing.T) {
	refused := []struct {
		name string
		man  *abi.Manifest
	}{
		{"patternProperties", manifestFilledWith(t, "patternProperties", func(i int) string { return fmt.Sprintf(`"\\pL{1000}%d":{}`, i) })},
		{"pattern", manifestFilledWith(t, "properties", func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"\\pL{1000}"}`, i) })},
		{"nested repeat", manifestFilledWith(t, "properties", func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"(?:(?:[^a]{10}){10}){10}"}`, i) })},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := CheckSettingsSchema(tt.man)
			var se *SettingsSchemaError
			if !errors.As(err, &se) || !strings.Contains(se.Reason, "regular expressions") {
				t.Fatalf("CheckSettingsSchema = %v, want a *SettingsSchemaError for its regular expressions", err)
			}
			if el := time.Since(start); el > 5*time.Second { // coarse: refused in milliseconds
				t.Errorf("refusing took %v", el)
			}
		})
	}
	accepted := []string{
		`{"properties":{"id":{"type":"string","pattern":"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
			"name":{"type":"string","pattern":"^[A-Za-z0-9._-]{1,64}$"},"text":{"type":"string","pattern":"^.{0,1000}$"}},
			"patternProperties":{"^x-[a-z]+$":{"type":"string"}}}`,
		`{"properties":{"pattern":{"type":"string"},"patternProperties":{"type":"object"}}}`,
	}
	for i, s := range accepted {
		m, err := abi.DecodeManifest([]byte(`{"name":"ok","settings_schema":` + s + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckSettingsSchema(m); err != nil {
			t.Errorf("schema %d: %v", i, err)
		}
	}
}

// Threat: numbers the validator turns into exact rationals (math/big.Rat)
// at a cost that grows with their exponent: `"multipleOf":1e-9999999` (which
// strict JSON takes: it underflows to 0, it does not overflow) made the
// validator dereference a nil *big.Rat, a panic in CheckSettingsSchema, so in
// New, Reload, `validate` and `run`; each `1e-999999` cost some 80 ms, so a
// schema of them took minutes; the same numbers in settings panicked or
// slowed ValidateSettings. Defence: a number in a settings schema, or in
// settings checked against one, has a small decimal exponent (as written, within ±MaxSettingsNumberExponent); and a panic of the validator is a refusal, not a crash.
func TestSettingsSchemaNumbers(t *testing.T) {
	many := make([]string, 30)
	for i := range many {
		many[i] = fmt.Sprintf(`"a%d":{"multipleOf":1e-999999}`, i)
	}
	refused := []struct{ name, schema string }{
		{"panicking multipleOf", `{"properties":{"a":{"multipleOf":1e-9999999}}}`},
		{"costly multipleOf", `{"properties":{` + strings.Join(many, ",") + `}}`},
		{"costly enum", `{"properties":{"a":{"enum":[` + strings.Repeat("1e-999999,", 30) + `0]}}}`},
		{"past the bound", `{"properties":{"a":{"minimum":1E-401}}}`},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			m, err := abi.DecodeManifest([]byte(`{"name":"evil","settings_schema":` + tt.schema + `}`))
			if err != nil {
				t.Fatal(err)
			}
			var se *SettingsSchemaError
			err = func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				return CheckSettingsSchema(m)
			}()
			if !errors.As(err, &se) || !strings.Contains(se.Reason, "number") {
				t.Fatalf("CheckSettingsSchema = %v, want a *SettingsSchemaError for a number", err)
			}
		})
	}
	m, err := abi.DecodeManifest([]byte(`{"name":"ok","settings_schema":{"properties":{"a":{"minimum":0},"b":{"multipleOf":0.01}},
		"additionalProperties":{"type":"number","maximum":1e308,"exclusiveMinimum":-1e-300}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSettingsSchema(m); err != nil {
		t.Fatalf("an ordinary schema: %v", err)
	}
	for _, tt := range []struct {
		settings string
		ok       bool
	}{
		{`{"a":1e-9999999}`, false},
		{`{"a":[` + strings.Repeat("1e-999999,", 30) + `1]}`, false},
		{`{"a":9007199254740991,"b":0.5,"c":1e-400,"d":-0.00001e-395}`, true},
	} {
		v, err := abi.ParseJSON([]byte(tt.settings), abi.JSONLimits{})
		if err != nil {
			t.Fatal(err)
		}
		err = func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			return ValidateSettings(m, v.(map[string]any))
		}()
		switch {
		case tt.ok && err != nil:
			t.Errorf("settings %.40s: %v", tt.settings, err)
		case !tt.ok && (err == nil || strings.Contains(err.Error(), "panic") || !strings.Contains(err.Error(), "number")):
			t.Errorf("settings %.40s: got %v, want a refusal naming the number", tt.settings, err)
		}
	}
}

// checkpointFailingSink stores every record, then reports that its
// checkpoint could not be written, as a FileSink whose checkpoint volume
// fails does.
type checkpointFailingSink struct{ *audit.MemorySink }

func (s checkpointFailingSink) Append(ctx context.Context, r *audit.Record) error {
	if err := s.MemorySink.Append(ctx, r); err != nil {
		return err
	}
	return &audit.CheckpointError{Seq: r.Seq, Err: errors.New("disk full")}
}

// TestCheckpointFailureIsNotALostRecord: a record stored whose checkpoint
// failed is a stored record. The chain took Append's error for a record
// not stored: a run stopped without its verdict though the log had it, and
// a resolution went back to pending though the log said it was resolved,
// so it could be resolved again (two resolutions of one approval).
func TestCheckpointFailureIsNotALostRecord(t *testing.T) {
	sink := checkpointFailingSink{audit.NewMemorySink()}
	e := newEnv(t, approvalConfig(t, ""), func(o *Options) { o.Audit = sink })
	out, err := e.c.Run(context.Background(), Input{Tenant: "acme", Point: toolBefore, Context: shellCall("ls")})
	if err != nil || out.Verdict != Pending {
		t.Fatalf("Run = %v, %v; want pending", out, err)
	}
	out, err = e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Approve})
	if err != nil || out.Verdict != Allow {
		t.Fatalf("Resolve = %v, %v; want allow", out, err)
	}
	if e.store.Len() != 0 {
		t.Fatal("the resolved approval is pending again")
	}
	var resolutions int
	for _, r := range sink.Records() {
		if r.Resolution != "" {
			resolutions++
		}
	}
	if resolutions != 1 {
		t.Fatalf("%d resolutions in the log, want 1", resolutions)
	}
}

// TestExpirePendingOnlyResolvesExpired: ExpirePending resolves an approval
// only by its expiry policy. An approval it listed as due but found
// unexpired when it took it (the clock stepped back) was resumed with the
// empty decision of ExpirePending's Resolution, which resume applied as an
// approval: a deny-on-expiry approval approved with no human.
func TestExpirePendingOnlyResolvesExpired(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	// Past the expiry once (ExpirePending's listing), then before it:
	// the wall clock stepped back (NTP).
	clk := &scriptClock{unarmed: t0, script: func(read int) time.Time {
		if read == 1 {
			return t0.Add(time.Hour)
		}
		return t0
	}}
	e := newEnv(t, approvalConfig(t, ExpireDeny), func(o *Options) { o.Now = clk.Now })
	ap := e.run(t, toolBefore, shellCall("ls")).Approval
	clk.arm()
	outs, err := e.c.ExpirePending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range outs {
		if out.Verdict != Block {
			t.Fatalf("ExpirePending resolved an unexpired deny-on-expiry approval as %s", out.Verdict)
		}
	}
	if len(outs) == 0 && e.store.Len() != 1 {
		t.Fatalf("approval %s neither resolved nor pending", ap.ID)
	}
}

// TestOversizedTrafficDoesNotOpenAGuardsBreaker: traffic larger than a
// guard's input limit is refused by the runtime before the guard runs: that
// is no failure of the guard's, so it must not count toward its breaker.
// Any sender could otherwise open the breaker of a tenant's guard with five
// oversized messages: a fail-open guard then let everything through unseen
// (a bypass), a fail-closed one blocked clean traffic. The oversized message
// itself still meets the guard's fail policy.
func TestOversizedTrafficDoesNotOpenAGuardsBreaker(t *testing.T) {
	big := strings.Repeat("x", 2000)
	for _, policy := range []FailPolicy{FailOpen, FailClosed} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t, policyConfig(t,
				Binding{Name: "guard", Point: "message.outbound", Phase: Guard, Fail: policy, Limits: runtime.Limits{MaxInputBytes: 1024},
					Settings: when("SECRET", `{"action":"block","reason":"secret"}`)}))
			for i := 0; i < 8; i++ {
				out := e.run(t, "message.outbound", map[string]any{"outgoing": big})
				if f := out.Trace[0].Failure; f == nil || f.Code == abi.FailCircuitOpen {
					t.Fatalf("oversized message %d: guard step %+v, want its input refused, the guard not skipped", i, out.Trace[0])
				}
				if want := map[FailPolicy]Verdict{FailOpen: Allow, FailClosed: Block}[policy]; out.Verdict != want {
					t.Fatalf("oversized message %d: %s, want %s by the fail policy", i, out.Verdict, want)
				}
			}
			out := e.run(t, "message.outbound", map[string]any{"outgoing": "the SECRET"})
			if out.Verdict != Block || out.By != ByHook {
				t.Fatalf("after oversized traffic the guard no longer guards: %s by %s/%s (%+v)", out.Verdict, out.Binding, out.By, out.Failure)
			}
			if out := e.run(t, "message.outbound", map[string]any{"outgoing": "hello"}); out.Verdict != Allow {
				t.Fatalf("clean traffic after oversized traffic: %s by %s/%s", out.Verdict, out.Binding, out.By)
			}
		})
	}
}
