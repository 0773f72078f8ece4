package adversarial

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threat: a hook that never returns pins a goroutine and a CPU.
// Defences: fuel (deterministic, issue 4) and, as a backstop, the wall-clock
// deadline, checked at every fuel slice; either way the instance is
// discarded. Each defence is tested with the other out of reach.
func TestCPUInfiniteLoop(t *testing.T) {
	w := newWorld(t)
	t.Run("fuel", func(t *testing.T) {
		w.exhaustsFuel(t, 10*time.Second, "an infinite loop with 500k fuel", runtime.Limits{Timeout: time.Minute, Fuel: 500_000}, opLoop)
	})
	t.Run("deadline", func(t *testing.T) {
		const timeout = 150 * time.Millisecond
		within(t, timeout+time.Second, "an infinite loop with unlimited fuel", func() {
			res, _ := w.faultOnWarmInstance(t, "acme", runtime.Limits{Timeout: timeout, Fuel: runtime.MaxFuel}, opLoop, abi.FailTimeout)
			if res.Duration < timeout {
				t.Errorf("timed out after %v, before the limit of %v", res.Duration, timeout)
			}
		})
	})
}

// exhaustsFuel runs script for acme on a warm instance twice, each within
// d: each must fail fuel_exhausted having used the whole of lim.Fuel, and
// both with the same message (fuel is deterministic).
func (w *world) exhaustsFuel(t *testing.T, d time.Duration, what string, lim runtime.Limits, script string) {
	t.Helper()
	var msgs []string
	for range 2 {
		within(t, d, what, func() {
			res, f := w.faultOnWarmInstance(t, "acme", lim, script, abi.FailFuelExhausted)
			if res.FuelUsed != lim.Fuel {
				t.Errorf("fuel used %d, want the whole budget", res.FuelUsed)
			}
			msgs = append(msgs, f.Message)
		})
	}
	if msgs[0] != msgs[1] {
		t.Errorf("not deterministic: %q then %q", msgs[0], msgs[1])
	}
}

// Threat: a hook whose initialisation never returns: _initialize (run by the
// runtime) or the start section. Defences: InitFuel and InitTimeout bound
// both; no half-initialised instance is ever pooled, so every invocation
// fails the same way and nothing accumulates.
func TestCPUInfiniteLoopDuringInitialisation(t *testing.T) {
	for _, file := range []string{"init-loop.wat", "start-loop.wat"} {
		for _, tt := range []struct {
			name string
			lim  runtime.Limits
			want abi.FailureCode
		}{
			{"fuel", runtime.Limits{InitTimeout: time.Minute, InitFuel: 500_000}, abi.FailFuelExhausted},
			{"deadline", runtime.Limits{InitTimeout: 150 * time.Millisecond, InitFuel: runtime.MaxFuel}, abi.FailTimeout},
		} {
			t.Run(file+"/"+tt.name, func(t *testing.T) {
				w := newWorld(t)
				m := w.load(t, corpus(t, file))
				for i := 0; i < 2; i++ {
					var res *runtime.Result
					var err error
					within(t, 10*time.Second, "an endless initialisation", func() {
						res, err = w.invoke(t, m, runtime.Request{Tenant: "acme", Limits: tt.lim})
					})
					f := wantFailure(t, res, err, tt.want)
					if !strings.Contains(f.Message, "initialisation") {
						t.Errorf("message %q does not say it happened during initialisation", f.Message)
					}
					if s := w.rt.Stats(); s.Instances != 0 {
						t.Errorf("after a failed initialisation: %+v", s)
					}
				}
			})
		}
	}
}

// Threat: a hook that burns almost all its budget and then makes a billable
// call, hoping the call is lost, voided or charged twice when the budget runs
// out. Defence: credit and CPU are independent: the call runs, settles
// exactly once, and a failure afterwards does not undo the charge.
func TestCPUBurnThenBillableCall(t *testing.T) {
	payload := llmPayload("hi", 1)

	t.Run("deadline after the call", func(t *testing.T) {
		w := acmeWorld(t, 1000)
		res, err := w.run(t, "acme", runtime.Limits{Timeout: 300 * time.Millisecond, Fuel: runtime.MaxFuel},
			opHostCall("llm.run", payload, 4096)+opLoop)
		wantFailure(t, res, err, abi.FailTimeout)
		if n := w.llm.calls.Load(); n != 1 {
			t.Errorf("the provider ran %d times, want 1", n)
		}
		if reserved, settled, released := w.ledger.counts(); reserved != 1 || settled != 1 || released != 0 {
			t.Errorf("reserved %d, settled %d, released %d; want 1, 1, 0", reserved, settled, released)
		}
		if res.CreditCharged != 3 || w.ledger.available(t, "acme") != 997 {
			t.Errorf("charged %d, available %d; want 3 and 997", res.CreditCharged, w.ledger.available(t, "acme"))
		}
	})

	t.Run("fuel", func(t *testing.T) {
		w := acmeWorld(t, 1_000_000)
		const fuel = 500_000
		lim := runtime.Limits{Timeout: 10 * time.Second, Fuel: fuel}
		call := opHostCall("llm.run", payload, 0) // the body is parked, so the guest's work is the same for any status
		// The largest burn after which the call and the rest of the script
		// still fit, found with a tenant without credit (the provider is
		// never called, and the guest does the same work).
		fits := func(n uint32) bool {
			res, err := w.run(t, "broke", lim, opBusy(n)+call)
			if err == nil {
				return true
			}
			wantFailure(t, res, err, abi.FailFuelExhausted)
			return false
		}
		lo, hi := uint32(0), uint32(fuel)
		if !fits(lo) || fits(hi) {
			t.Fatalf("fuel %d: a burn of 0 must fit and a burn of %d must not", fuel, hi)
		}
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if fits(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		// Deterministic: the boundary is the same every time.
		if !fits(lo) || fits(lo+1) {
			t.Fatalf("the fuel boundary moved: %d fits no more", lo)
		}
		if w.llm.calls.Load() != 0 {
			t.Fatal("calibration reached the provider")
		}

		// At the boundary: the call runs and is charged exactly once.
		res, err := w.run(t, "acme", lim, opBusy(lo)+call)
		if err != nil {
			t.Fatalf("burning %d then calling: %v", lo, err)
		}
		if res.FuelUsed < fuel*99/100 {
			t.Errorf("used %d of %d fuel: not almost all", res.FuelUsed, fuel)
		}
		if res.CreditCharged != 3 || w.llm.calls.Load() != 1 {
			t.Errorf("charged %d with %d provider calls; want 3 and 1", res.CreditCharged, w.llm.calls.Load())
		}

		// Then the budget runs out: the completed charge stands, once.
		res, err = w.run(t, "acme", lim, opBusy(lo)+call+opBusy(0xFFFFFFFF))
		wantFailure(t, res, err, abi.FailFuelExhausted)
		if res.CreditCharged != 3 || w.llm.calls.Load() != 2 {
			t.Errorf("charged %d with %d provider calls in all; want 3 and 2", res.CreditCharged, w.llm.calls.Load())
		}
		if reserved, settled, released := w.ledger.counts(); reserved != 2 || settled != 2 || released != 0 {
			t.Errorf("reserved %d, settled %d, released %d; want 2, 2, 0", reserved, settled, released)
		}
		if got := w.ledger.available(t, "acme"); got != 1_000_000-6 {
			t.Errorf("available %d, want %d", got, 1_000_000-6)
		}
	})
}

// Threat: a loop-free exponential call tree (t0 calls t1 twice ... t40):
// wazero checks the deadline only at loop back-edges, so the wall clock alone
// never stops it. Defence: fuel charged at function entry (issue 4).
func TestCPULoopFreeCallTree(t *testing.T) {
	w := newWorld(t)
	lim := runtime.Limits{Timeout: 30 * time.Second, Fuel: 1_000_000}
	w.exhaustsFuel(t, 5*time.Second, "a loop-free call tree", lim, opTree(0))
	// A small tree within the budget completes.
	if _, err := w.run(t, "acme", lim, opTree(30)); err != nil {
		t.Errorf("a tree of 2^11 calls: %v", err)
	}
}

// Threat: unbounded recursion. Without a limiter wazero's compiler grows the
// guest's stack on the Go heap (about 170 MiB for one runaway call) before it
// reports a stack overflow. Defence: the stack limiter of issue 4
// (Limits.MaxStackBytes) stops it at a small, deterministic depth.
func TestCPURecursion(t *testing.T) {
	w := newWorld(t)
	lim := runtime.Limits{Timeout: 10 * time.Second, Fuel: runtime.MaxFuel}
	var msgs []string
	for i := 0; i < 2; i++ {
		before := heapInuse()
		_, f := w.faultOnWarmInstance(t, "acme", lim, opRecurse(0xFFFFFFFF), abi.FailStackExhausted)
		msgs = append(msgs, f.Message)
		if grew := int64(heapInuse()) - int64(before); grew > 64<<20 {
			t.Errorf("one runaway recursion grew the heap by %d MiB", grew>>20)
		}
	}
	if msgs[0] != msgs[1] {
		t.Errorf("not deterministic: %q then %q", msgs[0], msgs[1])
	}
	// Modest recursion is not refused.
	if _, err := w.run(t, "acme", lim, opRecurse(1000)); err != nil {
		t.Errorf("recursion 1000 deep: %v", err)
	}
}

// Threat: many hooks recursing at once multiply the stack's heap cost until
// the process dies (16 unmetered runaway recursions reached 2 GiB in the
// research's probe). Defence: the stack limiter keeps each runaway call
// small. The stated ceiling: 32 concurrent runaway recursions raise the Go
// heap by less than 256 MiB.
func TestCPUConcurrentRecursionStaysUnderCeiling(t *testing.T) {
	const n, ceiling = 32, 256 << 20
	w := newWorld(t, func(o *options) { o.cfg.MaxInstancesPerPool = n })
	lim := runtime.Limits{Timeout: 10 * time.Second, Fuel: runtime.MaxFuel}
	base := heapInuse()
	peak := base
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if h := heapInuse(); h > peak {
				peak = h
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := w.run(t, "acme", lim, opRecurse(0xFFFFFFFF))
			if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailStackExhausted || res.Reused {
				t.Errorf("err %v, want stack_exhausted and the instance discarded", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(stop)
	<-sampled
	if grew := peak - base; grew > ceiling {
		t.Errorf("the heap grew by %d MiB, over the ceiling of %d MiB", grew>>20, ceiling>>20)
	} else {
		t.Logf("32 runaway recursions: the heap grew by at most %d MiB (ceiling %d MiB)", grew>>20, ceiling>>20)
	}
}
