// Package sqlite opens the store on a SQLite file (modernc.org/sqlite, pure
// Go, no cgo): the embedded default, one file and no server. Several
// processes on one machine may share the file; write transactions are
// exclusive (BEGIN IMMEDIATE) and wait for each other up to BusyTimeout.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wasmhooks/wasmhooks/store"
)

// BusyTimeout is how long a statement waits for another connection's write
// transaction before failing with ErrUnavailable.
const BusyTimeout = 10 * time.Second

// columnTypes fill the placeholders of the schema's DDL. An INTEGER PRIMARY
// KEY is the rowid, assigned without AUTOINCREMENT's sequence table; with
// rows never deleted, never reused.
var columnTypes = store.ColumnTypes{Bytes: "BLOB", Int: "INTEGER", ID: "INTEGER PRIMARY KEY"}

// Migrations returns the schema migrations this binary carries.
func Migrations() ([]store.Migration, error) {
	return store.Migrations(columnTypes)
}

// Open opens (creating it if absent) the SQLite database at path, in WAL
// mode with synchronous=NORMAL (a committed transaction survives a crash of
// the process; a crash of the machine may lose the last few), and migrates
// its schema.
func Open(ctx context.Context, path string) (*store.DB, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Add("_pragma", "wal_autocheckpoint(10000)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, store.Unavailable("open", err)
	}
	// One connection per process: writers are exclusive anyway, and
	// in-process callers then queue in database/sql instead of polling
	// SQLite's busy handler. Other processes still contend through the
	// file's locks.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	return store.New(ctx, db, dialect{}, columnTypes, func(ctx context.Context) error { return ping(ctx, db) })
}

// ping opens the first connection, which applies the pragmas. Switching a
// new file to WAL takes the file's exclusive lock without waiting in the
// busy handler, so processes opening a new file together can get
// SQLITE_BUSY here: ping retries that until BusyTimeout.
func ping(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(BusyTimeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || !(dialect{}).IsRetryable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

type dialect struct{}

func (dialect) Name() string { return "sqlite" }

var placeholder = regexp.MustCompile(`\$([0-9]+)`)

// Rebind turns $1 into ?1, SQLite's numbered parameter.
func (dialect) Rebind(q string) string { return placeholder.ReplaceAllString(q, "?$1") }

func (dialect) ForUpdate() string { return "" }

func code(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

func (dialect) IsUniqueViolation(err error) bool {
	c := code(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func (dialect) IsCheckViolation(err error) bool { return code(err) == sqlite3.SQLITE_CONSTRAINT_CHECK }

func (dialect) WritableCTE() bool { return false }

func (dialect) IsRetryable(err error) bool {
	switch code(err) & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// Migrate runs fn in a BEGIN IMMEDIATE transaction: it holds the file's
// write lock, so one process at a time migrates.
func (dialect) Migrate(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	return store.InTx(ctx, db, fn)
}
