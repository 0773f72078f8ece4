package server

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/store"
)

// What several servers on one database tell each other (store.DB.Notify;
// Postgres's NOTIFY, delivered when the change commits). Every notification
// has a backstop that reads the database again, so one lost with a
// connection delays a change but never loses it.
const (
	// chanBindings carries a tenant whose binding changed; backstop: the
	// versions compared every SyncInterval.
	chanBindings = "wasmhooks_bindings"
	// chanApprovals carries an approval id that resolved; backstop: a
	// long poll reads the index again every pollEvery.
	chanApprovals = "wasmhooks_approvals"
	// chanRuns carries "tenant/run" of a run id whose claim was given up
	// (its run failed), so that a request waiting on another node runs it
	// at once; a stored outcome is not announced (finishRun): waiters read
	// again every pollEvery.
	chanRuns = "wasmhooks_runs"
	// chanKeys says an API key was revoked or rotated: every node forgets
	// the keys it cached (keycache.go); backstop: KeyCacheTTL.
	chanKeys = "wasmhooks_keys"
)

// pollEvery is how often a long poll or a run waiting for another node's
// claim reads the database again when no notification came.
const pollEvery = 500 * time.Millisecond

// listenLoop listens for the other nodes' notifications until ctx ends,
// again after a failure (a second later). On a database without
// notifications (SQLite) it returns at once: the backstops do the work.
func (s *Server) listenLoop(ctx context.Context) {
	for {
		err := s.sdb.Listen(ctx, []string{chanBindings, chanApprovals, chanRuns, chanKeys}, func() {
			// Notifications sent while this node was not listening are
			// lost: read the bindings again now, and the keys.
			s.keys.invalidate()
			s.background(func() { _ = s.syncBindings(ctx) })
		}, s.notified)
		if errors.Is(err, store.ErrNoNotifications) || ctx.Err() != nil {
			return
		}
		s.log.Warn("server: listening for the other nodes' notifications; again in 1s", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// notified handles one notification. It must not block: the listener's
// connection waits meanwhile.
func (s *Server) notified(channel, payload string) {
	switch channel {
	case chanBindings:
		s.background(func() {
			ctx, cancel := context.WithTimeout(s.bgCtx, s.opts.RunTimeout)
			defer cancel()
			if err := s.reloadTenant(ctx, payload); err != nil && ctx.Err() == nil {
				s.log.Warn("server: reloading a binding another node changed", "tenant", payload, "err", err)
			}
		})
	case chanApprovals:
		s.wake(payload)
	case chanRuns:
		tenant, run, _ := strings.Cut(payload, "/")
		s.wake(runWaitKey(tenant, run))
	case chanKeys:
		s.keys.invalidate()
	}
}

// notify sends a notification to the other nodes, in tx when it is not nil
// (delivered when it commits); a failure is logged, the backstops cover it.
func (s *Server) notify(ctx context.Context, tx *sqlTx, channel, payload string) {
	var ex store.Execer
	if tx != nil {
		ex = tx.Tx
	}
	if err := s.sdb.Notify(ctx, ex, channel, payload); err != nil {
		s.log.Warn("server: notifying the other nodes", "channel", channel, "err", err)
	}
}

// syncOnce is one pass of syncBindings (every SyncInterval, from New),
// its error logged: the next pass tries again.
func (s *Server) syncOnce(ctx context.Context) {
	if err := s.syncBindings(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("server: reading the bindings' versions", "err", err)
	}
}

// syncBindings reloads every tenant whose binding's version is not the one
// its chain runs: the backstop of chanBindings, and at start the load. A
// tenant it fails to reload is logged, and tried again at the next sync.
func (s *Server) syncBindings(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT tenant, version FROM serve_bindings`)
	if err != nil {
		return err
	}
	var stale []string
	for rows.Next() {
		var (
			tenant string
			v      int64
		)
		if err := rows.Scan(&tenant, &v); err != nil {
			rows.Close()
			return err
		}
		s.mu.Lock()
		have, ok := s.versions[tenant]
		s.mu.Unlock()
		if !ok || have != v {
			stale = append(stale, tenant)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, tenant := range stale {
		if err := s.reloadTenant(ctx, tenant); err != nil && ctx.Err() == nil {
			s.log.Warn("server: reloading a binding another node changed", "tenant", tenant, "err", err)
		}
	}
	return nil
}

// reloadTenant builds tenant's chain from its stored binding, unless it runs
// that version already, checking pins and signatures again. A binding this
// node refuses (a tenant that now requires signatures) is logged, and the
// tenant has no chain here until it binds again: a node never keeps running
// a binding the platform replaced. An error is a failure to read it, to be
// tried again.
func (s *Server) reloadTenant(ctx context.Context, tenant string) error {
	defer s.bindLocks.Lock(tenant)()
	var (
		config string
		v      int64
	)
	err := s.db.QueryRowContext(ctx, `SELECT config, version FROM serve_bindings WHERE tenant = ?`, tenant).Scan(&config, &v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	have, ok := s.versions[tenant]
	c := s.chains[tenant]
	s.mu.Unlock()
	if ok && have == v {
		return nil
	}
	cfg, p := s.parseBinding(ctx, tenant, []byte(config))
	if p != nil && p.Status == http.StatusInternalServerError {
		return errors.New(p.Detail)
	}
	if p == nil {
		if c == nil {
			c, err = chain.New(ctx, cfg, s.chainOptions())
		} else {
			err = c.Reload(ctx, cfg)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		if p == nil && err == nil {
			go c.Close(context.Background())
		}
		return nil
	}
	s.versions[tenant] = v
	if p != nil || err != nil {
		s.log.Error("server: a tenant's stored chain is refused here; it has no chain on this node until it binds again",
			"tenant", tenant, "version", v, "problem", p, "err", err)
		if old := s.chains[tenant]; old != nil {
			delete(s.chains, tenant)
			s.background(func() { old.Close(context.Background()) }) // its runs in flight finish first
		}
		return nil
	}
	s.chains[tenant] = c
	return nil
}

// runWaitKey is the waiters' key of a run id of tenant.
func runWaitKey(tenant, run string) string { return "run\x00" + tenant + "\x00" + run }

// claimRun returns the stored outcome of tenant's run id, or claims the id
// for this node (nil, nil): then the caller runs it and calls finishRun, or
// dropRun if it fails. While another node (or request) holds the claim it
// waits, up to RunTimeout, for its outcome; a claim whose holder died is
// taken over once its lease (twice RunTimeout) ends.
func (s *Server) claimRun(ctx context.Context, tenant, run string) ([]byte, *Problem) {
	deadline := time.NewTimer(s.opts.RunTimeout)
	defer deadline.Stop()
	key := runWaitKey(tenant, run)
	// A waiter made here is dropped on the way out, whatever the way: the
	// node that stores the outcome does not announce it, so nobody else
	// closes it. (Requests for one run id are one at a time per process,
	// runLock, so it is this request's alone.)
	waited := false
	defer func() {
		if waited {
			s.wake(key)
		}
	}()
	for {
		// Claim first, then read: a fresh run id (the common case) takes
		// two statements.
		now := time.Now()
		res, err := s.db.ExecContext(ctx, `INSERT INTO serve_run_claims (tenant, run, owner, lease_until) VALUES (?, ?, ?, ?)
			ON CONFLICT (tenant, run) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
			WHERE serve_run_claims.lease_until <= ?`, tenant, run, s.owner, now.Add(2*s.opts.RunTimeout).UnixNano(), now.UnixNano())
		if err != nil {
			return nil, s.internal(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, s.internal(err)
		}
		claimed := n == 1
		stored, err := s.storedRun(ctx, tenant, run)
		if err != nil || stored != nil {
			if claimed {
				s.dropRun(context.WithoutCancel(ctx), tenant, run)
			}
			return stored, s.maybeInternal(err)
		}
		if claimed {
			return nil, nil
		}
		ch := s.waiter(key)
		waited = true
		select {
		case <-ch:
		case <-time.After(pollEvery):
		case <-deadline.C:
			return nil, problem(http.StatusConflict, CodeRunInProgress, "run %s is being run by another request; ask again later", run)
		case <-ctx.Done():
			return nil, problem(http.StatusServiceUnavailable, CodeShuttingDown, "the request ended")
		}
	}
}

func (s *Server) maybeInternal(err error) *Problem {
	if err == nil {
		return nil
	}
	return s.internal(err)
}

// storedRun returns the outcome stored for tenant's run id, nil if none.
func (s *Server) storedRun(ctx context.Context, tenant, run string) ([]byte, error) {
	var stored string
	err := s.db.QueryRowContext(ctx, `SELECT outcome FROM serve_runs WHERE tenant = ? AND run = ?`, tenant, run).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return []byte(stored), nil
}

// finishRun stores doc as the outcome of tenant's run id, then gives up
// the claim. It returns the outcome stored: doc, or the first one's if the
// claim's lease had ended and another node ran it too. No transaction and no
// notification, so a run with an id costs two statements more than one
// without (claim, read; store, release): a claim left behind by a crash
// between the two is harmless (the stored outcome is found first), and a
// request on another node waiting for this id (a client's retry, rare)
// reads again within pollEvery.
func (s *Server) finishRun(ctx context.Context, tenant, run string, doc []byte) ([]byte, error) {
	stored := doc
	err := s.retryDB(ctx, func() error {
		res, err := s.db.ExecContext(ctx, `INSERT INTO serve_runs (tenant, run, outcome) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, tenant, run, string(doc))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 { // another node ran it too (this claim's lease ended): the first outcome stands
			var out string
			if err := s.db.QueryRowContext(ctx, `SELECT outcome FROM serve_runs WHERE tenant = ? AND run = ?`, tenant, run).Scan(&out); err != nil {
				return err
			}
			stored = []byte(out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM serve_run_claims WHERE tenant = ? AND run = ? AND owner = ?`, tenant, run, s.owner); err != nil {
		s.log.Warn("server: giving up a finished run's claim; the stored outcome answers anyway", "tenant", tenant, "run", run, "err", err)
	}
	s.wake(runWaitKey(tenant, run))
	return stored, nil
}

// dropRun gives up this node's claim on tenant's run id, which stored no
// outcome (the run failed), so that the id can be run again at once.
func (s *Server) dropRun(ctx context.Context, tenant, run string) {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM serve_run_claims WHERE tenant = ? AND run = ? AND owner = ?`, tenant, run, s.owner); err != nil {
		s.log.Warn("server: giving up a run claim; it ends with its lease", "tenant", tenant, "run", run, "err", err)
		return
	}
	s.notify(ctx, nil, chanRuns, tenant+"/"+run)
	s.wake(runWaitKey(tenant, run))
}

// retryDB runs fn up to 5 times, 100 ms, 200 ms... apart, while it fails
// and ctx lasts: for writes that must follow an effect already made (an
// outcome after its run, an approval's index after the store's Done), where
// giving up at the first error of a busy database loses the record.
func (s *Server) retryDB(ctx context.Context, fn func() error) error {
	var err error
	for attempt := range 5 {
		if err = fn(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		}
	}
	return err
}

// sweepOnce releases (every store.DefaultLease/3, from New) the credit holds of nodes
// that stopped renewing their lease (killed mid-run): without it their
// reservations stayed pending for ever, the credit unavailable. Every node
// sweeps; the ledger's transactions make that safe. It also deletes the run
// claims of dead nodes an hour after their lease ended (a claim is taken
// over at once when its run id is posted again; this only keeps the table
// small), and the shared limits' rows that hold nothing (sweepLimits).
func (s *Server) sweepOnce(ctx context.Context) {
	if n, err := s.ledger.Sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
		s.log.Warn("server: releasing the credit holds of stopped nodes", "err", err)
	} else if n > 0 {
		s.log.Info("server: released the credit holds of stopped nodes", "holds", n)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM serve_run_claims WHERE lease_until < ?`, time.Now().Add(-time.Hour).UnixNano()); err != nil && ctx.Err() == nil {
		s.log.Warn("server: deleting the run claims of stopped nodes", "err", err)
	}
	s.sweepLimits(ctx)
}

// statusUnrecorded is an approval's status in the index when the store
// resolved it but no outcome was recorded (ResultDoc).
const statusUnrecorded = "unrecorded"

// indexedApprovals is the approval store the chains use: the server's, with
// each resolution's time (Done) written to the index, so that an approval
// whose resuming node died before recording the outcome can be told apart
// from one being resumed (markUnrecorded).
type indexedApprovals struct {
	chain.ApprovalStore
	s *Server
}

func (a indexedApprovals) Done(ctx context.Context, id string) error {
	if err := a.ApprovalStore.Done(ctx, id); err != nil {
		return err
	}
	if _, err := a.s.db.ExecContext(ctx, `UPDATE serve_approvals SET done_at = ? WHERE id = ? AND status = 'pending'`, time.Now().UnixNano(), id); err != nil {
		a.s.log.Warn("server: noting an approval's resolution in the index", "id", id, "err", err)
	}
	return nil
}

// markUnrecorded gives up on the approvals resolved (Done) more than
// deadAfter ago whose outcome was never recorded: the node resuming them
// died (or its database failed past finishResolution's retries). They
// become unrecorded, and their waiters, on every node, are told so instead
// of waiting for ever.
func (s *Server) markUnrecorded(ctx context.Context) {
	cutoff := time.Now().Add(-s.deadAfter()).UnixNano()
	rows, err := s.db.QueryContext(ctx, `UPDATE serve_approvals SET status = 'unrecorded'
		WHERE status = 'pending' AND done_at IS NOT NULL AND done_at < ? RETURNING id, tenant`, cutoff)
	if err != nil {
		s.log.Warn("server: marking unrecorded approvals", "err", err)
		return
	}
	var ids []string
	for rows.Next() {
		var id, tenant string
		if rows.Scan(&id, &tenant) == nil {
			ids = append(ids, id)
			s.log.Error("server: an approval was resolved but its outcome never recorded (the node resuming it stopped); it is unrecorded, its audit chain has the resolution",
				"tenant", tenant, "id", id)
		}
	}
	rows.Close()
	for _, id := range ids {
		s.notify(ctx, nil, chanApprovals, id)
		s.wake(id)
	}
}

// deadNodeGrace is added to twice RunTimeout (deadAfter) before a node is
// taken for dead between a step of the approval store and the index's write
// that follows it (10 s): the retries of that write (retryDB, 3.1 s of
// waits) and clocks a few seconds apart.
const deadNodeGrace = 10 * time.Second

// deadAfter is how long after the approval store's Put (an approval's
// Created) or Done a node that has not written the index's row yet is taken
// for dead: twice RunTimeout, the lease of a run id's claim (the run asks
// within RunTimeout, and recordPending runs under the run's deadline), plus
// deadNodeGrace. 70 s with the default RunTimeout.
func (s *Server) deadAfter() time.Duration { return 2*s.opts.RunTimeout + deadNodeGrace }

// indexStranded indexes, as recordPending would have, the approvals the
// approval store holds unresolved but the index lacks, made before cutoff
// (the expiry pass: deadAfter ago): their node died, or its database
// failed, between the chain's Put and recordPending's insert. Without it
// such an approval could not be listed, read, resolved or expired, and the
// run id, posted again after its claim's lease, ran again and made another.
// Every node runs it; the insert does nothing for an id the index has, so
// two nodes at once index it once. Only the database's store
// (store.Approvals) can be listed so: with another ApprovalStore it does
// nothing.
//
// The run id's stored outcome (serve_runs) is left as it is: the run that
// stopped stored none, and the outcome it would have returned (its trace,
// configuration digest, notifications) cannot be rebuilt from the
// approval, so none is made up. A client that posts the run id again
// before this pass (its claim's lease has ended) runs it again and stores
// that run's outcome, with a second approval: both are pending, each its
// own sealed pause of the run, listed with the same run id and resolved on
// its own (the outcome of each resume is recorded on its own row, and the
// stored outcome of the run id stays the second run's). SECURITY.md.
func (s *Server) indexStranded(ctx context.Context, cutoff time.Time) {
	if _, ok := s.opts.Approvals.(*store.Approvals); !ok {
		return
	}
	// Only the store's unresolved rows are read (through its partial index
	// approvals_due, not its tombstones), each looked up in the index by
	// its key; the store keeps ids as bytes, the index as text.
	id := `CAST(a.id AS TEXT)`
	if s.db.pg {
		id = `convert_from(a.id, 'UTF8')`
	}
	type stored struct{ id, data []byte }
	all, err := queryAll(ctx, s.db, func(rows *sql.Rows) (r stored, err error) {
		err = rows.Scan(&r.id, &r.data)
		return
	}, `SELECT a.id, a.data FROM approvals a WHERE a.state <> 'done'
		AND NOT EXISTS (SELECT 1 FROM serve_approvals i WHERE i.id = `+id+`)`)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("server: listing the approvals the index lacks", "err", err)
		}
		return
	}
	for _, r := range all {
		a, err := chain.DecodeApproval(string(r.id), r.data)
		switch {
		case err != nil:
			s.log.Warn("server: an approval the index lacks does not decode; not indexed", "id", string(r.id), "err", err)
			continue
		case a.ID != string(r.id) || a.Tenant == "" || a.Run == "":
			s.log.Warn("server: an approval the index lacks names another id, or no tenant or run; not indexed", "id", string(r.id), "approval", a.ID, "tenant", a.Tenant, "run", a.Run)
			continue
		case !a.Created.Before(cutoff):
			continue // its node may be indexing it now
		}
		if err := s.indexApproval(ctx, a); err != nil {
			s.log.Warn("server: indexing an approval its node left unindexed", "tenant", a.Tenant, "id", a.ID, "err", err)
			continue
		}
		s.log.Warn("server: indexed an approval its node left unindexed (it stopped between storing and indexing it)", "tenant", a.Tenant, "run", a.Run, "id", a.ID)
	}
}
