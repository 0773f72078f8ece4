package adversarial

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// logsText joins everything a result's logs hold.
func logsText(res *runtime.Result) string {
	var b strings.Builder
	for _, l := range res.Logs {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// Threat: a hook stashes tenant A's input in its memory and globals and
// prints it on its next call, which serves tenant B. Defence: instances are
// pooled per (module, tenant); they never cross tenants.
func TestIsolationStashAcrossTenants(t *testing.T) {
	w := newWorld(t)
	const secretA = "alicesecret42"
	// A's hook remembers A's secret and also prints it to stdout.
	stashA := opQuote + opStash(secretA) + opWrite(rawPtr, []byte(secretA+"\n")) + opPrint(1, rawPtr, uint32(len(secretA)+1), 1)
	res, err := w.run(t, "tenant-a", runtime.Limits{}, stashA)
	if err != nil || res.Decision.Reason != "." || !res.Reused {
		t.Fatalf("A: %v %+v", err, res)
	}
	// B runs the same module and prints what the instance remembers.
	for i := 0; i < 3; i++ {
		res, err = w.run(t, "tenant-b", runtime.Limits{}, opQuote+opStash("bob"))
		if err != nil {
			t.Fatal(err)
		}
		want := "."
		if i > 0 {
			want = "bob."
		}
		if res.Decision.Reason != want {
			t.Fatalf("B's invocation %d saw the stash %q, want %q", i, res.Decision.Reason, want)
		}
		if strings.Contains(logsText(res), secretA) {
			t.Fatalf("B's logs hold A's secret: %q", logsText(res))
		}
	}
	// The attack is real: A's own next invocation does see A's stash.
	res, err = w.run(t, "tenant-a", runtime.Limits{}, opQuote)
	if err != nil || res.Decision.Reason != secretA+"." {
		t.Fatalf("A's next invocation: %v %+v; the stash must survive on A's own instance", err, res)
	}
}

// Threat: an instance in an unknown state (it trapped, timed out, was
// stopped mid-host-call, violated the ABI, returned garbage, ran out of
// memory, fuel or stack) is handed out again, with whatever it kept.
// Defence: any failure discards the instance; so does growing past the
// high-water mark.
func TestIsolationFaultedInstanceNeverReused(t *testing.T) {
	tests := []struct {
		name  string
		lim   runtime.Limits
		fault string
		codes []abi.FailureCode
	}{
		{"trap", runtime.Limits{}, opTrap, []abi.FailureCode{abi.FailTrap}},
		{"out-of-bounds store", runtime.Limits{}, opStore(0xFFFFFFF0), []abi.FailureCode{abi.FailTrap}},
		{"timeout in a loop", runtime.Limits{Timeout: 100 * time.Millisecond, Fuel: runtime.MaxFuel}, opLoop, []abi.FailureCode{abi.FailTimeout}},
		{"timeout inside a host call", runtime.Limits{Timeout: 100 * time.Millisecond}, opHostCall("llm.run", llmPayload("LATE-HONOUR", 1), 4096), []abi.FailureCode{abi.FailTimeout}},
		{"abi violation", runtime.Limits{}, opCall(0xFFFFFFFF, 1, 0, 0, 0, 0), []abi.FailureCode{abi.FailABIViolation}},
		{"no decision", runtime.Limits{}, opZero, []abi.FailureCode{abi.FailInvalidOutput}},
		{"invalid output", runtime.Limits{}, opReturnRaw([]byte(`{"action":"permit"}`)), []abi.FailureCode{abi.FailInvalidOutput}},
		{"output too large", runtime.Limits{MaxOutputBytes: 4}, "", []abi.FailureCode{abi.FailOutputTooLarge}},
		{"memory", runtime.Limits{MemoryPages: 16}, opGrow(0x100) + opStore(16*65536), []abi.FailureCode{abi.FailMemory}},
		{"fuel", runtime.Limits{Timeout: 10 * time.Second, Fuel: 500_000}, opBusy(0xFFFFFFFF), []abi.FailureCode{abi.FailFuelExhausted}},
		{"stack", runtime.Limits{Timeout: 10 * time.Second}, opRecurse(0xFFFFFFFF), []abi.FailureCode{abi.FailStackExhausted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, func(o *options) { o.lateBy = time.Second })
			w.fund(t, "acme", 1000)
			w.faultOnWarmInstance(t, "acme", tt.lim, tt.fault, tt.codes...)
		})
	}
	t.Run("past the high-water mark", func(t *testing.T) {
		w := newWorld(t)
		lim := runtime.Limits{MemoryPages: 32, MemoryHighWaterPages: 12}
		if _, err := w.run(t, "acme", lim, opStash("warm")); err != nil {
			t.Fatal(err)
		}
		res, err := w.run(t, "acme", lim, opGrow(8))
		if err != nil || res.Reused || res.MemoryPages != 16 {
			t.Fatalf("grown to %d pages: %v, reused %v; want 16 pages, discarded", res.MemoryPages, err, res.Reused)
		}
		res, err = w.run(t, "acme", lim, opQuote+opServed)
		if err != nil || res.Decision.Reason != ".00000001." {
			t.Fatalf("after the high-water mark: %v %+v, want a fresh instance", err, res)
		}
	})
}

// Threat: an instance closed by its deadline while other invocations of the
// same pool run is handed out again. Defence: as above, under concurrency:
// instances that time out are discarded, the survivors keep serving.
func TestIsolationTimedOutInstancesUnderLoad(t *testing.T) {
	w := newWorld(t, func(o *options) { o.cfg.MaxInstancesPerPool = 8; o.cfg.MaxIdlePerPool = 8 })
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			script, lim := opStash("ok")+opServed, runtime.Limits{}
			if i%4 == 0 {
				script, lim = opStash("doomed")+opLoop, runtime.Limits{Timeout: 50 * time.Millisecond, Fuel: runtime.MaxFuel}
			}
			res, err := w.run(t, "acme", lim, script)
			if i%4 == 0 {
				if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailTimeout {
					t.Errorf("err %v, want a timeout", err)
				}
				return
			}
			if err != nil || res.Decision.Reason == "" {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	// No idle instance remembers "doomed".
	s := w.rt.Stats()
	for i := 0; i < s.Idle+2; i++ {
		res, err := w.run(t, "acme", runtime.Limits{}, opQuote)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.Decision.Reason, "doomed") {
			t.Fatalf("an instance that timed out was handed out again: %q", res.Decision.Reason)
		}
	}
}

// Threat: two tenants upload identical bytes, and share more than the
// compiled code (instances, memory, budgets, logs). Defence: the compile cache
// is keyed by digest, the pools by (digest, tenant).
func TestIsolationIdenticalBytesShareCompiledCodeOnly(t *testing.T) {
	w := newWorld(t)
	before := w.rt.Stats().Modules
	bytesA := corpus(t, "hostile.wat")
	bytesB := append([]byte(nil), bytesA...) // B uploads its own copy
	ma, mb := w.load(t, bytesA), w.load(t, bytesB)
	if ma.Digest() != mb.Digest() || w.rt.Stats().Modules != before {
		t.Fatalf("identical bytes compiled twice: digests %s %s, modules %d -> %d", ma.Digest(), mb.Digest(), before, w.rt.Stats().Modules)
	}
	w.fund(t, "tenant-a", 100)
	pay := opHostCall("llm.run", llmPayload("hi", 1), 4096)
	print := func(s string) string {
		return opWrite(rawPtr, []byte(s+"\n")) + opPrint(1, rawPtr, uint32(len(s)+1), 1)
	}
	resA, err := w.invoke(t, ma, runtime.Request{Tenant: "tenant-a", Context: map[string]any{"outgoing": "@@" + opStash("fromA") + print("logA") + pay}})
	if err != nil {
		t.Fatal(err)
	}
	resB, err := w.invoke(t, mb, runtime.Request{Tenant: "tenant-b", Context: map[string]any{"outgoing": "@@" + opQuote + print("logB") + pay}})
	if err != nil {
		t.Fatal(err)
	}
	// Separate instances.
	if got := entries(resB.Decision.Reason); got[0] != "" {
		t.Errorf("B saw A's stash %q", got[0])
	}
	// Separate budgets: A paid, B has none.
	if calls(t, resA)[0].status != abi.StatusOK || decodeCall(t, entries(resB.Decision.Reason)[1]).status != abi.StatusInsufficientCredit {
		t.Errorf("A: %s; B: %s", resA.Decision.Reason, resB.Decision.Reason)
	}
	if resA.CreditCharged != 3 || resB.CreditCharged != 0 || w.ledger.available(t, "tenant-a") != 97 {
		t.Errorf("charged A %d, B %d", resA.CreditCharged, resB.CreditCharged)
	}
	// Separate logs.
	if la, lb := logsText(resA), logsText(resB); la != "logA\n" || lb != "logB\n" {
		t.Errorf("logs A %q, B %q", la, lb)
	}
	// Separate pools: closing A's module keeps B's module working.
	_ = ma.Close(context.Background())
	if _, err := w.invoke(t, mb, runtime.Request{Tenant: "tenant-b", Context: map[string]any{"outgoing": "@@"}}); err != nil {
		t.Errorf("B after A closed its module: %v", err)
	}
}
