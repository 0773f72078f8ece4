package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/runtime/modstoretest"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// target is SQLite under test: each fresh database a file in t's temporary
// directory.
var target = storetest.Target{
	Open:       sqlite.Open,
	Fresh:      func(t *testing.T) string { return filepath.Join(t.TempDir(), "state.db") },
	Migrations: sqlite.Migrations,
	OpenSQL: func(path string) (*sql.DB, error) {
		return sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(ON)")
	},
}

func openTemp(t *testing.T) *store.DB {
	t.Helper()
	return target.OpenFresh(t)
}

func TestLedgerSQLite(t *testing.T) { storetest.RunLedger(t, openTemp) }

func TestMigrationsSQLite(t *testing.T) { storetest.RunMigrations(t, target) }

func TestKVSQLite(t *testing.T) { storetest.RunKV(t, openTemp) }

func TestApprovalsSQLite(t *testing.T) { storetest.RunApprovals(t, target) }

func TestAuditSQLite(t *testing.T) { storetest.RunAudit(t, target) }

func TestAuditUpgradeSQLite(t *testing.T) { storetest.RunAuditUpgrade(t, target) }

func TestAuditCheckpointSQLite(t *testing.T) { storetest.RunAuditCheckpoint(t, target) }

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

func TestModulesSQLite(t *testing.T) { storetest.RunModules(t, target) }

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

// TestNotifySQLite: SQLite carries no notifications: Notify does nothing
// and Listen says so at once.
func TestNotifySQLite(t *testing.T) {
	ctx := context.Background()
	db := target.OpenFresh(t)
	if err := db.Notify(ctx, nil, "wh_test", "x"); err != nil {
		t.Fatal(err)
	}
	if err := db.Listen(ctx, []string{"wh_test"}, nil, func(string, string) {}); !errors.Is(err, store.ErrNoNotifications) {
		t.Fatalf("Listen on SQLite: %v", err)
	}
}
