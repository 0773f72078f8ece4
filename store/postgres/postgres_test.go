package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"

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
