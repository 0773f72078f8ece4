package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
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
	// OpenSQL opens a handle on the database at where without migrating
	// it: RunAuditUpgrade builds an older schema with it.
	OpenSQL func(where string) (*sql.DB, error)
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
		wg.Go(func() {
			db, err := tg.Open(ctx, where)
			if err == nil {
				db.Close()
			}
			errs[i] = err
		})
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

// before makes a fresh database migrated up to the migration before
// version (which must exist) and returns where it is, a connection to it,
// the dialect, and all the migrations.
func (tg Target) before(t *testing.T, version int) (where string, raw *sql.DB, d store.Dialect, ms []store.Migration) {
	t.Helper()
	ms, err := tg.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ms, func(m store.Migration) bool { return m.Version == version })
	if i < 1 {
		t.Fatalf("no migration %d after another", version)
	}
	d = tg.OpenFresh(t).Dialect() // the dialect, from another database
	where = tg.Fresh(t)
	if raw, err = tg.OpenSQL(where); err != nil {
		t.Fatal(err)
	}
	if v, err := store.Migrate(context.Background(), raw, d, ms[:i]); err != nil || v != ms[i-1].Version {
		raw.Close()
		t.Fatalf("migrating to %d: %d %v", ms[i-1].Version, v, err)
	}
	return where, raw, d, ms
}

// RunAuditUpgrade checks migration 0007 (the run of each audit record, in
// an indexed column) on a database at version 6 holding an audit chain, as
// that version wrote it: the migration applies, the old records keep run
// NULL and their bytes, the chain continues from them and verifies, and the
// records appended after it have their run (” for none).
func RunAuditUpgrade(t *testing.T, tg Target) {
	tg.require(t)
	ctx := context.Background()
	where, raw, d, ms := tg.before(t, 7)
	defer raw.Close()
	// Version 6's chain: records linked by a Log, stored with version 6's
	// columns.
	key := []byte("storetest audit upgrade key, 32 bytes or more")
	mem := audit.NewMemoryStore()
	log, err := audit.NewLog(ctx, mem, audit.LogOptions{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	old := []string{"r1", "r2", "r1"}
	for _, run := range old {
		if err := log.Append(ctx, &audit.Record{Run: run, Tenant: "acme", Decision: "continue"}); err != nil {
			t.Fatal(err)
		}
	}
	head, next := log.Head()
	if _, err := raw.ExecContext(ctx, d.Rebind(`INSERT INTO audit_chains (chain, next, head) VALUES ($1, $2, $3)`), []byte("acme"), int64(next), head); err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	if err := mem.Read(ctx, 0, func(line []byte) error {
		var r audit.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		lines = append(lines, slices.Clone(line))
		_, err := raw.ExecContext(ctx, d.Rebind(`INSERT INTO audit_records (chain, seq, prev, hash, line) VALUES ($1, $2, $3, $4, $5)`),
			[]byte("acme"), int64(r.Seq), r.Prev, r.Hash, line)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	db := tg.OpenAt(t, where)
	if db.Version() != ms[len(ms)-1].Version {
		t.Fatalf("at version %d after the upgrade", db.Version())
	}
	s := store.NewAuditStore(db, "acme")
	log, err = audit.NewLog(ctx, s, audit.LogOptions{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"r2", ""} {
		if err := log.Append(ctx, &audit.Record{Run: run, Tenant: "acme", Decision: "continue"}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := audit.VerifyStore(ctx, s, audit.VerifyOptions{Key: key}); err != nil || n != len(old)+2 {
		t.Fatalf("verify after the upgrade: %d records, %v", n, err)
	}
	rows, err := db.SQL().QueryContext(ctx, d.Rebind(`SELECT seq, run, line FROM audit_records WHERE chain = $1 ORDER BY seq`), []byte("acme"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := []sql.NullString{{}, {}, {}, {String: "r2", Valid: true}, {String: "", Valid: true}}
	n := 0
	for ; rows.Next(); n++ {
		var (
			seq  int64
			run  sql.NullString
			line []byte
		)
		if err := rows.Scan(&seq, &run, &line); err != nil {
			t.Fatal(err)
		}
		if seq != int64(n) || n >= len(want) || run != want[n] || (n < len(lines) && string(line) != string(lines[n])) {
			t.Fatalf("record %d: seq %d, run %+v, line %s", n, seq, run, line)
		}
	}
	if err := rows.Err(); err != nil || n != len(want) {
		t.Fatalf("%d records: %v", n, err)
	}
}

// RunModules runs the module store conformance kit (runtime/modstoretest).
func RunModules(t *testing.T, tg Target) {
	tg.require(t)
	modstoretest.Run(t, func(t *testing.T) runtime.ModuleStore { return store.NewModules(tg.OpenFresh(t)) })
}
