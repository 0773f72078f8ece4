package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/capability"
)

// DefaultLease is how long a ledger's holds outlive its last renewal before
// another process's Sweep may release them.
const DefaultLease = 30 * time.Second

// Hold states as stored. A hold leaves "open" exactly once.
const (
	holdOpen     = "open"
	holdSettled  = "settled"
	holdReleased = "released"
	holdSwept    = "swept" // released by Sweep after its owner's lease ended
)

// Entry kinds. An account's balance is the sum of its entries' amounts.
const (
	entryGrant  = "grant"  // credit added by the operator (> 0)
	entryAdjust = "adjust" // a correction, either sign
	entryCharge = "charge" // a settled hold (< 0)
)

// LedgerOptions configures a Ledger. The zero value is ready to use.
type LedgerOptions struct {
	// Owner names this process's holds; Sweep releases the holds of an
	// owner whose lease ended. Empty means a random name, which is what
	// one process should use: two live processes must never share one.
	Owner string
	// Lease is how long the owner's holds survive without a renewal.
	// Zero means DefaultLease. Reserve renews the lease when less than
	// half of it is left; an owner holding holds without reserving calls
	// Renew (or runs KeepAlive) more often than Lease.
	Lease time.Duration
	// Now is the clock; nil means time.Now. Leases compare times written
	// by different machines: keep their clocks within a small fraction of
	// Lease.
	Now func() time.Time
}

// Ledger is a capability.Ledger kept in a database, shared by every process
// that opens it: balances never go negative and every hold resolves exactly
// once however many processes reserve, settle, release and sweep at the same
// time, because each of these is one transaction whose conditions the
// database checks (a conditional UPDATE of the account, a row-locked hold, a
// unique idempotency key).
//
// An account's balance is a cached sum of its entries (grants, adjustments
// and charges); Check proves the cache equal to the entries and the pending
// amount equal to the open holds.
//
// Each hold carries its owner (one per process) whose lease the owner renews;
// Sweep, called by any process, releases the open holds of owners whose lease
// ended, so that the credit of a process that died comes back.
type Ledger struct {
	db    *DB
	owner string
	lease time.Duration
	now   func() time.Time

	renewAfter atomic.Int64 // unix ns after which Reserve renews the lease
}

var _ capability.Ledger = (*Ledger)(nil)

// NewLedger returns the ledger of db.
func NewLedger(db *DB, opts LedgerOptions) *Ledger {
	l := &Ledger{db: db, owner: opts.Owner, lease: opts.Lease, now: opts.Now}
	if l.owner == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		l.owner = "p-" + hex.EncodeToString(b[:])
	}
	if l.lease <= 0 {
		l.lease = DefaultLease
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// Owner returns the name this ledger's holds carry.
func (l *Ledger) Owner() string { return l.owner }

func holdID(n int64) string { return "h" + strconv.FormatInt(n, 10) }

func parseHoldID(id string) (int64, bool) {
	s, ok := strings.CutPrefix(id, "h")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// nullKey is the idempotency key as stored: NULL when empty. Names (accounts,
// keys, owners) are stored as bytes, so that any Go string, NUL bytes and
// invalid UTF-8 included, is kept exactly (Postgres TEXT refuses both).
func nullKey(key string) any {
	if key == "" {
		return nil
	}
	return []byte(key)
}

// keyedHold is the hold an idempotency key already names.
type keyedHold struct {
	n     int64
	acct  string
	amt   int64
	state string
}

// replay answers a Reserve repeated with key: nil when the hold is the same
// reservation (account and amount) and still open, a typed refusal otherwise.
func (h *keyedHold) replay(key, account string, amount int64) error {
	switch {
	case h.acct != account || h.amt != amount:
		return fmt.Errorf("%w: key %q", capability.ErrIdempotencyConflict, key)
	case h.state != holdOpen:
		return fmt.Errorf("%w: key %q", capability.ErrReservationResolved, key)
	}
	return nil
}

// Reserve implements capability.Ledger.
func (l *Ledger) Reserve(ctx context.Context, account string, amount int64, key string) (string, error) {
	if amount <= 0 {
		return "", fmt.Errorf("%w: reservation of %d", capability.ErrInvalidAmount, amount)
	}
	now := l.now()
	if l.db.d.WritableCTE() && now.UnixNano() < l.renewAfter.Load() {
		return l.reserve1(ctx, account, amount, key, now)
	}
	var (
		id      string
		renewed bool
	)
	err := l.db.tx(ctx, "ledger reserve", func(tx *sql.Tx) error {
		id, renewed = "", false
		if key != "" {
			var h keyedHold
			found := true
			err := l.db.stmt(ctx, tx, `SELECT id, account, amount, state FROM ledger_holds WHERE idem_key = $1`).QueryRowContext(ctx, []byte(key)).
				Scan(&h.n, &h.acct, &h.amt, &h.state)
			if errors.Is(err, sql.ErrNoRows) {
				found = false
			} else if err != nil {
				return err
			}
			if found {
				id = holdID(h.n)
				return h.replay(key, account, amount)
			}
		}
		res, err := l.db.stmt(ctx, tx, `UPDATE ledger_accounts SET pending = pending + $2
			WHERE account = $1 AND balance - pending >= $2`).ExecContext(ctx, []byte(account), amount)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			var avail int64
			err := l.db.stmt(ctx, tx, `SELECT balance - pending FROM ledger_accounts WHERE account = $1`).QueryRowContext(ctx, []byte(account)).Scan(&avail)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			return fmt.Errorf("%w: account %q has %d available, needs %d", capability.ErrInsufficientCredit, account, avail, amount)
		}
		var n int64
		if err := l.db.stmt(ctx, tx, `INSERT INTO ledger_holds (account, amount, idem_key, owner, state, created_at)
			VALUES ($1, $2, $3, $4, 'open', $5) RETURNING id`).QueryRowContext(ctx, []byte(account), amount, nullKey(key), []byte(l.owner), now.UnixNano()).Scan(&n); err != nil {
			if key != "" && l.db.d.IsUniqueViolation(err) {
				// Another process took the key between our look-up and
				// this insert (Postgres, read committed): retry, which
				// finds it.
				return errRetryKey
			}
			return err
		}
		id = holdID(n)
		if now.UnixNano() >= l.renewAfter.Load() {
			renewed = true
			return l.renew(ctx, tx, now)
		}
		return nil
	})
	if err == nil && renewed {
		l.renewAfter.Store(now.Add(l.lease / 2).UnixNano())
	}
	if errors.Is(err, errRetryKey) {
		return l.Reserve(ctx, account, amount, key)
	}
	if err != nil {
		if isDomain(err) {
			return id, err
		}
		return "", err
	}
	return id, nil
}

// reserve1 is Reserve in one statement per step, outside a transaction:
// look the key up; then take the credit and insert the hold in one statement
// (writable CTE), atomic by itself. A key inserted by another process in
// between fails that statement on the unique index, and the look-up runs
// again.
func (l *Ledger) reserve1(ctx context.Context, account string, amount int64, key string, now time.Time) (string, error) {
	for range maxRetries {
		var id string
		err := l.db.retry(ctx, "ledger reserve", func() error {
			id = ""
			if key != "" {
				var h keyedHold
				err := l.db.sql.QueryRowContext(ctx, `SELECT id, account, amount, state FROM ledger_holds WHERE idem_key = $1`, []byte(key)).
					Scan(&h.n, &h.acct, &h.amt, &h.state)
				if err == nil {
					id = holdID(h.n)
					return h.replay(key, account, amount)
				} else if !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
			var n int64
			err := l.db.sql.QueryRowContext(ctx, `WITH a AS (
					UPDATE ledger_accounts SET pending = pending + $2
					WHERE account = $1 AND balance - pending >= $2 RETURNING account)
				INSERT INTO ledger_holds (account, amount, idem_key, owner, state, created_at)
				SELECT account, $2, $3, $4, 'open', $5 FROM a RETURNING id`,
				[]byte(account), amount, nullKey(key), []byte(l.owner), now.UnixNano()).Scan(&n)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				var avail int64
				err := l.db.sql.QueryRowContext(ctx, `SELECT balance - pending FROM ledger_accounts WHERE account = $1`, []byte(account)).Scan(&avail)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					return err
				}
				return fmt.Errorf("%w: account %q has %d available, needs %d", capability.ErrInsufficientCredit, account, avail, amount)
			case err != nil && key != "" && l.db.d.IsUniqueViolation(err):
				return errRetryKey
			case err != nil:
				return err
			}
			id = holdID(n)
			return nil
		})
		if errors.Is(err, errRetryKey) {
			continue
		}
		if err != nil && !isDomain(err) {
			return "", err
		}
		return id, err
	}
	return "", Unavailable("ledger reserve", fmt.Errorf("key %q kept changing", key))
}

// errRetryKey asks Reserve to run again after losing a race on a key.
var errRetryKey = &Error{Code: "retry-key"}

// renew extends the owner's lease to now + Lease.
func (l *Ledger) renew(ctx context.Context, tx *sql.Tx, now time.Time) error {
	until := now.Add(l.lease).UnixNano()
	if _, err := l.db.stmt(ctx, tx, `INSERT INTO ledger_owners (owner, lease_until) VALUES ($1, $2)
		ON CONFLICT (owner) DO UPDATE SET lease_until = excluded.lease_until`).ExecContext(ctx, []byte(l.owner), until); err != nil {
		return err
	}
	return nil
}

// Renew extends this ledger's lease to now + Lease, keeping its open holds
// from Sweep.
func (l *Ledger) Renew(ctx context.Context) error {
	now := l.now()
	err := l.db.tx(ctx, "ledger renew", func(tx *sql.Tx) error { return l.renew(ctx, tx, now) })
	if err == nil {
		l.renewAfter.Store(now.Add(l.lease / 2).UnixNano())
	}
	return err
}

// KeepAlive renews the lease every interval (zero means Lease/3) until ctx
// ends. It returns ctx's error; a failed renewal is retried at the next tick.
func (l *Ledger) KeepAlive(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = l.lease / 3
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_ = l.Renew(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// lockedHold reads hold id for resolution, locking its row.
func (l *Ledger) lockedHold(ctx context.Context, tx *sql.Tx, op, id string) (n int64, account string, amount int64, err error) {
	n, ok := parseHoldID(id)
	if !ok {
		return 0, "", 0, fmt.Errorf("%w: %q", capability.ErrUnknownReservation, id)
	}
	var state string
	err = l.db.stmt(ctx, tx, `SELECT account, amount, state FROM ledger_holds WHERE id = $1`+l.db.d.ForUpdate()).QueryRowContext(ctx, n).
		Scan(&account, &amount, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, "", 0, fmt.Errorf("%w: %q", capability.ErrUnknownReservation, id)
	case err != nil:
		return 0, "", 0, err
	case amount <= 0:
		return 0, "", 0, Corrupt(op, "hold %s has amount %d", id, amount)
	case state == holdOpen:
		return n, account, amount, nil
	case state == holdSettled || state == holdReleased || state == holdSwept:
		return 0, "", 0, fmt.Errorf("%w: %q", capability.ErrReservationResolved, id)
	default:
		return 0, "", 0, Corrupt(op, "hold %s has state %q", id, state)
	}
}

// finish1 is finish in one statement (writable CTE): resolve the hold, take
// it off the account's pending, record the charge. The schema's CHECKs on the
// account abort the statement if the account cannot take the hold off (a
// corrupt row); when no open hold matched, a SELECT says why.
func (l *Ledger) finish1(ctx context.Context, op string, n int64, id string, amount int64, state string, now time.Time) (int64, error) {
	var charged int64
	err := l.db.retry(ctx, op, func() error {
		err := l.db.sql.QueryRowContext(ctx, `WITH h AS (
				UPDATE ledger_holds SET state = $2, charged = CASE WHEN $3 < amount THEN $3 ELSE amount END, resolved_at = $4
				WHERE id = $1 AND state = 'open' AND amount > 0 RETURNING account, amount, charged),
			a AS (
				UPDATE ledger_accounts SET balance = ledger_accounts.balance - h.charged, pending = ledger_accounts.pending - h.amount
				FROM h WHERE ledger_accounts.account = h.account RETURNING h.charged),
			e AS (
				INSERT INTO ledger_entries (account, kind, amount, hold_id, created_at)
				SELECT account, 'charge', -charged, $1, $4 FROM h WHERE charged > 0)
			SELECT charged FROM a`, n, state, amount, now.UnixNano()).Scan(&charged)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return l.db.tx1(ctx, func(tx *sql.Tx) error {
				_, _, _, err := l.lockedHold(ctx, tx, op, id)
				if err == nil {
					err = Corrupt(op, "hold %s could not be resolved", id)
				}
				return err
			})
		case err != nil && l.db.d.IsCheckViolation(err):
			return Corrupt(op, "hold %s: its account cannot take it off its pending credit: %v", id, err)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return charged, nil
}

// resolve moves locked hold n out of "open" and takes it off its account's
// pending, charging charged.
func (l *Ledger) resolve(ctx context.Context, tx *sql.Tx, op string, n int64, account string, amount, charged int64, state string, now time.Time) error {
	res, err := l.db.stmt(ctx, tx, `UPDATE ledger_holds SET state = $2, charged = $3, resolved_at = $4
		WHERE id = $1 AND state = 'open'`).ExecContext(ctx, n, state, charged, now.UnixNano())
	if err != nil {
		return err
	}
	if k, err := res.RowsAffected(); err != nil {
		return err
	} else if k != 1 {
		return fmt.Errorf("%w: %q", capability.ErrReservationResolved, holdID(n))
	}
	return l.unpend(ctx, tx, op, n, account, amount, charged, now)
}

// unpend takes resolved hold n (amount reserved, charged charged) off its
// account's pending credit and records the charge.
func (l *Ledger) unpend(ctx context.Context, tx *sql.Tx, op string, n int64, account string, amount, charged int64, now time.Time) error {
	res, err := l.db.stmt(ctx, tx, `UPDATE ledger_accounts SET balance = balance - $2, pending = pending - $3
		WHERE account = $1 AND pending >= $3 AND balance - $2 >= pending - $3`).ExecContext(ctx, []byte(account), charged, amount)
	if err != nil {
		return err
	}
	if k, err := res.RowsAffected(); err != nil {
		return err
	} else if k != 1 {
		return Corrupt(op, "account %q cannot take hold %s off its pending credit", account, holdID(n))
	}
	if charged > 0 {
		_, err = l.db.stmt(ctx, tx, `INSERT INTO ledger_entries (account, kind, amount, hold_id, created_at)
			VALUES ($1, 'charge', $2, $3, $4)`).ExecContext(ctx, []byte(account), -charged, n, now.UnixNano())
	}
	return err
}

// Settle implements capability.Ledger.
func (l *Ledger) Settle(ctx context.Context, id string, amount int64) (int64, error) {
	if amount < 0 {
		return 0, fmt.Errorf("%w: settlement of %d", capability.ErrInvalidAmount, amount)
	}
	return l.finish(ctx, "ledger settle", id, amount, holdSettled)
}

// Release implements capability.Ledger.
func (l *Ledger) Release(ctx context.Context, id string) error {
	_, err := l.finish(ctx, "ledger release", id, 0, holdReleased)
	return err
}

// finish resolves hold id into state, charging min(amount, reserved). The
// hold's row is taken by a conditional UPDATE (which locks it); only when that
// finds no open hold does a SELECT say why.
func (l *Ledger) finish(ctx context.Context, op, id string, amount int64, state string) (int64, error) {
	n, ok := parseHoldID(id)
	if !ok {
		return 0, fmt.Errorf("%w: %q", capability.ErrUnknownReservation, id)
	}
	now := l.now()
	if l.db.d.WritableCTE() {
		return l.finish1(ctx, op, n, id, amount, state, now)
	}
	var charged int64
	err := l.db.tx(ctx, op, func(tx *sql.Tx) error {
		var (
			account  string
			reserved int64
		)
		err := l.db.stmt(ctx, tx, `UPDATE ledger_holds SET state = $2,
			charged = CASE WHEN $3 < amount THEN $3 ELSE amount END, resolved_at = $4
			WHERE id = $1 AND state = 'open' AND amount > 0 RETURNING account, amount, charged`).
			QueryRowContext(ctx, n, state, amount, now.UnixNano()).Scan(&account, &reserved, &charged)
		if errors.Is(err, sql.ErrNoRows) {
			_, _, _, err = l.lockedHold(ctx, tx, op, id)
			if err == nil {
				err = Corrupt(op, "hold %s could not be resolved", id)
			}
			return err
		}
		if err != nil {
			return err
		}
		return l.unpend(ctx, tx, op, n, account, reserved, charged, now)
	})
	if err != nil {
		return 0, err
	}
	return charged, nil
}

// Balance implements capability.Ledger. An account never credited has zero
// balance.
func (l *Ledger) Balance(ctx context.Context, account string) (available, pending int64, err error) {
	var balance int64
	err = l.db.sql.QueryRowContext(ctx, l.db.q(`SELECT balance, pending FROM ledger_accounts WHERE account = $1`), []byte(account)).
		Scan(&balance, &pending)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, 0, nil
	case err != nil:
		return 0, 0, Unavailable("ledger balance", err)
	case pending < 0 || balance < pending:
		return 0, 0, Corrupt("ledger balance", "account %q has balance %d, pending %d", account, balance, pending)
	}
	return balance - pending, pending, nil
}

// Grant adds amount (> 0) to account as a grant entry. A non-empty key makes
// it idempotent: a key already used by the same grant does nothing more, by
// a different one returns ErrIdempotencyConflict.
func (l *Ledger) Grant(ctx context.Context, account string, amount int64, key string) error {
	if amount <= 0 {
		return fmt.Errorf("%w: grant of %d", capability.ErrInvalidAmount, amount)
	}
	return l.entry(ctx, "ledger grant", account, entryGrant, amount, key, "")
}

// ErrInvalidNote means an adjustment's note is not Storable text: notes are
// kept as text, so every store refuses such a note alike, before anything
// is written.
var ErrInvalidNote = errors.New("store: invalid adjustment note")

// Storable reports whether s is text every store can hold in a text column
// or parameter: UTF-8 without NUL bytes, which Postgres refuses (SQLite
// keeps them).
func Storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// Adjust adds delta (either sign, not zero) to account as an adjustment entry
// with a note saying why (UTF-8 without NUL bytes, else ErrInvalidNote). A
// negative delta may not take the balance below what open holds keep
// (ErrInsufficientCredit). key works as for Grant.
func (l *Ledger) Adjust(ctx context.Context, account string, delta int64, key, note string) error {
	if delta == 0 {
		return fmt.Errorf("%w: adjustment of 0", capability.ErrInvalidAmount)
	}
	if !Storable(note) {
		return fmt.Errorf("%w: it holds a NUL byte or is not UTF-8", ErrInvalidNote)
	}
	return l.entry(ctx, "ledger adjust", account, entryAdjust, delta, key, note)
}

func (l *Ledger) entry(ctx context.Context, op, account, kind string, amount int64, key, note string) error {
	now := l.now()
	return l.db.tx(ctx, op, func(tx *sql.Tx) error {
		if key != "" {
			var (
				acct, k string
				amt     int64
			)
			err := l.db.stmt(ctx, tx, `SELECT account, kind, amount FROM ledger_entries WHERE idem_key = $1`+l.db.d.ForUpdate()).QueryRowContext(ctx, []byte(key)).
				Scan(&acct, &k, &amt)
			if err == nil {
				if acct != account || k != kind || amt != amount {
					return fmt.Errorf("%w: key %q", capability.ErrIdempotencyConflict, key)
				}
				return nil
			} else if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if _, err := l.db.stmt(ctx, tx, `INSERT INTO ledger_accounts (account, balance, pending) VALUES ($1, 0, 0)
			ON CONFLICT (account) DO NOTHING`).ExecContext(ctx, []byte(account)); err != nil {
			return err
		}
		res, err := l.db.stmt(ctx, tx, `UPDATE ledger_accounts SET balance = balance + $2
			WHERE account = $1 AND balance + $2 >= pending AND ($2 < 0 OR balance <= $3 - $2)`).ExecContext(ctx, []byte(account), amount, int64(maxInt64))
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil {
			return err
		} else if k != 1 {
			if amount > 0 {
				return fmt.Errorf("%w: balance of %q would overflow", capability.ErrInvalidAmount, account)
			}
			return fmt.Errorf("%w: adjustment %d would take %q below its held credit", capability.ErrInsufficientCredit, amount, account)
		}
		_, err = l.db.stmt(ctx, tx, `INSERT INTO ledger_entries (account, kind, amount, idem_key, note, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`).ExecContext(ctx, []byte(account), kind, amount, nullKey(key), note, now.UnixNano())
		if err != nil && key != "" && l.db.d.IsUniqueViolation(err) {
			return fmt.Errorf("%w: key %q", capability.ErrIdempotencyConflict, key)
		}
		return err
	})
}

const maxInt64 = 1<<63 - 1

// sweepBatch bounds how many holds one Sweep releases.
const sweepBatch = 1000

// Sweep releases, each in its own transaction, the open holds whose owner's
// lease ended before now, and returns how many it released. A hold whose
// owner renewed meanwhile is left alone. Any process may call it, as often as
// it likes (a few times per Lease is enough); at most sweepBatch holds go per
// call.
func (l *Ledger) Sweep(ctx context.Context, now time.Time) (int, error) {
	rows, err := l.db.sql.QueryContext(ctx, l.db.q(`SELECT h.id FROM ledger_holds h
		LEFT JOIN ledger_owners o ON o.owner = h.owner
		WHERE h.state = 'open' AND (o.lease_until IS NULL OR o.lease_until < $1) ORDER BY h.id LIMIT $2`),
		now.UnixNano(), sweepBatch)
	if err != nil {
		return 0, Unavailable("ledger sweep", err)
	}
	var ids []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return 0, Unavailable("ledger sweep", err)
		}
		ids = append(ids, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, Unavailable("ledger sweep", err)
	}
	released := 0
	for _, n := range ids {
		err := l.db.tx(ctx, "ledger sweep", func(tx *sql.Tx) error {
			_, account, amount, err := l.lockedHold(ctx, tx, "ledger sweep", holdID(n))
			if err != nil {
				return err
			}
			// The owner may have renewed since the query above.
			var until sql.NullInt64
			err = l.db.stmt(ctx, tx, `SELECT o.lease_until FROM ledger_holds h
				LEFT JOIN ledger_owners o ON o.owner = h.owner WHERE h.id = $1`).QueryRowContext(ctx, n).Scan(&until)
			if err != nil {
				return err
			}
			if until.Valid && until.Int64 >= now.UnixNano() {
				return errLive
			}
			return l.resolve(ctx, tx, "ledger sweep", n, account, amount, 0, holdSwept, now)
		})
		switch {
		case err == nil:
			released++
		case errors.Is(err, errLive), errors.Is(err, capability.ErrReservationResolved):
		default:
			return released, err
		}
	}
	return released, nil
}

var errLive = &Error{Code: "live"}

// Outstanding returns how many holds are open, across all accounts.
func (l *Ledger) Outstanding(ctx context.Context) (int, error) {
	var n int
	if err := l.db.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_holds WHERE state = 'open'`).Scan(&n); err != nil {
		return 0, Unavailable("ledger outstanding", err)
	}
	return n, nil
}

// Check proves the cached sums right: for every account, the balance equals
// the sum of its entries, the pending amount equals the sum of its open holds,
// and neither is negative nor pending above balance. It returns an error
// matching ErrCorrupt naming the first account that fails.
func (l *Ledger) Check(ctx context.Context) error {
	rows, err := l.db.sql.QueryContext(ctx, `SELECT a.account, a.balance, a.pending,
		CAST(COALESCE(e.total, 0) AS BIGINT), CAST(COALESCE(h.total, 0) AS BIGINT)
		FROM ledger_accounts a
		LEFT JOIN (SELECT account, SUM(amount) AS total FROM ledger_entries GROUP BY account) e ON e.account = a.account
		LEFT JOIN (SELECT account, SUM(amount) AS total FROM ledger_holds WHERE state = 'open' GROUP BY account) h ON h.account = a.account
		ORDER BY a.account`)
	if err != nil {
		return Unavailable("ledger check", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			account                   string
			balance, pending, sum, op int64
		)
		if err := rows.Scan(&account, &balance, &pending, &sum, &op); err != nil {
			return Unavailable("ledger check", err)
		}
		switch {
		case balance != sum:
			return Corrupt("ledger check", "account %q: cached balance %d, entries sum to %d", account, balance, sum)
		case pending != op:
			return Corrupt("ledger check", "account %q: cached pending %d, open holds sum to %d", account, pending, op)
		case pending < 0 || balance < pending:
			return Corrupt("ledger check", "account %q: balance %d, pending %d", account, balance, pending)
		}
	}
	if err := rows.Err(); err != nil {
		return Unavailable("ledger check", err)
	}
	return nil
}
