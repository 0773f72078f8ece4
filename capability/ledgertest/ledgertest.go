// Package ledgertest is a conformance kit for capability.Ledger
// implementations: call Run from a test with a function that makes a fresh,
// empty ledger, and it checks the contract capability.Ledger documents, each
// rule as a subtest, including under concurrency.
//
//	func TestLedgerConformance(t *testing.T) {
//		ledgertest.Run(t, func(t *testing.T) ledgertest.Harness {
//			l := capability.NewMemoryLedger()
//			return ledgertest.Harness{Ledger: l, Credit: func(a string, n int64) error { return l.Credit(a, n) }}
//		})
//	}
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wasmhooks/wasmhooks/capability"
)

// Harness is one fresh ledger under test.
type Harness struct {
	// Ledger is the implementation, with no account funded.
	Ledger capability.Ledger
	// Credit funds account with amount (> 0); required.
	Credit func(account string, amount int64) error
	// Outstanding, if set, returns how many reservations are unresolved.
	Outstanding func() (int, error)
}

// Callers is how many goroutines the concurrent subtests run.
const Callers = 16

// Run checks the contract of capability.Ledger on ledgers made by newLedger,
// one per subtest.
func Run(t *testing.T, newLedger func(t *testing.T) Harness) {
	ctx := context.Background()
	fund := func(t *testing.T, h Harness, account string, amount int64) {
		t.Helper()
		if err := h.Credit(account, amount); err != nil {
			t.Fatalf("Credit(%q, %d): %v", account, amount, err)
		}
	}
	balance := func(t *testing.T, h Harness, account string, wantAvail, wantPending int64) {
		t.Helper()
		a, p, err := h.Ledger.Balance(ctx, account)
		if err != nil || a != wantAvail || p != wantPending {
			t.Fatalf("Balance(%q) = %d, %d, %v; want %d, %d", account, a, p, err, wantAvail, wantPending)
		}
	}
	t.Run("unknown account has zero balance", func(t *testing.T) {
		h := newLedger(t)
		balance(t, h, "nobody", 0, 0)
		if _, err := h.Ledger.Reserve(ctx, "nobody", 1, ""); !errors.Is(err, capability.ErrInsufficientCredit) {
			t.Fatalf("Reserve on empty account: %v", err)
		}
	})
	t.Run("reserve settle release", func(t *testing.T) {
		h := newLedger(t)
		fund(t, h, "acme", 100)
		a, err := h.Ledger.Reserve(ctx, "acme", 30, "")
		if err != nil {
			t.Fatal(err)
		}
		balance(t, h, "acme", 70, 30)
		b, err := h.Ledger.Reserve(ctx, "acme", 70, "")
		if err != nil {
			t.Fatal(err)
		}
		if a == b {
			t.Fatalf("two reservations share id %q", a)
		}
		if _, err := h.Ledger.Reserve(ctx, "acme", 1, ""); !errors.Is(err, capability.ErrInsufficientCredit) {
			t.Fatalf("Reserve past the balance: %v", err)
		}
		if c, err := h.Ledger.Settle(ctx, a, 10); err != nil || c != 10 {
			t.Fatalf("Settle(a, 10) = %d, %v", c, err)
		}
		balance(t, h, "acme", 20, 70)
		if err := h.Ledger.Release(ctx, b); err != nil {
			t.Fatal(err)
		}
		balance(t, h, "acme", 90, 0)
	})
	t.Run("settle charges at most the reservation", func(t *testing.T) {
		h := newLedger(t)
		fund(t, h, "acme", 100)
		id, _ := h.Ledger.Reserve(ctx, "acme", 30, "")
		if c, err := h.Ledger.Settle(ctx, id, 50); err != nil || c != 30 {
			t.Fatalf("Settle(id, 50) of a 30 hold = %d, %v; want 30", c, err)
		}
		balance(t, h, "acme", 70, 0)
		id, _ = h.Ledger.Reserve(ctx, "acme", 30, "")
		if c, err := h.Ledger.Settle(ctx, id, 0); err != nil || c != 0 {
			t.Fatalf("Settle(id, 0) = %d, %v", c, err)
		}
		balance(t, h, "acme", 70, 0)
	})
	t.Run("resolved exactly once", func(t *testing.T) {
		h := newLedger(t)
		fund(t, h, "acme", 100)
		id, _ := h.Ledger.Reserve(ctx, "acme", 10, "")
		if _, err := h.Ledger.Settle(ctx, id, 5); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Ledger.Settle(ctx, id, 5); !errors.Is(err, capability.ErrReservationResolved) {
			t.Fatalf("second Settle: %v", err)
		}
		if err := h.Ledger.Release(ctx, id); !errors.Is(err, capability.ErrReservationResolved) {
			t.Fatalf("Release after Settle: %v", err)
		}
		balance(t, h, "acme", 95, 0)
		for _, bad := range []string{"", "nope", "r999999", "h999999", "h-1", "\x00"} {
			if _, err := h.Ledger.Settle(ctx, bad, 1); !errors.Is(err, capability.ErrUnknownReservation) {
				t.Errorf("Settle(%q): %v", bad, err)
			}
			if err := h.Ledger.Release(ctx, bad); !errors.Is(err, capability.ErrUnknownReservation) {
				t.Errorf("Release(%q): %v", bad, err)
			}
		}
	})
	t.Run("invalid amounts", func(t *testing.T) {
		h := newLedger(t)
		fund(t, h, "acme", 100)
		for _, n := range []int64{0, -1, -1 << 63} {
			if _, err := h.Ledger.Reserve(ctx, "acme", n, ""); !errors.Is(err, capability.ErrInvalidAmount) {
				t.Errorf("Reserve(%d): %v", n, err)
			}
		}
		id, _ := h.Ledger.Reserve(ctx, "acme", 10, "")
		if _, err := h.Ledger.Settle(ctx, id, -1); !errors.Is(err, capability.ErrInvalidAmount) {
			t.Errorf("Settle(-1): %v", err)
		}
		balance(t, h, "acme", 90, 10)
	})
	t.Run("idempotency keys", func(t *testing.T) {
		h := newLedger(t)
		fund(t, h, "acme", 100)
		fund(t, h, "other", 100)
		a, err := h.Ledger.Reserve(ctx, "acme", 10, "k1")
		if err != nil {
			t.Fatal(err)
		}
		b, err := h.Ledger.Reserve(ctx, "acme", 10, "k1")
		if err != nil || b != a {
			t.Fatalf("same key: %q, %v; want %q", b, err, a)
		}
		balance(t, h, "acme", 90, 10)
		if _, err := h.Ledger.Reserve(ctx, "acme", 11, "k1"); !errors.Is(err, capability.ErrIdempotencyConflict) {
			t.Errorf("same key, other amount: %v", err)
		}
		if _, err := h.Ledger.Reserve(ctx, "other", 10, "k1"); !errors.Is(err, capability.ErrIdempotencyConflict) {
			t.Errorf("same key, other account: %v", err)
		}
		if _, err := h.Ledger.Settle(ctx, a, 10); err != nil {
			t.Fatal(err)
		}
		if id, err := h.Ledger.Reserve(ctx, "acme", 10, "k1"); !errors.Is(err, capability.ErrReservationResolved) || id != a {
			t.Errorf("key of a resolved reservation: %q, %v", id, err)
		}
		balance(t, h, "acme", 90, 0)
		balance(t, h, "other", 100, 0)
	})
	t.Run("names are bytes", func(t *testing.T) {
		h := newLedger(t)
		names := []string{"a\x00b", "a", "\xff\xfe", "é", "a\x00"}
		for i, name := range names {
			fund(t, h, name, int64(10*(i+1)))
		}
		for i, name := range names {
			id, err := h.Ledger.Reserve(ctx, name, 1, name+"\x00key")
			if err != nil {
				t.Fatalf("Reserve(%q): %v", name, err)
			}
			if again, err := h.Ledger.Reserve(ctx, name, 1, name+"\x00key"); err != nil || again != id {
				t.Fatalf("Reserve(%q) again: %q, %v; want %q", name, again, err, id)
			}
			balance(t, h, name, int64(10*(i+1))-1, 1)
		}
	})
	t.Run("concurrent reserves never overdraw", func(t *testing.T) {
		h := newLedger(t)
		const allowed = 40
		fund(t, h, "acme", allowed*3)
		var ok atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, Callers)
		for g := range Callers {
			wg.Go(func() {
				for i := range 5 {
					id, err := h.Ledger.Reserve(ctx, "acme", 3, "")
					if errors.Is(err, capability.ErrInsufficientCredit) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					if i%2 == 0 {
						_, err = h.Ledger.Settle(ctx, id, 3)
					} else {
						_, err = h.Ledger.Settle(ctx, id, 5) // charges only 3
					}
					if err != nil {
						errs <- fmt.Errorf("goroutine %d: %w", g, err)
						return
					}
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if ok.Load() != allowed {
			t.Fatalf("%d reservations settled, want %d", ok.Load(), allowed)
		}
		balance(t, h, "acme", 0, 0)
	})
	t.Run("concurrent resolutions of one hold: exactly one wins", func(t *testing.T) {
		h := newLedger(t)
		fund(t, h, "acme", 1000)
		for range 10 {
			id, err := h.Ledger.Reserve(ctx, "acme", 10, "")
			if err != nil {
				t.Fatal(err)
			}
			var wins atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					var err error
					if g%2 == 0 {
						_, err = h.Ledger.Settle(ctx, id, 10)
					} else {
						err = h.Ledger.Release(ctx, id)
					}
					switch {
					case err == nil:
						wins.Add(1)
					case !errors.Is(err, capability.ErrReservationResolved):
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if wins.Load() != 1 {
				t.Fatalf("%d resolutions of one hold succeeded", wins.Load())
			}
		}
		if a, p, _ := h.Ledger.Balance(ctx, "acme"); p != 0 || a > 1000 || (1000-a)%10 != 0 {
			t.Fatalf("balance %d pending %d", a, p)
		}
	})
	t.Run("concurrent same key: one hold", func(t *testing.T) {
		h := newLedger(t)
		fund(t, h, "acme", 100)
		ids := make([]string, Callers)
		var wg sync.WaitGroup
		for g := range Callers {
			wg.Go(func() {
				id, err := h.Ledger.Reserve(ctx, "acme", 10, "same")
				if err != nil {
					t.Error(err)
				}
				ids[g] = id
			})
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("one key, several ids: %q", ids)
			}
		}
		balance(t, h, "acme", 90, 10)
	})
	if newLedger(t).Outstanding != nil {
		t.Run("outstanding", func(t *testing.T) {
			h := newLedger(t)
			fund(t, h, "acme", 100)
			a, _ := h.Ledger.Reserve(ctx, "acme", 10, "")
			_, _ = h.Ledger.Reserve(ctx, "acme", 10, "")
			_ = h.Ledger.Release(ctx, a)
			if n, err := h.Outstanding(); err != nil || n != 1 {
				t.Fatalf("Outstanding = %d, %v; want 1", n, err)
			}
		})
	}
}
