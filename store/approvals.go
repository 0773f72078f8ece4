package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
)

// ApprovalOptions configures an Approvals. The zero value is ready to use.
type ApprovalOptions struct {
	// Owner names this process's claims. Empty means a random name, which
	// is what every process should use.
	Owner string
	// Lease is how long a claim holds before another process may claim
	// the approval again. Zero means chain.DefaultApprovalLease (30 s).
	Lease time.Duration
	// Now is the clock of leases; nil means time.Now. Leases compare times
	// written by different machines: keep clocks well within the lease.
	Now func() time.Time
}

// Approvals is a chain.ApprovalStore kept in a database, shared by every
// process that opens it. Each approval is a row stored as the chain sealed
// it; Take claims it by one conditional UPDATE (pending, or claimed by a
// lease that has ended), so of processes resuming it at once one wins; Done
// turns the claim into a tombstone; a process that dies between the two
// leaves the approval claimable again once its lease ends.
type Approvals struct {
	db    *DB
	owner []byte
	lease time.Duration
	now   func() time.Time
}

var _ chain.ApprovalStore = (*Approvals)(nil)

// NewApprovals returns the approval store of db.
func NewApprovals(db *DB, opts ApprovalOptions) *Approvals {
	a := &Approvals{db: db, owner: []byte(opts.Owner), lease: opts.Lease, now: opts.Now}
	if len(a.owner) == 0 {
		var b [12]byte
		_, _ = rand.Read(b[:])
		a.owner = []byte("p-" + hex.EncodeToString(b[:]))
	}
	if a.lease <= 0 {
		a.lease = chain.DefaultApprovalLease
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

const (
	apPending = "pending"
	apClaimed = "claimed"
	apDone    = "done"
)

// exec runs one statement, retrying it on retryable errors, and returns the
// rows it changed.
func (s *Approvals) exec(ctx context.Context, op, query string, args ...any) (int64, error) {
	var n int64
	err := s.db.retry(ctx, op, func() error {
		r, err := s.db.sql.ExecContext(ctx, s.db.q(query), args...)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return n, err
}

// Put implements chain.ApprovalStore. An id claimed or resolved is refused.
func (s *Approvals) Put(ctx context.Context, a *chain.Approval) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	n, err := s.exec(ctx, "approvals put", `INSERT INTO approvals (id, state, data, expires_at) VALUES ($1, 'pending', $2, $3)
		ON CONFLICT (id) DO UPDATE SET data = excluded.data, expires_at = excluded.expires_at
		WHERE approvals.state = 'pending'`, []byte(a.ID), b, a.Expires.UnixNano())
	if err != nil {
		return err
	}
	if n == 0 {
		return s.why(ctx, a.ID, "approvals put")
	}
	return nil
}

// Get implements chain.ApprovalStore.
func (s *Approvals) Get(ctx context.Context, id string) (*chain.Approval, error) {
	var (
		state string
		data  []byte
		lease sql.NullInt64
	)
	err := s.db.retry(ctx, "approvals get", func() error {
		return s.db.sql.QueryRowContext(ctx, s.db.q(`SELECT state, data, lease_until FROM approvals WHERE id = $1`), []byte(id)).Scan(&state, &data, &lease)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%w: %q", chain.ErrUnknownApproval, id)
	case err != nil:
		return nil, err
	case state == apDone:
		return nil, refusal(id, chain.ApprovalResolved)
	case state == apClaimed && lease.Int64 > s.now().UnixNano():
		return nil, refusal(id, chain.ApprovalClaimed)
	}
	return chain.DecodeApproval(id, data)
}

// Take implements chain.ApprovalStore: one conditional UPDATE claims the
// approval if it is pending or its claim's lease has ended.
func (s *Approvals) Take(ctx context.Context, id string) (*chain.Approval, error) {
	now := s.now().UnixNano()
	var data []byte
	err := s.db.retry(ctx, "approvals take", func() error {
		return s.db.sql.QueryRowContext(ctx, s.db.q(`UPDATE approvals SET state = 'claimed', owner = $2, lease_until = $3
			WHERE id = $1 AND (state = 'pending' OR (state = 'claimed' AND lease_until <= $4))
			RETURNING data`), []byte(id), s.owner, now+int64(s.lease), now).Scan(&data)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, s.why(ctx, id, "approvals take")
	case err != nil:
		return nil, err
	}
	a, err := chain.DecodeApproval(id, data)
	if err != nil {
		// Left claimable as it was: pending again.
		_, _ = s.exec(context.WithoutCancel(ctx), "approvals take", `UPDATE approvals SET state = 'pending', owner = NULL, lease_until = NULL
			WHERE id = $1 AND state = 'claimed' AND owner = $2`, []byte(id), s.owner)
		return nil, err
	}
	return a, nil
}

// Release implements chain.ApprovalStore.
func (s *Approvals) Release(ctx context.Context, id string, a *chain.Approval) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	n, err := s.exec(ctx, "approvals release", `UPDATE approvals SET state = 'pending', owner = NULL, lease_until = NULL, data = $3, expires_at = $4
		WHERE id = $1 AND state = 'claimed' AND owner = $2`, []byte(id), s.owner, b, a.Expires.UnixNano())
	if err != nil {
		return err
	}
	if n == 0 {
		return s.why(ctx, id, "approvals release")
	}
	return nil
}

// Done implements chain.ApprovalStore: the claim, if still this process's,
// becomes a tombstone.
func (s *Approvals) Done(ctx context.Context, id string) error {
	n, err := s.exec(ctx, "approvals done", `UPDATE approvals SET state = 'done', data = NULL, owner = NULL, lease_until = NULL
		WHERE id = $1 AND state = 'claimed' AND owner = $2`, []byte(id), s.owner)
	if err != nil {
		return err
	}
	if n == 0 {
		return s.why(ctx, id, "approvals done")
	}
	return nil
}

// Due implements chain.ApprovalStore.
func (s *Approvals) Due(ctx context.Context, now time.Time) ([]string, error) {
	var ids []string
	err := s.db.retry(ctx, "approvals due", func() error {
		ids = ids[:0]
		rows, err := s.db.sql.QueryContext(ctx, s.db.q(`SELECT id FROM approvals
			WHERE state <> 'done' AND expires_at <= $1 AND (state = 'pending' OR lease_until <= $2)
			ORDER BY id`), now.UnixNano(), s.now().UnixNano())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id []byte
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, string(id))
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// why says why a conditional statement on id changed nothing.
func (s *Approvals) why(ctx context.Context, id, op string) error {
	var (
		state string
		owner []byte
		lease sql.NullInt64
	)
	err := s.db.retry(ctx, op, func() error {
		return s.db.sql.QueryRowContext(ctx, s.db.q(`SELECT state, owner, lease_until FROM approvals WHERE id = $1`), []byte(id)).Scan(&state, &owner, &lease)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %q", chain.ErrUnknownApproval, id)
	case err != nil:
		return err
	case state == apDone:
		return refusal(id, chain.ApprovalResolved)
	case state == apClaimed:
		return refusal(id, chain.ApprovalClaimed)
	case state == apPending:
		return fmt.Errorf("%w: %q is not claimed by this process", chain.ErrUnknownApproval, id)
	}
	return &Error{Code: CodeCorrupt, Op: op, Msg: fmt.Sprintf("approval %q has state %q", id, state)}
}

func refusal(id, code string) error {
	reason := "it was resolved already"
	if code == chain.ApprovalClaimed {
		reason = "another resume holds it; it can be resumed again if that one does not finish within its lease"
	}
	return &chain.ApprovalError{ID: id, Code: code, Reason: reason}
}
