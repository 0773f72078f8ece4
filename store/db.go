package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmhooks/wasmhooks/capability"
)

// Dialect is what differs between the databases. Packages store/sqlite and
// store/postgres implement it; a platform does not.
type Dialect interface {
	// Name is "sqlite" or "postgres".
	Name() string
	// Rebind rewrites a statement written with $1, $2, ... placeholders
	// for the driver.
	Rebind(query string) string
	// ForUpdate is the clause that locks the rows a SELECT in a write
	// transaction reads (" FOR UPDATE"), or "" where every write
	// transaction is already exclusive (SQLite's BEGIN IMMEDIATE).
	ForUpdate() string
	// IsUniqueViolation reports whether err is a unique-constraint failure.
	IsUniqueViolation(err error) bool
	// IsRetryable reports whether the whole transaction may be retried
	// (serialisation failure, deadlock, a busy database).
	IsRetryable(err error) bool
	// Migrate runs fn in one transaction while holding the lock that lets
	// one process at a time migrate the schema.
	Migrate(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error
	// WritableCTE reports whether a WITH clause may hold INSERT, UPDATE
	// and DELETE (Postgres), so that a reservation or a settlement is one
	// statement, one round trip, instead of a transaction of several.
	WritableCTE() bool
	// IsCheckViolation reports whether err is a CHECK constraint failure,
	// which the schema's invariants raise on a corrupt row.
	IsCheckViolation(err error) bool
}

// DB is an open database with its dialect and its schema migrated. Make one
// with sqlite.Open or postgres.Open; it is safe for concurrent use.
type DB struct {
	sql     *sql.DB
	d       Dialect
	version int
	cache   stmtCache
}

// New pings db with ping, migrates its schema to the last of the
// migrations written with the dialect's column types (see Migrations and
// Migrate) and wraps it; on failure it closes db. It is for the dialect
// packages; platforms call sqlite.Open or postgres.Open.
func New(ctx context.Context, db *sql.DB, d Dialect, types ColumnTypes, ping func(context.Context) error) (*DB, error) {
	v, err := open(ctx, db, d, types, ping)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &DB{sql: db, d: d, version: v}, nil
}

func open(ctx context.Context, db *sql.DB, d Dialect, types ColumnTypes, ping func(context.Context) error) (int, error) {
	ms, err := Migrations(types)
	if err != nil {
		return 0, err
	}
	if err := ping(ctx); err != nil {
		return 0, Unavailable("open", err)
	}
	return Migrate(ctx, db, d, ms)
}

// SQL returns the underlying handle, for tests and tools.
func (db *DB) SQL() *sql.DB { return db.sql }

// Dialect returns the database's dialect.
func (db *DB) Dialect() Dialect { return db.d }

// Version returns the schema version the database is at.
func (db *DB) Version() int { return db.version }

// Close closes the database handle.
func (db *DB) Close() error { return db.sql.Close() }

// maxRetries bounds how often a transaction that failed on a retryable error
// (deadlock, serialisation failure, busy) is run again.
const maxRetries = 5

// tx runs fn in a write transaction, retrying it on retryable errors. Errors
// fn returns that belong to the domain (capability's ledger errors, *Error)
// are returned unchanged; any other failure is CodeUnavailable. On any error
// the transaction is rolled back: nothing changed.
func (db *DB) tx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	return db.retry(ctx, op, func() error {
		err := db.tx1(ctx, fn)
		db.preparePending(ctx)
		return err
	})
}

// retry runs fn, again on retryable errors, and types its failure as tx does.
func (db *DB) retry(ctx context.Context, op string, fn func() error) error {
	var err error
	for attempt := 0; attempt <= maxRetries; attempt++ {
		err = fn()
		if err == nil || isDomain(err) {
			return err
		}
		if !db.d.IsRetryable(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * time.Millisecond)
	}
	return Unavailable(op, err)
}

func (db *DB) tx1(ctx context.Context, fn func(*sql.Tx) error) error {
	return InTx(ctx, db.sql, fn)
}

// TxBeginner is what a transaction is begun on: a *sql.DB or a *sql.Conn.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// InTx runs fn in one transaction begun on b: committed when fn returns nil,
// rolled back (nothing changed) when it returns an error, which InTx returns.
func InTx(ctx context.Context, b TxBeginner, fn func(*sql.Tx) error) error {
	tx, err := b.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// isDomain reports whether err is an answer rather than a failure of the
// database.
func isDomain(err error) bool {
	var se *Error
	if errors.As(err, &se) {
		return true
	}
	var full *kvFull
	if errors.As(err, &full) {
		return true
	}
	for _, e := range []error{capability.ErrInsufficientCredit, capability.ErrReservationResolved,
		capability.ErrUnknownReservation, capability.ErrIdempotencyConflict, capability.ErrInvalidAmount} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// q rewrites a statement for the dialect.
func (db *DB) q(query string) string { return db.d.Rebind(query) }

// Migration is one schema change, from a file named NNNN_name.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// ColumnTypes are a dialect's column types. The schema's DDL, one source
// for every dialect (migrations/*.sql), writes them as placeholders that
// Migrations replaces.
type ColumnTypes struct {
	// Bytes ({{bytes}}) is a byte string: BLOB, BYTEA.
	Bytes string
	// Int ({{int}}) is a 64-bit integer.
	Int string
	// ID ({{id}}) is an integer primary key the database assigns, never
	// reused (with rows never deleted).
	ID string
}

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Migrations returns the schema migrations for a dialect's column types,
// from the files of migrations/, whose names start with their version, a
// positive number (0001_ledger.sql); versions must be unique, and no
// placeholder may stay. A database records a migration by version and name
// only, so one migrated when each dialect had its own copy of the DDL is up
// to date as it is.
func Migrations(types ColumnTypes) ([]Migration, error) {
	r := strings.NewReplacer("{{bytes}}", types.Bytes, "{{int}}", types.Int, "{{id}}", types.ID)
	entries, err := fs.ReadDir(migrationsFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("store: migration %s: name must start with a positive version", name)
		}
		b, err := fs.ReadFile(migrationsFS, path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		q := r.Replace(string(b))
		if i := strings.Index(q, "{{"); i >= 0 {
			return nil, fmt.Errorf("store: migration %s: unknown placeholder at %q", name, q[i:min(len(q), i+16)])
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: q})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("store: migrations %s and %s share version %d", ms[i-1].Name, ms[i].Name, ms[i].Version)
		}
	}
	return ms, nil
}

// Migrate brings the schema to the last of migrations, applying those the
// database lacks in one transaction under the dialect's migration lock, so
// that processes starting together apply each exactly once. It returns the
// version reached. A database at a version newer than the last migration is
// refused with ErrSchemaTooNew and left as it is.
func Migrate(ctx context.Context, db *sql.DB, d Dialect, migrations []Migration) (int, error) {
	if len(migrations) == 0 {
		return 0, &Error{Code: CodeMigration, Op: "migrate", Msg: "no migrations"}
	}
	latest := migrations[len(migrations)-1].Version
	var reached int
	err := d.Migrate(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
			return err
		}
		var cur sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&cur); err != nil {
			return err
		}
		if int(cur.Int64) > latest {
			return &Error{Code: CodeSchemaTooNew, Op: "migrate",
				Msg: fmt.Sprintf("database schema is at version %d, this binary knows up to %d", cur.Int64, latest)}
		}
		reached = int(cur.Int64)
		for _, m := range migrations {
			if m.Version <= reached {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return &Error{Code: CodeMigration, Op: "migrate", Msg: m.Name, Err: err}
			}
			if _, err := tx.ExecContext(ctx, d.Rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`),
				m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
				return err
			}
			reached = m.Version
		}
		return nil
	})
	if err != nil {
		return 0, Unavailable("migrate", err)
	}
	return reached, nil
}
