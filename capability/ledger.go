package capability

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// Ledger holds credit balances and two-phase reservations on them
// (reserve-then-settle, as TigerBeetle's pending transfers and Stripe's
// authorise/capture do; see RATIONALE.md#why-reserve-then-settle).
//
// Invariants every implementation keeps, under any interleaving:
//   - an account's balance never goes below zero: a Reserve succeeds only if
//     balance - pending >= amount;
//   - every reservation resolves exactly once, by Settle or by Release;
//   - a settlement charges at most the reserved amount: when the actual
//     amount is larger, the reserved amount is charged and the rest is not
//     (the runner records it as uncharged), and the remainder of a smaller
//     settlement is released;
//   - one idempotency key makes at most one reservation.
//
// Implementations must be safe for concurrent use by multiple goroutines.
type Ledger interface {
	// Reserve holds amount (> 0) on account and returns the reservation's
	// id. It returns an error wrapping ErrInsufficientCredit when the
	// available balance (balance - pending) is below amount. A non-empty
	// key makes the call idempotent: a key already used returns the same
	// reservation id and never a second hold; with an error wrapping
	// ErrReservationResolved if that reservation is resolved, or
	// ErrIdempotencyConflict if the account or amount differ.
	Reserve(ctx context.Context, account string, amount int64, key string) (id string, err error)

	// Settle resolves reservation id by charging min(amount, reserved)
	// and releasing the rest; it returns the amount charged. amount must
	// not be negative (ErrInvalidAmount). A resolved reservation returns
	// ErrReservationResolved, an unknown one ErrUnknownReservation.
	Settle(ctx context.Context, id string, amount int64) (charged int64, err error)

	// Release resolves reservation id without charging anything. A
	// resolved reservation returns ErrReservationResolved, an unknown one
	// ErrUnknownReservation.
	Release(ctx context.Context, id string) error

	// Balance returns the credit of account that new reservations can
	// take (balance minus pending) and the credit held by pending
	// reservations. The account's total is available + pending.
	Balance(ctx context.Context, account string) (available, pending int64, err error)
}

// MemoryLedger is an in-memory Ledger for tests, the CLI and single-process
// deployments. Fund accounts with Credit. It keeps every reservation, resolved
// or not, so that idempotency keys and double resolutions are always
// detected; a long-running service backs Ledger with a database instead.
//
// The zero value is an empty ledger ready to use. A MemoryLedger is safe for
// concurrent use by multiple goroutines.
type MemoryLedger struct {
	mu       sync.Mutex              // guards every field below
	accounts map[string]*account     // by account name
	res      map[string]*reservation // by reservation id
	keys     map[string]string       // idempotency key -> reservation id
	next     uint64                  // last reservation number issued
}

// account is one balance. balance includes pending.
type account struct {
	balance int64 // credited minus charged
	pending int64 // held by unresolved reservations
}

// reservation is one hold.
type reservation struct {
	account  string
	amount   int64
	key      string
	resolved bool
}

// NewMemoryLedger returns an empty ledger.
func NewMemoryLedger() *MemoryLedger { return &MemoryLedger{} }

func (l *MemoryLedger) init() {
	if l.accounts == nil {
		l.accounts = make(map[string]*account)
		l.res = make(map[string]*reservation)
		l.keys = make(map[string]string)
	}
}

func (l *MemoryLedger) acct(name string) *account {
	a := l.accounts[name]
	if a == nil {
		a = &account{}
		l.accounts[name] = a
	}
	return a
}

// Credit adds amount (> 0) to account's balance.
func (l *MemoryLedger) Credit(account string, amount int64) error {
	if amount <= 0 {
		return fmt.Errorf("%w: credit of %d", ErrInvalidAmount, amount)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	a := l.acct(account)
	if a.balance > maxInt64-amount {
		return fmt.Errorf("%w: balance would overflow", ErrInvalidAmount)
	}
	a.balance += amount
	return nil
}

const maxInt64 = 1<<63 - 1

// Reserve implements Ledger.
func (l *MemoryLedger) Reserve(_ context.Context, account string, amount int64, key string) (string, error) {
	if amount <= 0 {
		return "", fmt.Errorf("%w: reservation of %d", ErrInvalidAmount, amount)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	if key != "" {
		if id, ok := l.keys[key]; ok {
			r := l.res[id]
			switch {
			case r.account != account || r.amount != amount:
				return id, fmt.Errorf("%w: key %q", ErrIdempotencyConflict, key)
			case r.resolved:
				return id, fmt.Errorf("%w: key %q", ErrReservationResolved, key)
			}
			return id, nil
		}
	}
	a := l.acct(account)
	if avail := a.balance - a.pending; avail < amount {
		return "", fmt.Errorf("%w: account %q has %d available, needs %d", ErrInsufficientCredit, account, avail, amount)
	}
	a.pending += amount
	l.next++
	id := "r" + strconv.FormatUint(l.next, 10)
	l.res[id] = &reservation{account: account, amount: amount, key: key}
	if key != "" {
		l.keys[key] = id
	}
	return id, nil
}

// resolve marks reservation id resolved and removes its hold. l.mu must be
// held.
func (l *MemoryLedger) resolve(id string) (*reservation, *account, error) {
	l.init()
	r := l.res[id]
	if r == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownReservation, id)
	}
	if r.resolved {
		return nil, nil, fmt.Errorf("%w: %q", ErrReservationResolved, id)
	}
	r.resolved = true
	a := l.acct(r.account)
	a.pending -= r.amount
	return r, a, nil
}

// Settle implements Ledger.
func (l *MemoryLedger) Settle(_ context.Context, id string, amount int64) (int64, error) {
	if amount < 0 {
		return 0, fmt.Errorf("%w: settlement of %d", ErrInvalidAmount, amount)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, a, err := l.resolve(id)
	if err != nil {
		return 0, err
	}
	charged := min(amount, r.amount)
	a.balance -= charged
	return charged, nil
}

// Release implements Ledger.
func (l *MemoryLedger) Release(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _, err := l.resolve(id)
	return err
}

// Balance implements Ledger. An account never credited has zero balance.
func (l *MemoryLedger) Balance(_ context.Context, account string) (available, pending int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.accounts[account]
	if a == nil {
		return 0, 0, nil
	}
	return a.balance - a.pending, a.pending, nil
}

// Outstanding returns how many reservations are not yet resolved, across all
// accounts. After every call has returned it should be zero.
func (l *MemoryLedger) Outstanding() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.res {
		if !r.resolved {
			n++
		}
	}
	return n
}
