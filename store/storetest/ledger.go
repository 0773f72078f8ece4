package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/ledgertest"
	"github.com/wasmhooks/wasmhooks/store"
)

// Open opens a fresh, empty, migrated database, closed when t ends.
type Open func(t *testing.T) *store.DB

// RunLedger runs the Ledger conformance kit (capability/ledgertest) on the
// database's ledger, then what the durable ledger adds: entries and Check,
// leases and Sweep, corrupt rows, a closed database.
func RunLedger(t *testing.T, open Open) {
	ctx := context.Background()
	t.Run("conformance", func(t *testing.T) {
		ledgertest.Run(t, func(t *testing.T) ledgertest.Harness {
			l := store.NewLedger(open(t), store.LedgerOptions{})
			return ledgertest.Harness{Ledger: l,
				Credit:      func(a string, n int64) error { return l.Grant(ctx, a, n, "") },
				Outstanding: func() (int, error) { return l.Outstanding(ctx) }}
		})
	})
	t.Run("entries and check", func(t *testing.T) {
		l := store.NewLedger(open(t), store.LedgerOptions{})
		must(t, l.Grant(ctx, "acme", 100, "g1"))
		must(t, l.Grant(ctx, "acme", 100, "g1")) // same key: once
		if err := l.Grant(ctx, "acme", 5, "g1"); !errors.Is(err, capability.ErrIdempotencyConflict) {
			t.Fatalf("grant with a used key: %v", err)
		}
		id, err := l.Reserve(ctx, "acme", 60, "")
		must(t, err)
		if err := l.Adjust(ctx, "acme", -50, "", "refund reversal"); !errors.Is(err, capability.ErrInsufficientCredit) {
			t.Fatalf("adjust below held credit: %v", err)
		}
		for _, note := range []string{"a\x00b", "\xff refund"} { // text columns cannot hold them (Postgres)
			if err := l.Adjust(ctx, "acme", -40, "", note); !errors.Is(err, store.ErrInvalidNote) {
				t.Fatalf("adjust with note %q: %v", note, err)
			}
		}
		must(t, l.Adjust(ctx, "acme", -40, "", "correction"))
		_, err = l.Settle(ctx, id, 25)
		must(t, err)
		wantBalance(t, l, "acme", 35, 0)
		if err := l.Grant(ctx, "acme", 1<<62, ""); err != nil {
			t.Fatal(err)
		}
		if err := l.Grant(ctx, "acme", 1<<62, ""); !errors.Is(err, capability.ErrInvalidAmount) {
			t.Fatalf("overflowing grant: %v", err)
		}
		must(t, l.Check(ctx))
	})
	t.Run("usage sums the entries by kind", func(t *testing.T) {
		l := store.NewLedger(open(t), store.LedgerOptions{})
		must(t, l.Grant(ctx, "acme", 100, "g1"))
		must(t, l.Grant(ctx, "acme", 100, "g1")) // same key: once
		must(t, l.Grant(ctx, "other", 7, ""))
		must(t, l.Adjust(ctx, "acme", -40, "", "correction"))
		for _, amount := range []int64{25, 5} {
			id, err := l.Reserve(ctx, "acme", 30, "")
			must(t, err)
			_, err = l.Settle(ctx, id, amount)
			must(t, err)
		}
		id, err := l.Reserve(ctx, "acme", 10, "")
		must(t, err)
		must(t, l.Release(ctx, id)) // released: no charge
		u, err := l.Usage(ctx, "acme")
		must(t, err)
		if u != (store.LedgerUsage{Granted: 100, Adjusted: -40, Charged: 30, Charges: 2}) {
			t.Fatalf("usage %+v", u)
		}
		if u, err := l.Usage(ctx, "nobody"); err != nil || u != (store.LedgerUsage{}) {
			t.Fatalf("an account never credited: %+v %v", u, err)
		}
	})
	t.Run("sweep releases expired owners only", func(t *testing.T) {
		db := open(t)
		now := time.Unix(1_000_000, 0)
		clock := func() time.Time { return now }
		dead := store.NewLedger(db, store.LedgerOptions{Owner: "dead", Lease: time.Minute, Now: clock})
		live := store.NewLedger(db, store.LedgerOptions{Owner: "live", Lease: time.Minute, Now: clock})
		must(t, dead.Grant(ctx, "acme", 100, ""))
		d1, err := dead.Reserve(ctx, "acme", 10, "")
		must(t, err)
		_, err = dead.Reserve(ctx, "acme", 20, "")
		must(t, err)
		l1, err := live.Reserve(ctx, "acme", 30, "")
		must(t, err)
		_, err = dead.Settle(ctx, d1, 10)
		must(t, err)
		now = now.Add(50 * time.Second)
		must(t, live.Renew(ctx))
		if n, err := live.Sweep(ctx, now.Add(30*time.Second)); err != nil || n != 1 {
			t.Fatalf("Sweep after dead's lease = %d, %v; want 1", n, err)
		}
		wantBalance(t, live, "acme", 60, 30)
		if n, err := live.Sweep(ctx, now.Add(30*time.Second)); err != nil || n != 0 {
			t.Fatalf("second Sweep = %d, %v; want 0", n, err)
		}
		_, err = live.Settle(ctx, l1, 30)
		must(t, err)
		wantBalance(t, live, "acme", 60, 0)
		must(t, live.Check(ctx))
	})
	t.Run("sweep racing settle resolves each hold once", func(t *testing.T) {
		db := open(t)
		start := time.Unix(2_000_000, 0)
		owner := store.NewLedger(db, store.LedgerOptions{Owner: "slow", Lease: time.Minute, Now: func() time.Time { return start }})
		sweeper := store.NewLedger(db, store.LedgerOptions{Owner: "sweeper"})
		const holds, amount = 20, 5
		must(t, owner.Grant(ctx, "acme", 1000, ""))
		ids := make([]string, holds)
		for i := range ids {
			id, err := owner.Reserve(ctx, "acme", amount, "")
			must(t, err)
			ids[i] = id
		}
		var settled, swept atomic.Int64
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Go(func() {
				for i := g; i < holds; i += 2 {
					_, err := owner.Settle(ctx, ids[i], amount)
					switch {
					case err == nil:
						settled.Add(1)
					case !errors.Is(err, capability.ErrReservationResolved):
						t.Error(err)
					}
				}
			})
		}
		wg.Go(func() {
			for range 5 {
				n, err := sweeper.Sweep(ctx, start.Add(2*time.Minute))
				if err != nil {
					t.Error(err)
				}
				swept.Add(int64(n))
			}
		})
		wg.Wait()
		if settled.Load()+swept.Load() != holds {
			t.Fatalf("%d settled + %d swept, want %d resolutions", settled.Load(), swept.Load(), holds)
		}
		wantBalance(t, sweeper, "acme", 1000-amount*settled.Load(), 0)
		must(t, sweeper.Check(ctx))
	})
	t.Run("corrupt rows are refused and change nothing", func(t *testing.T) {
		db, l, id := holding(t, open)
		// A cached pending that lost the hold.
		if _, err := db.SQL().ExecContext(ctx, `UPDATE ledger_accounts SET pending = 0`); err != nil {
			t.Fatal(err)
		}
		if err := l.Check(ctx); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Check: %v", err)
		}
		if _, err := l.Settle(ctx, id, 10); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Settle on a corrupt account: %v", err)
		}
		if n, _ := l.Outstanding(ctx); n != 1 {
			t.Fatalf("the hold was resolved anyway: %d open", n)
		}
		wantBalance(t, l, "acme", 100, 0)
		// A cached balance that differs from its entries.
		if _, err := db.SQL().ExecContext(ctx, `UPDATE ledger_accounts SET pending = 10, balance = 150`); err != nil {
			t.Fatal(err)
		}
		if err := l.Check(ctx); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Check: %v", err)
		}
	})
	t.Run("closed database is unavailable", func(t *testing.T) {
		db, l, id := holding(t, open)
		db.Close()
		for name, err := range map[string]error{
			"reserve": func() error { _, err := l.Reserve(ctx, "acme", 1, ""); return err }(),
			"settle":  func() error { _, err := l.Settle(ctx, id, 1); return err }(),
			"release": l.Release(ctx, id),
			"balance": func() error { _, _, err := l.Balance(ctx, "acme"); return err }(),
			"grant":   l.Grant(ctx, "acme", 1, ""),
			"sweep":   func() error { _, err := l.Sweep(ctx, time.Now()); return err }(),
			"check":   l.Check(ctx),
		} {
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("%s on a closed database: %v", name, err)
			}
		}
	})
	t.Run("cancelled context is unavailable", func(t *testing.T) {
		l := store.NewLedger(open(t), store.LedgerOptions{})
		must(t, l.Grant(ctx, "acme", 100, ""))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.Reserve(cctx, "acme", 1, ""); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Reserve: %v", err)
		}
		wantBalance(t, l, "acme", 100, 0)
	})
}

// holding opens a database whose account acme was granted 100 and holds 10
// of them, reserved as id.
func holding(t *testing.T, open Open) (*store.DB, *store.Ledger, string) {
	t.Helper()
	db := open(t)
	l := store.NewLedger(db, store.LedgerOptions{})
	must(t, l.Grant(context.Background(), "acme", 100, ""))
	id, err := l.Reserve(context.Background(), "acme", 10, "")
	must(t, err)
	return db, l, id
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantBalance(t *testing.T, l capability.Ledger, account string, avail, pending int64) {
	t.Helper()
	a, p, err := l.Balance(context.Background(), account)
	if err != nil || a != avail || p != pending {
		t.Fatalf("Balance(%q) = %d, %d, %v; want %d, %d", account, a, p, err, avail, pending)
	}
}
