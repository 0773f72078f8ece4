package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/approvaltest"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/runtime/modstoretest"
	"github.com/wasmhooks/wasmhooks/store"
)

// Target is one dialect under test: how to open a database at a location (a
// file path for SQLite, a URL for Postgres) and where a fresh one is.
type Target struct {
	// Open opens and migrates the database at where.
	Open func(ctx context.Context, where string) (*store.DB, error)
	// Fresh returns the location of a new, empty database, removed when t ends.
	Fresh func(t *testing.T) string
	// Migrations returns the schema migrations the dialect carries.
	Migrations func() ([]store.Migration, error)
	// Require, when set, skips (or under CI fails) t when the dialect's
	// server is not configured; the Run functions call it first.
	Require func(t testing.TB)
}

func (tg Target) require(t *testing.T) {
	t.Helper()
	if tg.Require != nil {
		tg.Require(t)
	}
}

// OpenAt opens the database at where, closed when t ends.
func (tg Target) OpenAt(t testing.TB, where string) *store.DB {
	t.Helper()
	db, err := tg.Open(context.Background(), where)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// OpenFresh opens a fresh, empty, migrated database, closed when t ends: an
// Open for RunLedger and RunKV.
func (tg Target) OpenFresh(t *testing.T) *store.DB {
	t.Helper()
	return tg.OpenAt(t, tg.Fresh(t))
}

// RunMigrations checks that processes opening a new database together apply
// each migration once, and that a database migrated by a newer binary is
// refused with ErrSchemaTooNew.
func RunMigrations(t *testing.T, tg Target) {
	tg.require(t)
	ctx := context.Background()
	where := tg.Fresh(t)
	// Processes starting together: each migration applies once.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := tg.Open(ctx, where)
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
	db, err := tg.Open(ctx, where)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := tg.Migrations()
	var n, top int
	if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &top); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || top != ms[len(ms)-1].Version || db.Version() != top {
		t.Fatalf("%d migrations recorded up to %d (db at %d); want %d", n, top, db.Version(), len(ms))
	}
	// A newer binary migrated the database: this one refuses it, and changes nothing.
	if _, err := db.SQL().ExecContext(ctx, `INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'now')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := tg.Open(ctx, where); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

// RunApprovals runs the approvals conformance kit (chain/approvaltest) on two
// handles to one database, as two processes would hold.
func RunApprovals(t *testing.T, tg Target) {
	tg.require(t)
	approvaltest.Run(t, func(t *testing.T, c approvaltest.Clock) approvaltest.Harness {
		where := tg.Fresh(t)
		var h [2]*store.Approvals
		for i := range h {
			h[i] = store.NewApprovals(tg.OpenAt(t, where), store.ApprovalOptions{Lease: approvaltest.Lease, Now: c.Now})
		}
		return approvaltest.Harness{A: h[0], B: h[1]}
	})
}

// RunAudit runs the audit store conformance kit (chain/audit/audittest); a
// store's Another opens a second handle to the same database.
func RunAudit(t *testing.T, tg Target) {
	tg.require(t)
	wheres := map[audit.Store]string{}
	var mu sync.Mutex
	open := func(t *testing.T, where string) audit.Store {
		s := store.NewAuditStore(tg.OpenAt(t, where), "acme")
		mu.Lock()
		wheres[s] = where
		mu.Unlock()
		return s
	}
	audittest.RunWith(t, audittest.Options{
		New: func(t *testing.T) audit.Store { return open(t, tg.Fresh(t)) },
		Another: func(t *testing.T, s audit.Store) audit.Store {
			mu.Lock()
			where := wheres[s]
			mu.Unlock()
			return open(t, where)
		},
	})
}

// RunModules runs the module store conformance kit (runtime/modstoretest).
func RunModules(t *testing.T, tg Target) {
	tg.require(t)
	modstoretest.Run(t, func(t *testing.T) runtime.ModuleStore { return store.NewModules(tg.OpenFresh(t)) })
}
