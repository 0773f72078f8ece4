package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/approvaltest"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

func openTemp(t *testing.T) *store.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestLedgerSQLite(t *testing.T) { storetest.RunLedger(t, openTemp) }

func TestMigrationsSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	// Processes starting together: each migration applies once.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sqlite.Open(ctx, path)
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
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := sqlite.Migrations()
	var n, top int
	if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &top); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || top != ms[len(ms)-1].Version || db.Version() != top {
		t.Fatalf("%d migrations recorded up to %d (db at %d); want %d", n, top, db.Version(), len(ms))
	}
	// A newer binary migrated the file: this one refuses it, and changes nothing.
	if _, err := db.SQL().ExecContext(ctx, `INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'now')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Open(ctx, path); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

func TestKVSQLite(t *testing.T) { storetest.RunKV(t, openTemp) }

func TestApprovalsSQLite(t *testing.T) {
	approvaltest.Run(t, func(t *testing.T, c approvaltest.Clock) approvaltest.Harness {
		path := filepath.Join(t.TempDir(), "state.db")
		var h [2]*store.Approvals
		for i := range h {
			db, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			h[i] = store.NewApprovals(db, store.ApprovalOptions{Lease: approvaltest.Lease, Now: c.Now})
		}
		return approvaltest.Harness{A: h[0], B: h[1]}
	})
}
