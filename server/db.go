package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/wasmhooks/wasmhooks/store"
)

// The server's own tables, beside the store's (ledger, kv, approvals, audit
// chains) in the same database. They are created here, with CREATE TABLE IF
// NOT EXISTS, because the store package does not keep tenants, keys,
// modules, versions, signatures, bindings or run results; when it does,
// these move there as migrations. Every table is prefixed serve_. One text
// serves both dialects: written for SQLite, with BLOB read as BYTEA on
// Postgres (ddl); integers that hold Unix nanoseconds are BIGINT, which
// SQLite takes as INTEGER. The statements run at every start, under the
// dialect's migration lock (several nodes start at once on Postgres), and
// then the upgrades the database lacks, each once.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS serve_tenants (
		id TEXT PRIMARY KEY,
		require_signatures BOOLEAN NOT NULL DEFAULT FALSE,
		created TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_keys (
		hash TEXT PRIMARY KEY,
		id TEXT NOT NULL UNIQUE,
		role TEXT NOT NULL,
		tenant TEXT NOT NULL,
		name TEXT NOT NULL,
		created TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_modules (
		digest TEXT PRIMARY KEY,
		wasm BLOB NOT NULL,
		report TEXT NOT NULL,
		created TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_uploads (
		publisher TEXT NOT NULL,
		digest TEXT NOT NULL REFERENCES serve_modules(digest),
		PRIMARY KEY (publisher, digest))`,
	`CREATE TABLE IF NOT EXISTS serve_versions (
		publisher TEXT NOT NULL,
		name TEXT NOT NULL,
		version TEXT NOT NULL,
		digest TEXT NOT NULL REFERENCES serve_modules(digest),
		manifest_digest TEXT NOT NULL,
		created TEXT NOT NULL,
		PRIMARY KEY (publisher, name, version))`,
	`CREATE TABLE IF NOT EXISTS serve_signing_keys (
		id TEXT PRIMARY KEY,
		publisher TEXT NOT NULL,
		public_key BLOB NOT NULL,
		created TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_signatures (
		publisher TEXT NOT NULL,
		name TEXT NOT NULL,
		version TEXT NOT NULL,
		key_id TEXT NOT NULL REFERENCES serve_signing_keys(id),
		signature BLOB NOT NULL,
		PRIMARY KEY (publisher, name, version, key_id))`,
	`CREATE TABLE IF NOT EXISTS serve_bindings (
		tenant TEXT PRIMARY KEY REFERENCES serve_tenants(id),
		config TEXT NOT NULL,
		updated TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_runs (
		tenant TEXT NOT NULL,
		run TEXT NOT NULL,
		outcome TEXT NOT NULL,
		PRIMARY KEY (tenant, run))`,
	`CREATE TABLE IF NOT EXISTS serve_approvals (
		id TEXT PRIMARY KEY,
		tenant TEXT NOT NULL,
		run TEXT NOT NULL,
		status TEXT NOT NULL,
		view TEXT NOT NULL,
		outcome TEXT,
		expires BIGINT NOT NULL,
		created TEXT NOT NULL)`,
	// A run id being run: the node (owner) that claimed it, until
	// lease_until (Unix ns), so that of nodes given one run id at once one
	// runs it and the others wait for its serve_runs row.
	`CREATE TABLE IF NOT EXISTS serve_run_claims (
		tenant TEXT NOT NULL,
		run TEXT NOT NULL,
		owner TEXT NOT NULL,
		lease_until BIGINT NOT NULL,
		PRIMARY KEY (tenant, run))`,
	`CREATE TABLE IF NOT EXISTS serve_schema (version INTEGER PRIMARY KEY)`,
	// The fingerprint of the platform's host key (hostKeyFingerprint): a
	// node started with another key is refused, since its approvals and
	// audit records would not verify on the others.
	`CREATE TABLE IF NOT EXISTS serve_host_key (
		id INTEGER PRIMARY KEY CHECK (id = 1),
		fingerprint TEXT NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS serve_approvals_tenant ON serve_approvals (tenant, status)`,
	`CREATE INDEX IF NOT EXISTS serve_approvals_expires ON serve_approvals (status, expires)`,
}

// upgrades change the tables schema made, each once, in order: the
// database records the versions applied in serve_schema. Append; never edit
// one that has shipped.
var upgrades = [][]string{
	// 1: a binding's version, raised by every bind: nodes compare it with
	// the one they run to find the bindings another node changed.
	{`ALTER TABLE serve_bindings ADD COLUMN version BIGINT NOT NULL DEFAULT 0`},
	// 2: when the approval store resolved an approval (Unix ns), set by
	// the node resuming it: a row still pending long after it is
	// unrecorded (its node died before storing the outcome).
	{`ALTER TABLE serve_approvals ADD COLUMN done_at BIGINT`},
	// 3: what the per-key and per-publisher limits share between nodes.
	// serve_rate_buckets: each API key's bucket as GCRA keeps it, the
	// theoretical arrival time of its next request (Unix ns), taken by one
	// conditional upsert per request (ratelimit.go). serve_locks: a row per
	// name, upserted first by a transaction that must run alone for that
	// name (an upload's quota check and insert); Postgres locks the row,
	// SQLite's write transactions are exclusive anyway (lockName).
	// serve_leases: what is in flight under a name (a publisher's uploads),
	// each row until its expiry (Unix ns), renewed while it runs and
	// deleted when it ends, so a dead node's expire (leases.go).
	{`CREATE TABLE serve_rate_buckets (
		key_id TEXT PRIMARY KEY,
		tat BIGINT NOT NULL)`,
		`CREATE TABLE serve_locks (name TEXT PRIMARY KEY)`,
		`CREATE TABLE serve_leases (
		name TEXT NOT NULL,
		id TEXT NOT NULL,
		expires BIGINT NOT NULL,
		PRIMARY KEY (name, id))`},
}

// blobRE is the BLOB type in schema and upgrades.
var blobRE = regexp.MustCompile(`\bBLOB\b`)

// ddl is a statement of schema or upgrades for the dialect.
func ddl(d store.Dialect, q string) string {
	if d.Name() == "postgres" {
		return blobRE.ReplaceAllString(q, "BYTEA")
	}
	return q
}

func migrate(ctx context.Context, sdb *store.DB) error {
	d := sdb.Dialect()
	err := d.Migrate(ctx, sdb.SQL(), func(tx *sql.Tx) error {
		for _, q := range schema {
			if _, err := tx.ExecContext(ctx, ddl(d, q)); err != nil {
				return err
			}
		}
		var have sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM serve_schema`).Scan(&have); err != nil {
			return err
		}
		if int(have.Int64) > len(upgrades) {
			return fmt.Errorf("the database's serve tables are at version %d, this binary knows up to %d", have.Int64, len(upgrades))
		}
		for v := int(have.Int64) + 1; v <= len(upgrades); v++ {
			for _, q := range upgrades[v-1] {
				if _, err := tx.ExecContext(ctx, ddl(d, q)); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, d.Rebind(`INSERT INTO serve_schema (version) VALUES ($1)`), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("server: schema: %w", err)
	}
	return nil
}

// sqlDB is the database handle the server's queries go through: they are
// written with ? placeholders, which Postgres spells $1, $2...
type sqlDB struct {
	*sql.DB
	pg bool
}

func newSQLDB(sdb *store.DB) *sqlDB {
	return &sqlDB{DB: sdb.SQL(), pg: sdb.Dialect().Name() == "postgres"}
}

func (db *sqlDB) q(query string) string {
	if db.pg {
		return dollars(query)
	}
	return query
}

func (db *sqlDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return db.DB.ExecContext(ctx, db.q(query), args...)
}

func (db *sqlDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return db.DB.QueryContext(ctx, db.q(query), args...)
}

func (db *sqlDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return db.DB.QueryRowContext(ctx, db.q(query), args...)
}

func (db *sqlDB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sqlTx, error) {
	tx, err := db.DB.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &sqlTx{Tx: tx, db: db}, nil
}

// pgNow is the database's clock in Unix ns on Postgres: the statement's
// start, one value however often the statement reads it.
const pgNow = `CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000000000 AS BIGINT)`

// nowSQL is "now" (Unix ns) in the statements that compare times several
// nodes wrote (the shared limits' buckets and leases): on Postgres the
// database's clock, so nodes' clocks may disagree; on SQLite a ? that
// nowArgs fills with the node's clock (processes sharing a SQLite file
// share a machine's).
func (db *sqlDB) nowSQL() string {
	if db.pg {
		return pgNow
	}
	return "?"
}

// nowArgs is the argument of nowSQL's placeholder, at: none on Postgres.
func (db *sqlDB) nowArgs(at time.Time) []any {
	if db.pg {
		return nil
	}
	return []any{at.UnixNano()}
}

// sqlTx is a transaction of a sqlDB: its queries are rewritten the same way.
type sqlTx struct {
	*sql.Tx
	db *sqlDB
}

func (tx *sqlTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return tx.Tx.ExecContext(ctx, tx.db.q(query), args...)
}

func (tx *sqlTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return tx.Tx.QueryContext(ctx, tx.db.q(query), args...)
}

func (tx *sqlTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return tx.Tx.QueryRowContext(ctx, tx.db.q(query), args...)
}

// dollars numbers the ? placeholders of query $1, $2..., leaving those in
// quoted strings and identifiers alone.
func dollars(query string) string {
	var b strings.Builder
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// rowQuerier reads one row: a sqlDB, or a sqlTx.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// lockName makes tx the only transaction, on any node, that holds name
// until it ends: it upserts name's row of serve_locks, which Postgres then
// keeps locked until tx commits or rolls back (another waits at its own
// upsert, then reads what the first committed); on SQLite every write
// transaction is exclusive already (BEGIN IMMEDIATE), across processes
// sharing the file too.
func lockName(ctx context.Context, tx *sqlTx, name string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO serve_locks (name) VALUES (?) ON CONFLICT (name) DO UPDATE SET name = excluded.name`, name)
	return err
}

// queryAll runs query and returns its rows as scan reads each: a failure
// of the query, of a scan or of reading the rows is err.
func queryAll[T any](ctx context.Context, db *sqlDB, scan func(*sql.Rows) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanRow scans row into dest: no row is notFound, another failure an
// internal error.
func (s *Server) scanRow(row *sql.Row, notFound *Problem, dest ...any) *Problem {
	err := row.Scan(dest...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return notFound
	case err != nil:
		return s.internal(err)
	}
	return nil
}
