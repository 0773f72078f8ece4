package capability

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// waiting reports whether a call waits for the flight of (tenant, key).
func (f *inflight) waiting(tenant, key string) bool {
	k := flightKey{tenant: tenant, key: key}
	s := f.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k].done != nil
}

// blockingCap is a billable capability whose Execute waits for release.
func blockingCap(execs *counter, entered chan<- struct{}, release <-chan struct{}, gates ...Gate) Capability {
	return Capability{
		Name: "slow.run", Schema: `{}`, Gates: gates,
		Cost: func(any) int64 { return 10 },
		Execute: func(ctx context.Context, req *Request) (*Result, error) {
			execs.inc()
			entered <- struct{}{}
			<-release
			return &Result{Value: "done", Usage: Usage{Credit: 4}}, nil
		},
	}
}

// Threat: a call replayed while the first is still pending (the same
// invocation id and seq, e.g. a retried run id) shared the first's pending
// reservation, executed again, and then failed to settle: the provider ran
// twice for one charge (issue 10, section 6). Defence: the runner's
// in-flight set; the duplicate waits for the first, then meets the resolved
// reservation and is refused before Execute, as a later replay is.
func TestRunnerDuplicateInFlightWaitsAndIsNotRunTwice(t *testing.T) {
	for _, cancelWaiter := range []bool{false, true} {
		name := "waits"
		if cancelWaiter {
			name = "cancelled while waiting"
		}
		t.Run(name, func(t *testing.T) {
			ledger := newCountingLedger(NewMemoryLedger())
			if err := ledger.Ledger.(*MemoryLedger).Credit("acme", 100); err != nil {
				t.Fatal(err)
			}
			execs := &counter{}
			entered, release := make(chan struct{}, 2), make(chan struct{})
			usage := &MemoryUsageSink{}
			r := runnerWith(t, RunnerOptions{Usage: usage}, blockingCap(execs, entered, release, &CreditGate{Ledger: ledger}))

			var wg sync.WaitGroup
			var first, second abi.Reply
			var secondErr error
			wg.Add(1)
			go func() { defer wg.Done(); first = r.HostCall(context.Background(), newCall("slow.run", `{}`)) }()
			<-entered
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			secondDone := make(chan struct{})
			go func() { defer close(secondDone); second, secondErr = r.Run(ctx, newCall("slow.run", `{}`)) }()
			deadline := time.Now().Add(10 * time.Second)
			for !r.flights.waiting("acme", "inv-1/1") {
				if time.Now().After(deadline) {
					t.Fatal("the duplicate never waited")
				}
				time.Sleep(time.Millisecond)
			}
			if cancelWaiter {
				cancel()
				<-secondDone // the waiter returns while the first still runs
			}
			close(release)
			wg.Wait()
			<-secondDone
			if first.Status != abi.StatusOK || first.Charged != 4 {
				t.Errorf("first: %v charged %d, want OK charged 4", first.Status, first.Charged)
			}
			switch {
			case cancelWaiter:
				if second.Status != abi.StatusCapabilityFailed || !errors.Is(secondErr, ErrCancelled) {
					t.Errorf("cancelled duplicate: %v %v, want CAPABILITY_FAILED, ErrCancelled", second.Status, secondErr)
				}
			default:
				if second.Status != abi.StatusDenied || !errors.Is(secondErr, ErrReservationResolved) {
					t.Errorf("duplicate: %v %v, want DENIED, ErrReservationResolved", second.Status, secondErr)
				}
			}
			if second.Charged != 0 {
				t.Errorf("duplicate charged %d", second.Charged)
			}
			if n := execs.get(); n != 1 {
				t.Errorf("Execute ran %d times, want once", n)
			}
			ledger.checkResolvedOnce(t)
			checkBalance(t, ledger, "acme", 96)
			var charged int64
			for _, rec := range usage.Records() {
				charged += rec.Charged
			}
			if charged != 4 {
				t.Errorf("usage records charge %d, want 4", charged)
			}
		})
	}
}

// Calls of different invocations, or of one invocation id in different
// tenants, never wait for one another.
func TestRunnerDistinctCallsDoNotWait(t *testing.T) {
	execs := &counter{}
	entered, release := make(chan struct{}, 3), make(chan struct{})
	r := runnerWith(t, RunnerOptions{}, blockingCap(execs, entered, release))
	calls := []*abi.Call{newCall("slow.run", `{}`), newCall("slow.run", `{}`), newCall("slow.run", `{}`)}
	calls[1].Seq = 2
	calls[2].Caller.Tenant = "other"
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Add(1)
		go func() { defer wg.Done(); r.HostCall(context.Background(), c) }()
	}
	for range calls {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("a distinct call waited")
		}
	}
	close(release)
	wg.Wait()
}
