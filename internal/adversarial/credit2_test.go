package adversarial

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// invokeAs runs hostile.wat for tenant with script under the invocation id
// id, which the caller chooses (a retried run id), and keeps the books
// checkInvariants reads: who the invocation ran for, and the credit its
// report says was charged. It reports through InvokeInto, whose Result
// carries the host-call report even when the caller's context ended.
func (w *world) invokeAs(ctx context.Context, id, tenant string, lim runtime.Limits, script string) (*runtime.Result, error) {
	w.mu.Lock()
	w.tenantOf[id] = tenant
	w.mu.Unlock()
	res := new(runtime.Result)
	err := w.rt.InvokeInto(ctx, w.hostile, runtime.Request{Tenant: tenant, Limits: lim, Grants: allGrants,
		InvocationID: id, Context: map[string]any{"outgoing": "@@" + script}}, res)
	w.mu.Lock()
	w.reported[tenant] += res.CreditCharged
	w.mu.Unlock()
	return res, err
}

// Threat: a call replayed while the first is still pending (the same
// invocation id and call index: a retried run id) shared the first's pending
// reservation and executed again; the provider ran twice for one charge and
// the duplicate then failed to settle (issue 10, section 6). Defence: the
// runner lets one call per (tenant, idempotency key) through at a time; a
// duplicate waits, then meets the resolved reservation: DENIED "already
// billed", never executed.
func TestCreditDuplicateOfAPendingCallIsNotRunTwice(t *testing.T) {
	w := newWorld(t, func(o *options) { o.lateBy = time.Second })
	w.fund(t, "acme", 1000)
	lim := runtime.Limits{Timeout: 20 * time.Second}
	script := opHostCall("llm.run", llmPayload("LATE-IGNORE", 1), 4096)
	var wg sync.WaitGroup
	results := make([]*runtime.Result, 2)
	errs := make([]error, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		results[0], errs[0] = w.invokeAs(context.Background(), "retried-run", "acme", lim, script)
	}()
	if !waitFor(10*time.Second, func() bool { return w.llm.calls.Load() == 1 }) {
		t.Fatal("the first call never reached the provider")
	}
	// The first call is pending at the provider for a second: the retry of
	// the same run id makes the same call now.
	results[1], errs[1] = w.invokeAs(context.Background(), "retried-run", "acme", lim, script)
	wg.Wait()
	statuses := map[abi.Status]int{}
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("invocation %d: %v", i, errs[i])
		}
		statuses[calls(t, res)[0].status]++
	}
	if statuses[abi.StatusOK] != 1 || statuses[abi.StatusDenied] != 1 {
		t.Errorf("statuses %v, want one OK and one DENIED (already billed)", statuses)
	}
	if n := w.llm.calls.Load(); n != 1 {
		t.Errorf("the provider ran %d times for one call, want once", n)
	}
	if reserved, settled, released := w.ledger.counts(); reserved != 1 || settled != 1 || released != 0 {
		t.Errorf("reserved %d, settled %d, released %d; want 1, 1, 0", reserved, settled, released)
	}
	// The invariants (one resolution per reservation; ledger, usage
	// records and reports agree) are checked when the test ends.
}

// The same, hammered: twenty invocations retrying one run id at once, each
// making the same billable call. Exactly one executes and is charged.
func TestCreditManyRetriesOfOneRunID(t *testing.T) {
	w := acmeWorld(t, 1000)
	statuses := concurrently(t, 20, func(int) (*runtime.Result, error) {
		return w.invokeAs(context.Background(), "run-7", "acme", runtime.Limits{Timeout: 20 * time.Second}, opHostCall("cheap", `{}`, 64))
	})
	if statuses[abi.StatusOK] != 1 || statuses[abi.StatusDenied] != 19 {
		t.Errorf("statuses %v, want 1 OK and 19 DENIED", statuses)
	}
	if n := w.cheap.Load(); n != 1 {
		t.Errorf("cheap executed %d times, want once", n)
	}
}

// Threat: the caller gives up (its context is cancelled) while a billable
// call is at a provider that finishes anyway: the runner settles the charge,
// but the abandoned invocation reported nothing, so the charge reached no
// Result and no audit record (issue 10, section 6). Defence: the charge is
// settled with a context the caller's does not cancel (bounded by
// SettleTimeout), the abandoned invocation's report keeps its host calls
// and credit, and its error (*runtime.AbandonedError) carries them too.
func TestCreditChargeOfAnAbandonedInvocationIsReported(t *testing.T) {
	w := newWorld(t, func(o *options) { o.lateBy = 500 * time.Millisecond })
	w.fund(t, "acme", 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if waitFor(10*time.Second, func() bool { return w.llm.calls.Load() == 1 }) {
			cancel() // while the provider is still working
		}
	}()
	res, err := w.invokeAs(ctx, "given-up", "acme", runtime.Limits{Timeout: 20 * time.Second},
		opHostCall("llm.run", llmPayload("LATE-IGNORE", 1), 4096))
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the invocation abandoned", err)
	}
	want := llmCost("LATE-IGNORE", 1)
	if _, settled, _ := w.ledger.counts(); settled != 1 {
		t.Fatalf("settled %d, want 1: the provider finished, so the work is billed", settled)
	}
	charged := int64(0)
	for _, r := range w.usage.Records() {
		charged += r.Charged
	}
	if charged == 0 || charged > want {
		t.Fatalf("usage records charge %d, want the settled charge (at most %d)", charged, want)
	}
	if res.CreditCharged != charged || res.HostCalls != 1 || res.Decision != nil || res.Failure != nil {
		t.Errorf("report: charged %d, %d host calls, decision %v, failure %v; want %d, 1, none, none",
			res.CreditCharged, res.HostCalls, res.Decision, res.Failure, charged)
	}
	var ae *runtime.AbandonedError
	if !errors.As(err, &ae) || ae.CreditCharged != charged || ae.HostCalls != 1 || runtime.Code(err) != "abandoned" {
		t.Errorf("error %v (%T): want an *AbandonedError carrying the charge %d", err, err, charged)
	}
}
