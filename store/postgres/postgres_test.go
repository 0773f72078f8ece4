package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/postgres"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// target is Postgres under test: each fresh database a new schema on the
// server at storetest.PostgresEnv.
var target = storetest.Target{
	Open:       postgres.Open,
	Fresh:      func(t *testing.T) string { return storetest.PostgresURL(t) },
	Migrations: postgres.Migrations,
	Require:    storetest.RequirePostgres,
	OpenSQL:    func(url string) (*sql.DB, error) { return sql.Open("pgx", url) },
}

func openFresh(t *testing.T) *store.DB {
	t.Helper()
	return target.OpenFresh(t)
}

func TestLedgerPostgres(t *testing.T) {
	storetest.RequirePostgres(t)
	storetest.RunLedger(t, openFresh)
}

func TestMigrationsPostgres(t *testing.T) { storetest.RunMigrations(t, target) }

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
			WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()
			AND application_name = current_setting('application_name')`).Scan(&n)
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
	if n, err := l.Outstanding(ctx); err != nil || n != 0 {
		t.Fatalf("%d holds open (%v)", n, err)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestKVPostgres(t *testing.T) {
	storetest.RequirePostgres(t)
	storetest.RunKV(t, openFresh)
}

func TestApprovalsPostgres(t *testing.T) { storetest.RunApprovals(t, target) }

func TestAuditPostgres(t *testing.T) { storetest.RunAudit(t, target) }

func TestAuditUpgradePostgres(t *testing.T) { storetest.RunAuditUpgrade(t, target) }

func TestAuditCheckpointPostgres(t *testing.T) { storetest.RunAuditCheckpoint(t, target) }

func TestModulesPostgres(t *testing.T) { storetest.RunModules(t, target) }
