package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/approvaltest"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/runtime/modstoretest"
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

func TestAuditSQLite(t *testing.T) {
	paths := map[audit.Store]string{}
	var mu sync.Mutex
	open := func(t *testing.T, path string) audit.Store {
		db, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s := store.NewAuditStore(db, "acme")
		mu.Lock()
		paths[s] = path
		mu.Unlock()
		return s
	}
	audittest.RunWith(t, audittest.Options{
		New: func(t *testing.T) audit.Store { return open(t, filepath.Join(t.TempDir(), "state.db")) },
		Another: func(t *testing.T, s audit.Store) audit.Store {
			mu.Lock()
			path := paths[s]
			mu.Unlock()
			return open(t, path)
		},
	})
}

// Corrupt rows get typed errors and change nothing: an approval whose data
// does not decode stays pending; an audit chain missing its last record
// refuses appends and reads.
func TestCorruptRowsSQLite(t *testing.T) {
	ctx := context.Background()
	db := openTemp(t)
	if _, err := db.SQL().ExecContext(ctx, `INSERT INTO approvals (id, state, data, expires_at) VALUES (CAST('00aa' AS BLOB), 'pending', CAST('{not json' AS BLOB), 0)`); err != nil {
		t.Fatal(err)
	}
	ap := store.NewApprovals(db, store.ApprovalOptions{})
	for _, op := range []func() error{
		func() error { _, err := ap.Get(ctx, "00aa"); return err },
		func() error { _, err := ap.Take(ctx, "00aa"); return err },
	} {
		var ae *chain.ApprovalError
		if err := op(); !errors.As(err, &ae) || ae.Code != chain.ApprovalCorrupt {
			t.Fatalf("corrupt approval: %v", err)
		}
	}
	var state string
	if err := db.SQL().QueryRowContext(ctx, `SELECT state FROM approvals`).Scan(&state); err != nil || state != "pending" {
		t.Fatalf("state %q, %v; want pending", state, err)
	}

	s := store.NewAuditStore(db, "acme")
	l, err := audit.NewLog(ctx, s, audit.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := l.Append(ctx, audittest.Record(1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.SQL().ExecContext(ctx, `DELETE FROM audit_records WHERE seq = 1`); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, audittest.Record(2)); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Append after a cut: %v", err)
	}
	if err := s.Read(ctx, 0, func([]byte) error { return nil }); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Read after a cut: %v", err)
	}
	var n int
	if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_records`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d records, %v; want 1", n, err)
	}
}

func TestModulesSQLite(t *testing.T) {
	modstoretest.Run(t, func(t *testing.T) runtime.ModuleStore { return store.NewModules(openTemp(t)) })
}

// A module whose stored bytes were changed is refused, never loaded.
func TestModulesCorruptSQLite(t *testing.T) {
	ctx := context.Background()
	db := openTemp(t)
	s := store.NewModules(db)
	wasm, info := modstoretest.Module(1, 64)
	if err := s.Put(ctx, wasm, info); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().ExecContext(ctx, `UPDATE modules SET wasm = CAST('evil' AS BLOB)`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, info.Digest); !errors.Is(err, runtime.ErrModuleMismatch) {
		t.Fatalf("Get of changed bytes: %v", err)
	}
	if _, err := db.SQL().ExecContext(ctx, `UPDATE modules SET info = CAST('{' AS BLOB)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Info(ctx, info.Digest); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Info of a corrupt report: %v", err)
	}
}

// A database that is gone answers every store with STORE_UNAVAILABLE and
// changes nothing: the approval is pending when it is back.
func TestStoresUnavailableSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ap := &chain.Approval{ID: "00ab", Expires: time.Now().Add(time.Hour)}
	aps := store.NewApprovals(db, store.ApprovalOptions{})
	if err := aps.Put(ctx, ap); err != nil {
		t.Fatal(err)
	}
	db.Close()
	wasm, info := modstoretest.Module(1, 16)
	for name, op := range map[string]func() error{
		"approvals get":  func() error { _, err := aps.Get(ctx, ap.ID); return err },
		"approvals take": func() error { _, err := aps.Take(ctx, ap.ID); return err },
		"approvals done": func() error { return aps.Done(ctx, ap.ID) },
		"approvals due":  func() error { _, err := aps.Due(ctx, time.Now()); return err },
		"audit append": func() error {
			return store.NewAuditStore(db, "acme").Append(ctx, func(uint64, []byte) (audit.Entry, error) {
				t.Error("link called on a closed database")
				return audit.Entry{}, nil
			})
		},
		"audit head":  func() error { _, _, err := store.NewAuditStore(db, "acme").Head(ctx); return err },
		"modules put": func() error { return store.NewModules(db).Put(ctx, wasm, info) },
		"modules get": func() error { _, _, err := store.NewModules(db).Get(ctx, info.Digest); return err },
	} {
		if err := op(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s on a closed database: %v", name, err)
		}
	}
	db, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, err := store.NewApprovals(db, store.ApprovalOptions{}).Take(ctx, ap.ID); err != nil || got.ID != ap.ID {
		t.Fatalf("Take when the database is back: %v, %v", got, err)
	}
}
