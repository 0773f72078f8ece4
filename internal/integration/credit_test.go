package integration

import (
	"context"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func balance(t *testing.T, w *world, tenant string) (available, pending int64) {
	t.Helper()
	a, p, err := w.ledger.Balance(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return a, p
}

func TestTrapAfterBillableCallIsChargedOnce(t *testing.T) {
	w := newWorld(t)
	if err := w.ledger.Credit("acme", 100); err != nil {
		t.Fatal(err)
	}
	res, err := w.run(t, "acme", []string{"paid"}, runtime.Limits{}, opHostCall("paid", `{}`)+"U")
	if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailTrap {
		t.Fatalf("err = %v, want a trap", err)
	}
	if res.CreditCharged != 6 {
		t.Errorf("report says %d charged, want 6", res.CreditCharged)
	}
	if a, p := balance(t, w, "acme"); a != 94 || p != 0 {
		t.Errorf("balance %d (pending %d), want 94 and 0", a, p)
	}
	if n := w.executed.Load(); n != 1 {
		t.Errorf("executed %d times", n)
	}
}

func TestTrapBeforeBillableCallIsChargedNothing(t *testing.T) {
	w := newWorld(t)
	if err := w.ledger.Credit("acme", 100); err != nil {
		t.Fatal(err)
	}
	_, err := w.run(t, "acme", []string{"paid"}, runtime.Limits{}, "U"+opHostCall("paid", `{}`))
	if _, ok := abi.AsFailure(err); !ok {
		t.Fatalf("err = %v, want a failure", err)
	}
	if a, p := balance(t, w, "acme"); a != 100 || p != 0 {
		t.Errorf("balance %d (pending %d), want 100 and 0", a, p)
	}
	if len(w.usage.Records()) != 0 {
		t.Errorf("usage records for work that never happened: %+v", w.usage.Records())
	}
}

// TestConcurrentInvocationsAgainstOneCallOfCredit: 100 invocations at once, a
// balance that covers exactly one call: exactly one is served.
func TestConcurrentInvocationsAgainstOneCallOfCredit(t *testing.T) {
	w := newWorld(t)
	if err := w.ledger.Credit("acme", 10); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	statuses := make(chan abi.Status, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := w.run(t, "acme", []string{"paid"}, runtime.Limits{}, opHostCall("paid", `{}`))
			if err != nil {
				t.Error(err)
				return
			}
			statuses <- parse(t, res.Decision.Reason)[0].status
		}()
	}
	wg.Wait()
	close(statuses)
	counts := map[abi.Status]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[abi.StatusOK] != 1 || counts[abi.StatusInsufficientCredit] != 99 {
		t.Fatalf("statuses %v, want 1 OK and 99 INSUFFICIENT_CREDIT", counts)
	}
	if a, p := balance(t, w, "acme"); a != 4 || p != 0 {
		t.Errorf("balance %d (pending %d), want 4 and 0", a, p)
	}
	if n := w.executed.Load(); n != 1 {
		t.Errorf("the backend ran %d times", n)
	}
	if n := w.ledger.Outstanding(); n != 0 {
		t.Errorf("%d reservations unresolved", n)
	}
}
