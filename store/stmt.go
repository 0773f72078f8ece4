package store

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps one prepared statement per query text, so that the hot
// paths (reserve, settle, kv get and set) do not parse their SQL on every
// call. It is a cache only: correctness never depends on it.
//
// A statement a transaction needs for the first time is prepared on the
// transaction itself; the cache prepares it on the database after the
// transaction ends, because SQLite's pool has one connection, which the
// transaction holds.
type stmtCache struct {
	mu      sync.Mutex           // guards the fields below
	stmts   map[string]*sql.Stmt // by query text, rebound
	pending map[string]bool      // queries to prepare after the current transaction
}

// stmt returns query (written with $n placeholders) prepared within tx.
func (db *DB) stmt(ctx context.Context, tx *sql.Tx, query string) stmtRef {
	query = db.q(query)
	db.cache.mu.Lock()
	st := db.cache.stmts[query]
	if st == nil {
		if db.cache.pending == nil {
			db.cache.pending = make(map[string]bool)
		}
		db.cache.pending[query] = true
	}
	db.cache.mu.Unlock()
	if st != nil {
		return stmtRef{st: tx.StmtContext(ctx, st)}
	}
	st, err := tx.PrepareContext(ctx, query)
	return stmtRef{st: st, err: err}
}

// preparePending prepares and caches the queries first seen by a
// transaction that has ended. Failures are ignored: the query is prepared
// again within the next transaction that needs it.
func (db *DB) preparePending(ctx context.Context) {
	db.cache.mu.Lock()
	var qs []string
	for q := range db.cache.pending {
		qs = append(qs, q)
	}
	clear(db.cache.pending)
	db.cache.mu.Unlock()
	for _, q := range qs {
		st, err := db.sql.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		db.cache.mu.Lock()
		if db.cache.stmts == nil {
			db.cache.stmts = make(map[string]*sql.Stmt)
		}
		if db.cache.stmts[q] == nil {
			db.cache.stmts[q] = st
			st = nil
		}
		db.cache.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}
}

// stmtRef is a statement or the error preparing it.
type stmtRef struct {
	st  *sql.Stmt
	err error
}

func (s stmtRef) QueryRowContext(ctx context.Context, args ...any) rowRef {
	if s.err != nil {
		return rowRef{err: s.err}
	}
	return rowRef{row: s.st.QueryRowContext(ctx, args...)}
}

func (s stmtRef) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.st.ExecContext(ctx, args...)
}

// rowRef is a row or the error preparing its statement.
type rowRef struct {
	row *sql.Row
	err error
}

func (r rowRef) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.row.Scan(dest...)
}
