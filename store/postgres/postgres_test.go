package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain/approvaltest"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/runtime/modstoretest"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/postgres"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

func openFresh(t *testing.T) *store.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestLedgerPostgres(t *testing.T) {
	storetest.RequirePostgres(t)
	storetest.RunLedger(t, openFresh)
}

func TestMigrationsPostgres(t *testing.T) {
	ctx := context.Background()
	url := storetest.PostgresURL(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := postgres.Open(ctx, url)
			if err == nil {
				db.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	db, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := postgres.Migrations()
	var n, top int
	if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &top); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || top != ms[len(ms)-1].Version {
		t.Fatalf("%d migrations recorded up to %d; want %d", n, top, len(ms))
	}
	if _, err := db.SQL().ExecContext(ctx, `INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'now')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := postgres.Open(ctx, url); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

func TestUnreachablePostgres(t *testing.T) {
	// Nothing listens on port 1: Open fails typed.
	ctx := context.Background()
	if _, err := postgres.Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open of a server that is down: %v", err)
	}
}

// TestConnectionLostMidCallPostgres: the server drops the connection of a
// Reserve while it waits on a row lock; Reserve fails with ErrUnavailable
// and nothing changed.
func TestConnectionLostMidCallPostgres(t *testing.T) {
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) { connectionLostMidCall(t, warm) })
	}
}

// connectionLostMidCall: with warm, a first reservation has renewed the
// lease, so the next takes the one-statement path.
func connectionLostMidCall(t *testing.T, warm bool) {
	ctx := context.Background()
	db := openFresh(t)
	l := store.NewLedger(db, store.LedgerOptions{})
	if err := l.Grant(ctx, "acme", 100, ""); err != nil {
		t.Fatal(err)
	}
	if warm {
		id, err := l.Reserve(ctx, "acme", 1, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Another session locks the account row so the Reserve waits mid-call.
	locker, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback()
	if _, err := locker.ExecContext(ctx, `SELECT 1 FROM ledger_accounts WHERE account = 'acme' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Reserve(ctx, "acme", 10, "lost")
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		// Outside locker's transaction, which would see a snapshot of
		// pg_stat_activity taken before the Reserve connected.
		err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Reserve never waited on the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-done; !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Reserve whose connection died: %v", err)
	}
	locker.Rollback()
	if a, p, err := l.Balance(ctx, "acme"); err != nil || a != 100 || p != 0 {
		t.Fatalf("balance %d pending %d %v; want 100, 0", a, p, err)
	}
	if n, _ := l.Outstanding(ctx); n != 0 {
		t.Fatalf("%d holds open", n)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestKVPostgres(t *testing.T) {
	storetest.RequirePostgres(t)
	storetest.RunKV(t, openFresh)
}

func TestApprovalsPostgres(t *testing.T) {
	storetest.RequirePostgres(t)
	approvaltest.Run(t, func(t *testing.T, c approvaltest.Clock) approvaltest.Harness {
		url := storetest.PostgresURL(t)
		var h [2]*store.Approvals
		for i := range h {
			db, err := postgres.Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			h[i] = store.NewApprovals(db, store.ApprovalOptions{Lease: approvaltest.Lease, Now: c.Now})
		}
		return approvaltest.Harness{A: h[0], B: h[1]}
	})
}

func TestAuditPostgres(t *testing.T) {
	storetest.RequirePostgres(t)
	urls := map[audit.Store]string{}
	var mu sync.Mutex
	open := func(t *testing.T, url string) audit.Store {
		db, err := postgres.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s := store.NewAuditStore(db, "acme")
		mu.Lock()
		urls[s] = url
		mu.Unlock()
		return s
	}
	audittest.RunWith(t, audittest.Options{
		New: func(t *testing.T) audit.Store { return open(t, storetest.PostgresURL(t)) },
		Another: func(t *testing.T, s audit.Store) audit.Store {
			mu.Lock()
			url := urls[s]
			mu.Unlock()
			return open(t, url)
		},
	})
}

func TestModulesPostgres(t *testing.T) {
	storetest.RequirePostgres(t)
	modstoretest.Run(t, func(t *testing.T) runtime.ModuleStore { return store.NewModules(openFresh(t)) })
}
