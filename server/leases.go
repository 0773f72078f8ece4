package server

import (
	"context"
	"time"

	"github.com/wasmhooks/wasmhooks/store"
)

// leaseTTL is how long a lease of serve_leases outlives its last renewal
// (store.DefaultLease, 30 s, as the ledger's credit holds): what a node that
// died held in flight is counted that long at most.
const leaseTTL = store.DefaultLease

// startLease counts one more of what is in flight under name (a
// publisher's uploads, a key's open waits, a tenant's audit
// verification), on every node sharing the database, and returns
// its end; ok is false when name has max in flight already. A negative max
// is no bound: nothing is written. The count and the insert are one
// transaction holding name's lock (lockName), after the leases whose
// expiry passed (their node died) are deleted. While the caller runs, the
// lease is renewed every leaseTTL/3; end stops that and deletes it. Expiries
// are written and compared in nowSQL's clock: the database's on Postgres,
// where the nodes' may disagree.
func (s *Server) startLease(ctx context.Context, name string, max int) (end func(), ok bool, err error) {
	if max < 0 {
		return func() {}, true, nil
	}
	id := randomID(12)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	if err := lockName(ctx, tx, "lease:"+name); err != nil {
		return nil, false, err
	}
	now := s.db.nowSQL()
	if _, err := tx.ExecContext(ctx, `DELETE FROM serve_leases WHERE name = ? AND expires < `+now, append([]any{name}, s.db.nowArgs(s.clock())...)...); err != nil {
		return nil, false, err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_leases WHERE name = ?`, name).Scan(&n); err != nil {
		return nil, false, err
	}
	if n >= max {
		return nil, false, nil
	}
	s.testHook("lease counted")
	if _, err := tx.ExecContext(ctx, `INSERT INTO serve_leases (name, id, expires) VALUES (?, ?, `+now+` + ?)`,
		append(append([]any{name, id}, s.db.nowArgs(s.clock())...), int64(leaseTTL))...); err != nil {
		return nil, false, err
	}
	if err := tx.Commit(); err != nil {
		return nil, false, err
	}
	renew, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		every(renew, leaseTTL/3, func(ctx context.Context) {
			if _, err := s.db.ExecContext(ctx, `UPDATE serve_leases SET expires = `+now+` + ? WHERE name = ? AND id = ?`,
				append(s.db.nowArgs(s.clock()), int64(leaseTTL), name, id)...); err != nil && ctx.Err() == nil {
				s.log.Warn("server: renewing a lease", "name", name, "err", err)
			}
		})
	}()
	return func() {
		stop()
		<-stopped
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := s.db.ExecContext(dctx, `DELETE FROM serve_leases WHERE name = ? AND id = ?`, name, id); err != nil {
			s.log.Warn("server: ending a lease (it expires in its time)", "name", name, "err", err)
		}
	}, true, nil
}

// sweepLimits deletes (from sweepOnce) the rows of the shared limits that
// hold nothing an absent row would not: the rate buckets full again for an
// hour (a revoked key's among them), the leases expired for an hour (a
// dead node's, under a name nobody started anything under since), and the
// lock rows no transaction holds (lockName upserts its row again; each
// key that ever waited and each publisher that ever uploaded left one for
// ever, a revoked key's too). Only keeps the tables small: buckets and
// leases are read as absent, or expired, anyway. On Postgres the rows
// another transaction holds are skipped, not waited for, so the sweep
// never waits for a row lock and cannot deadlock: a lease start deleting
// its name's expired leases in the index's order, while the sweep deleted
// them in the table's, could each hold a row the other waited for
// (Postgres failed one: the lease start's 503); and a sweep waiting for
// one publisher's upload held the rows it had deleted, which every other
// name's transactions then waited for. See
// RATIONALE.md#why-a-shared-rate-limit.
func (s *Server) sweepLimits(ctx context.Context) {
	now := s.db.nowSQL()
	hourAgo := append(s.db.nowArgs(s.clock()), int64(time.Hour))
	for _, t := range []struct {
		table, key, where string
		args              []any
	}{
		{"serve_rate_buckets", "key_id", `tat < ` + now + ` - ?`, hourAgo},
		{"serve_leases", "name, id", `expires < ` + now + ` - ?`, hourAgo},
		{"serve_locks", "name", "TRUE", nil}, // SQLite: the write lock is the database's
	} {
		q := `DELETE FROM ` + t.table + ` WHERE ` + t.where
		if s.db.pg {
			q = `DELETE FROM ` + t.table + ` WHERE (` + t.key + `) IN (SELECT ` + t.key + ` FROM ` + t.table + ` WHERE ` + t.where + ` FOR UPDATE SKIP LOCKED)`
		}
		if _, err := s.db.ExecContext(ctx, q, t.args...); err != nil && ctx.Err() == nil {
			s.log.Warn("server: sweeping the shared limits", "table", t.table, "err", err)
		}
	}
}
