package chain

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestBreaker walks a breaker through closed -> open -> half-open (trial
// fails) -> open with a doubled backoff -> half-open (trial succeeds) ->
// closed, and checks that a skipped binding is not run and that another
// tenant is not affected.
func TestBreaker(t *testing.T) {
	// The hook fails (an invalid decision word) when the context says
	// "boom", and continues otherwise.
	cfg := policyConfig(t, Binding{Name: "flaky", Point: outbound, Phase: Guard, Fail: FailOpen,
		Settings: when("boom", `{"action":"explode"}`)})
	cfg.Breaker = BreakerConfig{Failures: 3, Backoff: 10 * time.Second, MaxBackoff: 15 * time.Second}
	invocations := 0
	e := newEnv(t, cfg, withInvoke(t, func(ctx context.Context, m *runtime.Module, req runtime.Request) (*runtime.Result, error) {
		invocations++
		return testRuntime(t).Invoke(ctx, m, req)
	}))
	boom := map[string]any{"outgoing": "boom"}
	calm := map[string]any{"outgoing": "calm"}
	type want struct {
		code       abi.FailureCode // "" for none
		breaker    string
		breakerNow string
		ran        bool
	}
	steps := []struct {
		name    string
		advance time.Duration
		tenant  string
		ctx     map[string]any
		want    want
	}{
		{"failure 1", 0, "acme", boom, want{abi.FailInvalidOutput, "", "", true}},
		{"failure 2", 0, "acme", boom, want{abi.FailInvalidOutput, "", "", true}},
		{"failure 3 opens", 0, "acme", boom, want{abi.FailInvalidOutput, "", BreakerOpen, true}},
		{"open: skipped", 0, "acme", calm, want{abi.FailCircuitOpen, BreakerOpen, "", false}},
		{"other tenant unaffected", 0, "globex", calm, want{"", "", "", true}},
		{"still open", 9 * time.Second, "acme", calm, want{abi.FailCircuitOpen, BreakerOpen, "", false}},
		{"half-open trial fails", time.Second, "acme", boom, want{abi.FailInvalidOutput, BreakerHalfOpen, BreakerOpen, true}},
		{"open for a doubled backoff, capped at 15s", 14 * time.Second, "acme", calm, want{abi.FailCircuitOpen, BreakerOpen, "", false}},
		{"half-open trial succeeds", time.Second, "acme", calm, want{"", BreakerHalfOpen, BreakerClosed, true}},
		{"closed again", 0, "acme", boom, want{abi.FailInvalidOutput, "", "", true}},
		{"failures counted afresh", 0, "acme", calm, want{"", "", "", true}},
		// The success above reset the count (a healthy breaker answers
		// without its lock; one with a failure counted takes it).
		{"failure 1 after the reset", 0, "acme", boom, want{abi.FailInvalidOutput, "", "", true}},
		{"failure 2 after the reset: still closed", 0, "acme", boom, want{abi.FailInvalidOutput, "", "", true}},
		{"failure 3 after the reset opens", 0, "acme", boom, want{abi.FailInvalidOutput, "", BreakerOpen, true}},
	}
	for _, s := range steps {
		e.clock.Advance(s.advance)
		before := invocations
		out, err := e.c.Run(context.Background(), Input{Tenant: s.tenant, Point: outbound, Context: s.ctx})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		st := out.Trace[0]
		var code abi.FailureCode
		if st.Failure != nil {
			code = st.Failure.Code
		}
		got := want{code, st.Breaker, st.BreakerNow, invocations > before}
		if got != s.want {
			t.Errorf("%s: got %+v, want %+v", s.name, got, s.want)
		}
		// Fail open: the breaker never turns into a block.
		if out.Verdict != Allow {
			t.Errorf("%s: verdict %s", s.name, out.Verdict)
		}
	}
}

func TestBreakerFailClosedBlocksWhileOpen(t *testing.T) {
	cfg := policyConfig(t, Binding{Name: "g", Module: "scripted", Point: outbound, Phase: Guard, Settings: script("U")})
	cfg.Breaker = BreakerConfig{Failures: 1}
	e := newEnv(t, cfg)
	e.run(t, outbound, nil)
	out := e.run(t, outbound, nil)
	if out.Verdict != Block || out.By != ByFailPolicy || out.Failure.Code != abi.FailCircuitOpen {
		t.Errorf("outcome %+v", out)
	}
}

func TestBreakerDisabled(t *testing.T) {
	cfg := policyConfig(t, Binding{Name: "g", Module: "scripted", Point: outbound, Phase: Guard, Fail: FailOpen, Settings: script("U")})
	cfg.Breaker = BreakerConfig{Failures: -1}
	e := newEnv(t, cfg)
	for i := 0; i < 10; i++ {
		if out := e.run(t, outbound, nil); out.Trace[0].Failure.Code != abi.FailTrap {
			t.Fatalf("run %d: %+v", i, out.Trace[0].Failure)
		}
	}
}

func TestBreakerSurvivesAReloadThatKeepsTheBinding(t *testing.T) {
	b := Binding{Name: "g", Module: "scripted", Point: outbound, Phase: Guard, Fail: FailOpen, Settings: script("U")}
	cfg := policyConfig(t, b)
	cfg.Breaker = BreakerConfig{Failures: 2}
	e := newEnv(t, cfg)
	e.run(t, outbound, nil)
	e.run(t, outbound, nil)
	// Same binding, another unrelated binding added: the breaker stays open.
	cfg2 := policyConfig(t, b, Binding{Name: "other", Point: outbound, Phase: Observer})
	cfg2.Breaker = cfg.Breaker
	if err := e.c.Reload(context.Background(), cfg2); err != nil {
		t.Fatal(err)
	}
	if out := e.run(t, outbound, nil); out.Trace[1].Failure.Code != abi.FailCircuitOpen {
		t.Errorf("after reload: %+v", out.Trace[1])
	}
	// Another module under the same name is a new binding: a new breaker.
	b.Module = "policy"
	cfg3 := policyConfig(t, b)
	if err := e.c.Reload(context.Background(), cfg3); err != nil {
		t.Fatal(err)
	}
	if out := e.run(t, outbound, nil); out.Trace[0].Failure != nil {
		t.Errorf("after the module changed: %+v", out.Trace[0])
	}
}

// TestBreakerOfRemembersOnlyWhatStands: a binding's remembered breaker is
// the map's for its tenant, another tenant's lookup gets its own, and one
// dropped from the map (a reload without the binding, or the idle prune) is
// not handed out again.
func TestBreakerOfRemembersOnlyWhatStands(t *testing.T) {
	var bs breakers
	b := &bound{key: "g@d"}
	a1 := bs.of(b, "a")
	if a1 != bs.get("g@d", "a") || bs.of(b, "a") != a1 {
		t.Fatal("tenant a's breaker is not the map's")
	}
	if other := bs.of(b, "b"); other == a1 || other != bs.get("g@d", "b") {
		t.Fatal("tenant b got tenant a's breaker")
	}
	if bs.of(b, "a") != a1 || b.lastBreaker.Load().tenant != "a" {
		t.Fatal("tenant a's breaker changed while it stood, or another tenant's lookup replaced it")
	}
	bs.keep(map[string]bool{}) // the binding is gone: its breakers too
	a2 := bs.of(b, "a")
	if a2 == a1 || a2 != bs.get("g@d", "a") {
		t.Fatal("a dropped breaker was handed out again")
	}
	for i := range maxIdleBreakers { // fill the map: the next new key prunes the idle ones, a2 with them
		bs.get("other", strconv.Itoa(i))
	}
	bs.get("g@d", "new")
	if a3 := bs.of(b, "a"); a3 == a2 || a3 != bs.get("g@d", "a") {
		t.Fatal("a pruned breaker was handed out again")
	}
}
