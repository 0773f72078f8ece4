package server_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
)

// raceAt makes the first request through point on each of cl's two nodes
// wait there until the other node's is through it too (both in: the race
// lost), or, if it is not within a grace, takes it as waiting for a lock
// and goes on. The grace only makes the race certain when nothing locks;
// with a lock the answer is the same whatever the timing.
func raceAt(cl *cluster, point string) {
	for i, h := range raceHooks(point) {
		server.SetHook(cl.nodes[i].srv, h)
	}
}

// raceHooks is what raceAt makes each node's hook (a test that needs
// other points too calls them from its own).
func raceHooks(point string) (hooks [2]func(string)) {
	var at [2]chan struct{}
	var once [2]sync.Once
	for i := range hooks {
		at[i] = make(chan struct{})
		hooks[i] = func(p string) {
			if p != point {
				return
			}
			first := false
			once[i].Do(func() { first = true; close(at[i]) })
			if !first {
				return
			}
			select {
			case <-at[1-i]:
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
	return hooks
}

// raceTwo runs do on node 0 and node 1 at once and returns how many
// passed; every other answer must be 403 quota_exceeded.
func raceTwo(t *testing.T, do func(node int) error) (passed int) {
	t.Helper()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = do(i)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var p *server.Problem
		switch {
		case err == nil:
			passed++
		case !errors.As(err, &p) || p.Status != 403 || p.Code != server.CodeQuotaExceeded:
			t.Errorf("on node %d: %v", i, err)
		}
	}
	return passed
}

// variant returns wasm with a custom section holding i: the same module,
// another digest.
func variant(wasm []byte, i int) []byte {
	return append(append([]byte(nil), wasm...), 0x00, 0x03, 0x01, 'v', byte(i))
}

// TestUploadQuotaAcrossNodes: a publisher with one module left of its
// quota uploads two others at once, one on each of two nodes sharing the
// database; exactly one is stored, the other is 403 quota_exceeded. The
// nodes' hooks hold the first upload through the exact quota check there
// until the other is through it too, or waits (raceAt). Each node used to check
// under a lock of its own process, so both passed (three stored); now the
// check and the insert are one transaction holding the publisher's lock
// row, and the second upload waits for the first's commit, then sees the
// quota spent.
func TestUploadQuotaAcrossNodes(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, db string) {
		ctx := context.Background()
		cl := twoNodes(t, db, func(o *server.Options) {
			o.UploadQuota = server.UploadQuota{MaxModules: 2, MaxInFlight: -1}
			// In memory: a shared bucket is a write, which on SQLite would
			// wait for the upload holding the write lock in its hook.
			o.RateLimitScope = server.RateLimitNode
		})
		pub := cl.nodes[0].key(t, server.RolePublisher, "pubco")
		if _, err := pub.UploadModule(ctx, "pubco", policyWasm(t)); err != nil {
			t.Fatal(err)
		}
		raceAt(cl, "upload checked")
		scripted := guestWasm(t, "scripted")
		stored := raceTwo(t, func(i int) error {
			_, err := on(pub, cl.nodes[i]).UploadModule(ctx, "pubco", variant(scripted, i))
			return err
		})
		n := queryValue[int](t, cl.nodes[0], `SELECT COUNT(*) FROM serve_uploads WHERE publisher = $1`, "pubco")
		if stored != 1 || n != 2 {
			t.Fatalf("%d of 2 racing uploads answered 201, %d modules stored; want 1 and 2 (the quota)", stored, n)
		}
	})
}

// TestUploadsInFlightAcrossNodes: a publisher's uploads in flight are
// counted on every node sharing the database: with one allowed, an upload
// on node 1 while one on node 0 is still arriving is 429 rate_limited
// (each node counted its own: 201), and passes once that one has ended. A
// lease whose node died (its expiry past) counts no more; a live one of
// another node (written here) does.
func TestUploadsInFlightAcrossNodes(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, db string) {
		ctx := context.Background()
		cl := twoNodes(t, db, func(o *server.Options) { o.UploadQuota = server.UploadQuota{MaxInFlight: 1} })
		pub := cl.nodes[0].key(t, server.RolePublisher, "pubco")
		inFlight, ended := make(chan struct{}), make(chan struct{})
		server.SetHook(cl.nodes[0].srv, func(point string) {
			switch point {
			case "upload in flight":
				close(inFlight)
			case "upload ended":
				close(ended)
			}
		})
		// Node 0's upload: headers saying 1 MiB, 64 KiB of it sent.
		conn, err := net.Dial("tcp", cl.nodes[0].hs.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/publishers/pubco/modules HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/wasm\r\nContent-Length: %d\r\n\r\n", pub.Key, 1<<20)
		if _, err := conn.Write(make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		<-inFlight
		node1 := on(pub, cl.nodes[1])
		policy := policyWasm(t)
		_, err = node1.UploadModule(ctx, "pubco", policy)
		wantCode(t, err, 429, server.CodeRateLimited)
		conn.Close()
		<-ended
		if _, err := node1.UploadModule(ctx, "pubco", policy); err != nil {
			t.Fatalf("once node 0's upload ended: %v", err)
		}
		// Another node's live lease, then the same lease expired.
		p := cl.nodes[1]
		p.exec(t, `INSERT INTO serve_leases (name, id, expires) VALUES ('upload:pubco', 'other', $1)`, time.Now().Add(time.Hour).UnixNano())
		_, err = node1.UploadModule(ctx, "pubco", policy)
		wantCode(t, err, 429, server.CodeRateLimited)
		p.exec(t, `UPDATE serve_leases SET expires = $1 WHERE id = 'other'`, time.Now().Add(-time.Second).UnixNano())
		if _, err := node1.UploadModule(ctx, "pubco", policy); err != nil {
			t.Fatalf("past a dead node's lease: %v", err)
		}
		if n := p.count(t, "serve_leases"); n != 0 {
			t.Fatalf("%d leases left", n)
		}
	})
}

// TestUploadsInFlightRaceAcrossNodes: with one upload in flight allowed,
// two uploads of a publisher starting at once, one on each node, are one
// 201 and one 429 rate_limited: the count of the leases and the insert of
// one are a transaction holding the name's lock row. raceAt holds the
// first between its count and its insert until the other has counted too,
// or waits: without the lock row both counted none on Postgres, and both
// passed.
func TestUploadsInFlightRaceAcrossNodes(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, db string) {
		ctx := context.Background()
		cl := twoNodes(t, db, func(o *server.Options) {
			o.UploadQuota = server.UploadQuota{MaxInFlight: 1}
			o.RateLimitScope = server.RateLimitNode
		})
		pub := cl.nodes[0].key(t, server.RolePublisher, "pubco")
		// The upload that passes stays in flight (its hook) until the
		// other has its answer; a second one in flight (both passed)
		// lets both go.
		race := raceHooks("lease counted")
		release := make(chan struct{})
		var inFlight atomic.Int32
		var releaseOnce sync.Once
		for i, n := range cl.nodes {
			server.SetHook(n.srv, func(point string) {
				race[i](point)
				if point == "upload in flight" {
					if inFlight.Add(1) == 2 {
						releaseOnce.Do(func() { close(release) })
					}
					<-release
				}
			})
		}
		policy := policyWasm(t)
		answers := make(chan error, 2)
		for i := range 2 {
			go func() {
				_, err := on(pub, cl.nodes[i]).UploadModule(ctx, "pubco", variant(policy, i))
				answers <- err
			}()
		}
		errs := []error{<-answers}
		releaseOnce.Do(func() { close(release) })
		errs = append(errs, <-answers)
		stored, limited := 0, 0
		for i, err := range errs {
			var p *server.Problem
			switch {
			case err == nil:
				stored++
			case errors.As(err, &p) && p.Status == 429 && p.Code == server.CodeRateLimited:
				limited++
			default:
				t.Errorf("answer %d: %v", i, err)
			}
		}
		if stored != 1 || limited != 1 {
			t.Fatalf("%d of 2 uploads racing for the one slot answered 201, %d 429; want 1 and 1", stored, limited)
		}
	})
}

// TestProposedSigningKeysAcrossNodes: a publisher with one proposed
// signing key left of MaxProposedSigningKeys proposes two at once, one on
// each of two nodes sharing the database: one is stored, the other is 403
// quota_exceeded. On Postgres each node counted under a lock of its own
// process, so both passed (raceAt holds the first there) before the count
// and the insert held the publisher's lock row; on SQLite the transaction
// was exclusive already.
func TestProposedSigningKeysAcrossNodes(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, db string) {
		ctx := context.Background()
		cl := twoNodes(t, db, func(o *server.Options) { o.RateLimitScope = server.RateLimitNode })
		pub := cl.nodes[0].key(t, server.RolePublisher, "pubco")
		for i := range server.MaxProposedSigningKeys - 1 {
			if _, err := pub.RegisterSigningKey(ctx, "pubco", newPublicKey(t)); err != nil {
				t.Fatalf("key %d: %v", i, err)
			}
		}
		raceAt(cl, "signing keys counted")
		stored := raceTwo(t, func(i int) error {
			_, err := on(pub, cl.nodes[i]).RegisterSigningKey(ctx, "pubco", newPublicKey(t))
			return err
		})
		if keys, err := pub.SigningKeys(ctx, "pubco"); err != nil || stored != 1 || len(keys) != server.MaxProposedSigningKeys {
			t.Fatalf("%d of 2 racing proposals answered 201, %d keys stored (%v); want 1 and %d", stored, len(keys), err, server.MaxProposedSigningKeys)
		}
	})
}

// TestSweepLimits: the sweep deletes the shared limits' rows that hold
// nothing (a bucket full again for an hour, a lease expired for an hour,
// every lock row no transaction holds) and keeps the others (a bucket not
// full, a lease not expired). The lock rows used to stay for ever, one per
// key that ever waited and per publisher that ever uploaded, revoked keys'
// too. On Postgres the rows a transaction holds are skipped, not waited
// for: a lock row, a bucket a take is updating, and an expired lease a
// lease start is deleting (a DELETE of the table waited for it, up to the
// context's end, and then deleted nothing; waiting, it held the rows it
// had deleted, which a lease start deleting its name's expired leases in
// another order could wait for: a deadlock, and a 503).
func TestSweepLimits(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, db string) {
		ctx := context.Background()
		cl := twoNodes(t, db, func(o *server.Options) { o.RateLimitScope = server.RateLimitNode })
		p := cl.nodes[0]
		pub := p.key(t, server.RolePublisher, "pubco")
		if _, err := pub.UploadModule(ctx, "pubco", policyWasm(t)); err != nil {
			t.Fatal(err)
		}
		if n := p.count(t, "serve_locks"); n == 0 {
			t.Fatal("an upload took no lock row")
		}
		now := time.Now()
		old, live := now.Add(-2*time.Hour).UnixNano(), now.Add(time.Minute).UnixNano()
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO serve_rate_buckets (key_id, tat) VALUES ('full', $1), ('spent', $2), ('held', $1)`, []any{old, live}},
			{`INSERT INTO serve_leases (name, id, expires) VALUES ('dead', 'a', $1), ('live', 'b', $2), ('held', 'c', $1), ('held', 'd', $1)`, []any{old, live}},
		} {
			p.exec(t, q.sql, q.args...)
		}
		wantLocks, wantBuckets, wantLeases := 0, []string{"spent"}, []string{"live"}
		if db == "postgres" {
			tx, err := p.db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			for _, db := range []interface {
				Exec(string, ...any) (sql.Result, error)
			}{p.db, tx} { // as lockName takes a row that exists
				if _, err := db.Exec(`INSERT INTO serve_locks (name) VALUES ('held') ON CONFLICT (name) DO UPDATE SET name = excluded.name`); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tx.Exec(`UPDATE serve_rate_buckets SET tat = tat WHERE key_id = 'held'`); err != nil { // as a take does
				t.Fatal(err)
			}
			if _, err := tx.Exec(`DELETE FROM serve_leases WHERE name = 'held' AND expires < $1`, now.UnixNano()); err != nil { // as a lease start does
				t.Fatal(err)
			}
			wantLocks, wantBuckets, wantLeases = 1, []string{"held", "spent"}, []string{"held", "held", "live"}
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		server.SweepLimits(sctx, cl.nodes[1].srv)
		for _, c := range []struct {
			table, key string
			want       []string
		}{
			{"serve_rate_buckets", "key_id", wantBuckets},
			{"serve_leases", "name", wantLeases},
		} {
			var got []string
			rows, err := p.db.Query(`SELECT ` + c.key + ` FROM ` + c.table + ` ORDER BY ` + c.key)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var k string
				if err := rows.Scan(&k); err != nil {
					t.Fatal(err)
				}
				got = append(got, k)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%s after the sweep: %v, want %v", c.table, got, c.want)
			}
		}
		if n := p.count(t, "serve_locks"); n != wantLocks {
			t.Errorf("%d lock rows after the sweep, want %d (those held)", n, wantLocks)
		}
	})
}

// TestSweepAndLeaseStartNoDeadlock: on Postgres, a lease start deleting
// its name's expired leases one by one (a, then b) while the sweep deletes
// every expired lease in the table's order (b, then a, then another
// name's) no longer deadlocks: the sweep skips a, which the lease start
// holds, instead of waiting for it while holding b, which the lease start
// then waited for. Postgres failed one of the two (the lease start's
// 503, or a sweep that deleted nothing). The test waits until the sweep
// has either returned or is waiting for a row lock (as it did) before the
// lease start's second delete.
func TestSweepAndLeaseStartNoDeadlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newCluster(t, 1, nil)
	p := cl.nodes[0]
	old := time.Now().Add(-2 * time.Hour).UnixNano()
	// Inserted in this order, the rows are read in it by the sweep's scan.
	p.exec(t, `INSERT INTO serve_leases (name, id, expires) VALUES ('n', 'b', $1), ('n', 'a', $1), ('m', 'x', $1)`, old)
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	leaseStart := func(id string) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM serve_leases WHERE name = 'n' AND id = $1 AND expires < $2`, id, time.Now().UnixNano())
		return err
	}
	if err := leaseStart("a"); err != nil {
		t.Fatal(err)
	}
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		server.SweepLimits(ctx, p.srv)
	}()
	for waiting := false; !waiting; {
		select {
		case <-swept:
			waiting = true
		case <-ctx.Done():
			t.Fatal("the sweep neither returned nor waited for a lock")
		case <-time.After(10 * time.Millisecond):
			if err := p.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM serve_leases%'
				AND application_name = current_setting('application_name'))`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := leaseStart("b"); err != nil {
		t.Fatalf("the lease start, after the sweep: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	<-swept
	if n := p.count(t, "serve_leases"); n != 0 {
		t.Fatalf("%d leases left (the sweep failed), want 0", n)
	}
}
