package capability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

func TestMemoryLedger(t *testing.T) {
	ctx := context.Background()
	type step struct {
		op      string // reserve, settle, release, credit
		account string
		amount  int64
		key     string
		ref     int   // index of the reserve step whose id settle/release use
		want    int64 // charged for settle
		wantErr error
	}
	tests := []struct {
		name        string
		steps       []step
		wantAvail   int64
		wantPending int64
	}{
		{"reserve holds", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 30},
		}, 70, 30},
		{"settle less than reserved releases the rest", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 30},
			{op: "settle", ref: 1, amount: 12, want: 12},
		}, 88, 0},
		{"settle more than reserved charges only the reservation", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 30},
			{op: "settle", ref: 1, amount: 500, want: 30},
		}, 70, 0},
		{"settle more than the balance never goes negative", []step{
			{op: "credit", amount: 30},
			{op: "reserve", amount: 30},
			{op: "settle", ref: 1, amount: 31, want: 30},
		}, 0, 0},
		{"release charges nothing", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 30},
			{op: "release", ref: 1},
		}, 100, 0},
		{"insufficient counts pending holds", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 60},
			{op: "reserve", amount: 41, wantErr: ErrInsufficientCredit},
			{op: "reserve", amount: 40},
		}, 0, 100},
		{"never credited", []step{
			{op: "reserve", amount: 1, wantErr: ErrInsufficientCredit},
		}, 0, 0},
		{"settle twice", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 10},
			{op: "settle", ref: 1, amount: 5, want: 5},
			{op: "settle", ref: 1, amount: 5, wantErr: ErrReservationResolved},
		}, 95, 0},
		{"release after settle", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 10},
			{op: "settle", ref: 1, amount: 5, want: 5},
			{op: "release", ref: 1, wantErr: ErrReservationResolved},
		}, 95, 0},
		{"settle after release", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 10},
			{op: "release", ref: 1},
			{op: "settle", ref: 1, amount: 5, wantErr: ErrReservationResolved},
		}, 100, 0},
		{"unknown reservation", []step{
			{op: "settle", ref: -1, amount: 1, wantErr: ErrUnknownReservation},
			{op: "release", ref: -1, wantErr: ErrUnknownReservation},
		}, 0, 0},
		{"idempotent reserve returns the same hold", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 10, key: "inv/1"},
			{op: "reserve", amount: 10, key: "inv/1"},
			{op: "reserve", amount: 10, key: "inv/2"},
		}, 80, 20},
		{"idempotent reserve of a resolved key", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 10, key: "inv/1"},
			{op: "settle", ref: 1, amount: 10, want: 10},
			{op: "reserve", amount: 10, key: "inv/1", wantErr: ErrReservationResolved},
		}, 90, 0},
		{"idempotency key reused with another amount", []step{
			{op: "credit", amount: 100},
			{op: "reserve", amount: 10, key: "inv/1"},
			{op: "reserve", amount: 20, key: "inv/1", wantErr: ErrIdempotencyConflict},
		}, 90, 10},
		{"idempotency key reused by another account", []step{
			{op: "credit", amount: 100},
			{op: "credit", account: "other", amount: 100},
			{op: "reserve", amount: 10, key: "inv/1"},
			{op: "reserve", account: "other", amount: 10, key: "inv/1", wantErr: ErrIdempotencyConflict},
		}, 90, 10},
		{"invalid amounts", []step{
			{op: "credit", amount: 0, wantErr: ErrInvalidAmount},
			{op: "credit", amount: -5, wantErr: ErrInvalidAmount},
			{op: "credit", amount: 10},
			{op: "reserve", amount: 0, wantErr: ErrInvalidAmount},
			{op: "reserve", amount: -1, wantErr: ErrInvalidAmount},
			{op: "reserve", amount: 5},
			{op: "settle", ref: 5, amount: -1, wantErr: ErrInvalidAmount},
		}, 5, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewMemoryLedger()
			ids := make([]string, len(tc.steps))
			for i, s := range tc.steps {
				account := s.account
				if account == "" {
					account = "acme"
				}
				id := "r-none"
				if s.ref >= 0 && s.ref < len(ids) {
					id = ids[s.ref]
				}
				var err error
				var charged int64
				switch s.op {
				case "credit":
					err = l.Credit(account, s.amount)
				case "reserve":
					ids[i], err = l.Reserve(ctx, account, s.amount, s.key)
				case "settle":
					charged, err = l.Settle(ctx, id, s.amount)
				case "release":
					err = l.Release(ctx, id)
				}
				if s.wantErr == nil && err != nil || s.wantErr != nil && !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d (%s): err = %v, want %v", i, s.op, err, s.wantErr)
				}
				if s.op == "settle" && charged != s.want {
					t.Errorf("step %d: charged %d, want %d", i, charged, s.want)
				}
			}
			avail, pending, err := l.Balance(ctx, "acme")
			if err != nil || avail != tc.wantAvail || pending != tc.wantPending {
				t.Errorf("Balance = %d, %d, %v; want %d, %d", avail, pending, err, tc.wantAvail, tc.wantPending)
			}
		})
	}
}

func TestMemoryLedgerIdempotentKeyReturnsSameID(t *testing.T) {
	ctx := context.Background()
	l := fundedLedger(t, 10)
	a, err1 := l.Reserve(ctx, "acme", 10, "k")
	b, err2 := l.Reserve(ctx, "acme", 10, "k") // would overdraw if it held again
	if err1 != nil || err2 != nil || a != b {
		t.Fatalf("ids %q %q errors %v %v", a, b, err1, err2)
	}
	if l.Outstanding() != 1 {
		t.Errorf("Outstanding = %d, want 1", l.Outstanding())
	}
	if _, err := l.Settle(ctx, a, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Settle(ctx, b, 10); !errors.Is(err, ErrReservationResolved) {
		t.Errorf("second settle through the same key: %v", err)
	}
	checkBalance(t, l, "acme", 0)
}

// TestMemoryLedgerHammer runs random reserve/settle/release from many
// goroutines and checks the invariants: the balance never goes negative and
// ends exactly at credits minus charges, with nothing pending.
func TestMemoryLedgerHammer(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLedger()
	const funds = 1000
	if err := l.Credit("acme", funds); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex // guards charged
		charged int64
		wg      sync.WaitGroup
	)
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 200 {
				amount := int64(r.IntN(20) + 1)
				id, err := l.Reserve(ctx, "acme", amount, fmt.Sprintf("g%d/%d", g, i))
				if errors.Is(err, ErrInsufficientCredit) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if avail, _, _ := l.Balance(ctx, "acme"); avail < 0 {
					t.Errorf("available balance %d", avail)
				}
				if r.IntN(3) == 0 {
					if err := l.Release(ctx, id); err != nil {
						t.Error(err)
					}
					continue
				}
				n, err := l.Settle(ctx, id, int64(r.IntN(30)))
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				charged += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	checkBalance(t, l, "acme", funds-charged)
	if l.Outstanding() != 0 {
		t.Errorf("Outstanding = %d", l.Outstanding())
	}
}
