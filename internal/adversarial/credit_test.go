package adversarial

import (
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threat: spending credit that is not there. Defence: the CreditGate reserves
// before Execute; with a zero balance the backend is never called.
func TestCreditZeroBalance(t *testing.T) {
	w := newWorld(t)
	res, err := w.run(t, "broke", runtime.Limits{}, opHostCall("llm.run", llmPayload("hi", 1), 4096))
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(t, res)[0]; got.status != abi.StatusInsufficientCredit {
		t.Fatalf("status %v, want INSUFFICIENT_CREDIT", got.status)
	}
	if w.llm.calls.Load() != 0 {
		t.Error("the backend was called with a zero balance")
	}
	if reserved, _, _ := w.ledger.counts(); reserved != 0 || res.CreditCharged != 0 {
		t.Errorf("%d reservations, %d charged", reserved, res.CreditCharged)
	}
}

// concurrently makes n invocations at once (invoke(i) makes the i-th) and
// counts the statuses of their host calls; an invocation that fails is an
// error of t.
func concurrently(t *testing.T, n int, invoke func(i int) (*runtime.Result, error)) map[abi.Status]int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[abi.Status]int{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := invoke(i)
			if err != nil {
				t.Error(err)
				return
			}
			cs := calls(t, res)
			mu.Lock()
			for _, c := range cs {
				counts[c.status]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return counts
}

// Threat: racing the gate: a balance that covers exactly one call and 100
// concurrent invocations that each make it (check-then-charge would let all
// of them through). Defence: an atomic reservation; exactly one call runs.
func TestCreditOneCallHundredInvocations(t *testing.T) {
	w := newWorld(t)
	payload := llmPayload("hi", 1)
	w.fund(t, "acme", llmCost("hi", 1))
	counts := concurrently(t, 100, func(int) (*runtime.Result, error) {
		return w.run(t, "acme", runtime.Limits{Timeout: 10 * time.Second}, opHostCall("llm.run", payload, 4096))
	})
	if counts[abi.StatusOK] != 1 || counts[abi.StatusInsufficientCredit] != 99 {
		t.Fatalf("statuses %v, want 1 OK and 99 INSUFFICIENT_CREDIT", counts)
	}
	if n := w.llm.calls.Load(); n != 1 {
		t.Errorf("the backend ran %d times, want once", n)
	}
	if got, want := w.ledger.available(t, "acme"), llmCost("hi", 1)-3; got != want {
		t.Errorf("available %d, want %d", got, want)
	}
}

// Threat: a backend that reports more use than was reserved (a tokenizer
// that counts more than the estimate, a provider that ignores max_tokens).
// Defence, the settlement policy of RATIONALE.md#why-is-an-overage-not-charged:
// the reserved amount is charged and no more, the rest is recorded as
// uncharged, and the balance never goes negative.
func TestCreditOverage(t *testing.T) {
	w := newWorld(t)
	reserved := llmCost("OVERAGE", 1)
	w.fund(t, "acme", reserved) // every last unit: an overage charged in full would go negative
	res, err := w.run(t, "acme", runtime.Limits{}, opHostCall("llm.run", llmPayload("OVERAGE", 1), 4096))
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(t, res)[0]; got.status != abi.StatusOK {
		t.Fatalf("status %v", got.status)
	}
	if res.CreditCharged != reserved || w.ledger.available(t, "acme") != 0 {
		t.Errorf("charged %d, available %d; want the reservation (%d) and 0", res.CreditCharged, w.ledger.available(t, "acme"), reserved)
	}
	recs := w.usage.Records()
	if len(recs) != 1 || recs[0].Consumed != 300_000 || recs[0].Charged != reserved || recs[0].Uncharged != 300_000-reserved {
		t.Errorf("usage records %+v, want consumed 300000, charged %d, the rest uncharged", recs, reserved)
	}
	// The next call is refused, not run on credit the tenant does not have.
	res, err = w.run(t, "acme", runtime.Limits{}, opHostCall("llm.run", llmPayload("hi", 1), 4096))
	if err != nil || calls(t, res)[0].status != abi.StatusInsufficientCredit {
		t.Fatalf("a call with nothing left: %v %+v", err, res)
	}
}

// Threat: a hook that drains its tenant by looping cheap billable calls
// (denial of wallet). Defence: the per-invocation host-call quota
// (MaxHostCalls) and the runner's per-invocation spend cap
// (MaxCreditPerInvocation); the next invocation starts a new budget.
func TestCreditFloodOfCheapCalls(t *testing.T) {
	flood := ""
	for i := 0; i < 100; i++ {
		flood += opHostCall("cheap", `{}`, 64)
	}
	count := func(t *testing.T, res *runtime.Result) map[abi.Status]int {
		t.Helper()
		m := map[abi.Status]int{}
		for _, c := range calls(t, res) {
			m[c.status]++
		}
		return m
	}
	t.Run("host-call quota", func(t *testing.T) {
		w := acmeWorld(t, 1000)
		res, err := w.run(t, "acme", runtime.Limits{MaxHostCalls: 10}, flood)
		if err != nil {
			t.Fatal(err)
		}
		if got := count(t, res); got[abi.StatusOK] != 10 || got[abi.StatusQuotaExceeded] != 90 {
			t.Errorf("statuses %v, want 10 OK and 90 QUOTA_EXCEEDED", got)
		}
		if w.cheap.Load() != 10 || res.CreditCharged != 10 || res.HostCalls != 10 {
			t.Errorf("executed %d, charged %d, host calls %d; want 10 each", w.cheap.Load(), res.CreditCharged, res.HostCalls)
		}
	})
	t.Run("spend cap", func(t *testing.T) {
		w := newWorld(t, func(o *options) { o.runner.MaxCreditPerInvocation = 25 })
		w.fund(t, "acme", 1000)
		for i := 0; i < 2; i++ { // the second invocation has a budget of its own
			res, err := w.run(t, "acme", runtime.Limits{MaxHostCalls: 100}, flood)
			if err != nil {
				t.Fatal(err)
			}
			if got := count(t, res); got[abi.StatusOK] != 25 || got[abi.StatusQuotaExceeded] != 75 {
				t.Errorf("invocation %d: statuses %v, want 25 OK and 75 QUOTA_EXCEEDED", i, got)
			}
			if res.CreditCharged != 25 {
				t.Errorf("invocation %d: charged %d, want the cap of 25", i, res.CreditCharged)
			}
		}
		if w.cheap.Load() != 50 || w.ledger.available(t, "acme") != 950 {
			t.Errorf("executed %d, available %d; want 50 and 950", w.cheap.Load(), w.ledger.available(t, "acme"))
		}
	})
}

// Threat: a capability still running when the invocation's deadline passes,
// which could leave its reservation pending, or be both settled and released.
// Defence: the runner resolves every hold exactly once, with a context the
// deadline does not cancel; a late decision is refused (timeout).
func TestCreditCapabilityOutlivesTheDeadline(t *testing.T) {
	const timeout = 250 * time.Millisecond
	tests := []struct {
		prompt            string
		settled, released int
		charged           int64
	}{
		// The provider honours the deadline: nothing was delivered, released.
		{prompt: "LATE-HONOUR", released: 1},
		// The provider ignores it and succeeds late: the work was done and is
		// settled, once; the hook's late decision is refused.
		{prompt: "LATE-IGNORE", settled: 1, charged: 3},
		// The provider ignores it and then fails: released.
		{prompt: "LATE-FAIL", released: 1},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			w := newWorld(t, func(o *options) { o.lateBy = 3 * timeout })
			w.fund(t, "acme", 1000)
			res, err := w.run(t, "acme", runtime.Limits{Timeout: timeout}, opHostCall("llm.run", llmPayload(tt.prompt, 1), 4096))
			wantFailure(t, res, err, abi.FailTimeout)
			reserved, settled, released := w.ledger.counts()
			if reserved != 1 || settled != tt.settled || released != tt.released {
				t.Errorf("reserved %d, settled %d, released %d; want 1, %d, %d", reserved, settled, released, tt.settled, tt.released)
			}
			if res.CreditCharged != tt.charged || w.ledger.available(t, "acme") != 1000-tt.charged {
				t.Errorf("report says %d charged, ledger has %d; want %d", res.CreditCharged, 1000-w.ledger.available(t, "acme"), tt.charged)
			}
		})
	}
}

// The ledger itself, hammered from many goroutines with every kind of
// resolution, never goes negative and resolves every reservation once (the
// invariants of capability.Ledger, checked through the counting wrapper).
func TestCreditLedgerUnderConcurrency(t *testing.T) {
	w := acmeWorld(t, 500)
	prompts := []string{"hi", "OVERAGE", "FAIL", "PANIC", "hi"}
	statuses := concurrently(t, 50, func(i int) (*runtime.Result, error) {
		p := prompts[i%len(prompts)]
		return w.run(t, "acme", runtime.Limits{Timeout: 10 * time.Second}, opHostCall("llm.run", llmPayload(p, 1), 4096)+opHostCall("cheap", `{}`, 64))
	})
	for s := range statuses {
		switch s {
		case abi.StatusOK, abi.StatusInsufficientCredit, abi.StatusCapabilityFailed:
		default:
			t.Errorf("status %v", s)
		}
	}
	// The invariants are checked when the test ends.
}
