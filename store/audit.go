package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// AuditStore is an audit.Store keeping one chain (named, by a tenant say)
// in a database, shared by every process that opens it. An Append locks
// the chain's head row (audit_chains; SELECT ... FOR UPDATE on Postgres,
// the BEGIN IMMEDIATE write lock on SQLite), reads the next sequence number
// and the last line, links the record and inserts it in the same
// transaction: writers of one chain take turns, so it never forks and has
// no gap; the primary key (chain, seq) is the backstop. Each record's run
// (audit.Entry.Run) is kept in a column indexed with the chain, so that one
// run's records are found without reading the chain.
type AuditStore struct {
	db    *DB
	chain []byte
}

var _ audit.Store = (*AuditStore)(nil)

// NewAuditStore returns the store of the chain named chain in db.
func NewAuditStore(db *DB, chain string) *AuditStore {
	return &AuditStore{db: db, chain: []byte(chain)}
}

// TenantAudit returns an audit.TenantLogs keeping each tenant's chain in db
// (the chain named by the tenant), keyed by key when not nil.
func TenantAudit(db *DB, key []byte) (*audit.TenantLogs, error) {
	return audit.NewTenantLogs(func(_ context.Context, tenant string) (audit.Store, error) {
		return NewAuditStore(db, tenant), nil
	}, key)
}

// auditReadPage is how many lines Read fetches per query: the connection is
// free between pages (SQLite's pool has one), and f runs with none held.
const auditReadPage = 256

// Head implements audit.Store.
func (s *AuditStore) Head(ctx context.Context) (uint64, []byte, error) {
	var (
		next int64
		line []byte
	)
	err := s.db.retry(ctx, "audit head", func() error {
		line = nil
		err := s.db.sql.QueryRowContext(ctx, s.db.q(`SELECT c.next, r.line FROM audit_chains c
			LEFT JOIN audit_records r ON r.chain = c.chain AND r.seq = c.next - 1
			WHERE c.chain = $1`), s.chain).Scan(&next, &line)
		if errors.Is(err, sql.ErrNoRows) {
			next = 0
			return nil
		}
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	if next < 0 {
		return 0, nil, &Error{Code: CodeCorrupt, Op: "audit head", Msg: fmt.Sprintf("chain %q: next seq %d", s.chain, next)}
	}
	return uint64(next), bytes.Clone(line), nil
}

// linkError carries a LinkFunc's (or its Entry's) failure out of the
// transaction unchanged.
type linkError struct{ err error }

func (e *linkError) Error() string { return e.err.Error() }

// Append implements audit.Store: the record is linked and inserted while
// the chain's head row is locked.
func (s *AuditStore) Append(ctx context.Context, link audit.LinkFunc) error {
	var err error
	for attempt := 0; attempt <= maxRetries; attempt++ {
		err = s.db.tx1(ctx, func(tx *sql.Tx) error { return s.append1(ctx, tx, link) })
		var le *linkError
		if errors.As(err, &le) {
			return le.err
		}
		if err == nil || !s.db.d.IsRetryable(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * time.Millisecond)
	}
	return Unavailable("audit append", err)
}

func (s *AuditStore) append1(ctx context.Context, tx *sql.Tx, link audit.LinkFunc) error {
	if _, err := tx.ExecContext(ctx, s.db.q(`INSERT INTO audit_chains (chain, next, head) VALUES ($1, 0, '')
		ON CONFLICT (chain) DO NOTHING`), s.chain); err != nil {
		return err
	}
	var (
		next int64
		head string
	)
	if err := tx.QueryRowContext(ctx, s.db.q(`SELECT next, head FROM audit_chains WHERE chain = $1`+s.db.d.ForUpdate()), s.chain).Scan(&next, &head); err != nil {
		return err
	}
	var last []byte
	if next > 0 {
		err := tx.QueryRowContext(ctx, s.db.q(`SELECT line FROM audit_records WHERE chain = $1 AND seq = $2`), s.chain, next-1).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return &linkError{&Error{Code: CodeCorrupt, Op: "audit append", Msg: fmt.Sprintf("chain %q: its head says %d records but record %d is missing", s.chain, next, next-1)}}
		}
		if err != nil {
			return err
		}
	}
	e, err := link(uint64(next), last)
	if err != nil {
		return &linkError{err}
	}
	if e.Seq != uint64(next) || e.Prev != head || e.Hash == "" || len(e.Line) == 0 {
		return &linkError{fmt.Errorf("audit: the record linked as %d after %.16q does not follow the chain's head (%d, %.16q)", e.Seq, e.Prev, next, head)}
	}
	if _, err := tx.ExecContext(ctx, s.db.q(`INSERT INTO audit_records (chain, seq, prev, hash, run, line) VALUES ($1, $2, $3, $4, $5, $6)`),
		s.chain, next, e.Prev, e.Hash, e.Run, e.Line); err != nil {
		if s.db.d.IsUniqueViolation(err) {
			// The head row and the records disagree: never overwrite.
			return &linkError{&Error{Code: CodeCorrupt, Op: "audit append", Msg: fmt.Sprintf("chain %q: record %d exists past its head", s.chain, next), Err: err}}
		}
		return err
	}
	r, err := tx.ExecContext(ctx, s.db.q(`UPDATE audit_chains SET next = next + 1, head = $3 WHERE chain = $1 AND next = $2`), s.chain, next, e.Hash)
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return &linkError{&Error{Code: CodeCorrupt, Op: "audit append", Msg: fmt.Sprintf("chain %q: its head moved while locked", s.chain), Err: err}}
	}
	return nil
}

// Checkpoint returns the chain's checkpoint as SaveCheckpoint kept it (the
// audit_checkpoints row), nil if none. Its MAC is not checked:
// audit.Checkpoint.Check (or audit.VerifyOptions) does.
func (s *AuditStore) Checkpoint(ctx context.Context) (*audit.Checkpoint, error) {
	var (
		c       audit.Checkpoint
		records int64
		found   bool
	)
	err := s.db.retry(ctx, "audit checkpoint", func() error {
		err := s.db.sql.QueryRowContext(ctx, s.db.q(`SELECT records, head, mac FROM audit_checkpoints WHERE chain = $1`), s.chain).Scan(&records, &c.Head, &c.MAC)
		found = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil || !found {
		return nil, err
	}
	if records < 0 {
		return nil, &Error{Code: CodeCorrupt, Op: "audit checkpoint", Msg: fmt.Sprintf("chain %q: checkpoint of %d records", s.chain, records)}
	}
	c.Records = uint64(records)
	return &c, nil
}

// SaveCheckpoint keeps c as the chain's checkpoint, unless the one kept
// counts as many records or more (checkpoints only move forward, whichever
// process saves them), and reports whether it did. The chain must have a
// record. The store does not check c: its caller verified the chain
// against it.
func (s *AuditStore) SaveCheckpoint(ctx context.Context, c audit.Checkpoint) (bool, error) {
	if c.Records == 0 || c.Records > math.MaxInt64 {
		return false, fmt.Errorf("store: a checkpoint of %d records is not kept", c.Records)
	}
	var saved bool
	err := s.db.retry(ctx, "audit save checkpoint", func() error {
		r, err := s.db.sql.ExecContext(ctx, s.db.q(`INSERT INTO audit_checkpoints (chain, records, head, mac) VALUES ($1, $2, $3, $4)
			ON CONFLICT (chain) DO UPDATE SET records = excluded.records, head = excluded.head, mac = excluded.mac
			WHERE audit_checkpoints.records < excluded.records`), s.chain, int64(c.Records), c.Head, c.MAC)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		saved = n == 1
		return err
	})
	return saved, err
}

// Read implements audit.Store: the lines from seq from to the head as it
// was when Read began, a page per query. A record missing is a CodeCorrupt
// error wrapping an *audit.MissingError, after f has had the lines before
// it; when it is the first asked, the error names the first missing
// before it, back to the last record stored.
func (s *AuditStore) Read(ctx context.Context, from uint64, f func(line []byte) error) error {
	end, _, err := s.Head(ctx)
	if err != nil {
		return err
	}
	for cur := from; cur < end; {
		var (
			page [][]byte
			gap  bool // a record missing after the page's lines
		)
		err := s.db.retry(ctx, "audit read", func() error {
			page, gap = page[:0], false
			rows, err := s.db.sql.QueryContext(ctx, s.db.q(`SELECT seq, line FROM audit_records
				WHERE chain = $1 AND seq >= $2 AND seq < $3 ORDER BY seq LIMIT $4`), s.chain, int64(cur), int64(end), auditReadPage)
			if err != nil {
				return err
			}
			defer rows.Close()
			want := int64(cur)
			for rows.Next() {
				var (
					seq  int64
					line []byte
				)
				if err := rows.Scan(&seq, &line); err != nil {
					return err
				}
				if seq != want {
					gap = true
					break
				}
				want++
				page = append(page, line)
			}
			return rows.Err()
		})
		if err != nil {
			return err
		}
		for _, line := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := f(line); err != nil {
				return err
			}
		}
		cur += uint64(len(page))
		if gap || len(page) == 0 {
			return s.missing(ctx, cur, cur == from)
		}
	}
	return nil
}

// missing returns the error of record seq missing; if first (no record
// before it was read), of the first missing before it, back to the last
// record stored.
func (s *AuditStore) missing(ctx context.Context, seq uint64, first bool) error {
	if first && seq > 0 {
		var last sql.NullInt64
		err := s.db.retry(ctx, "audit read", func() error {
			return s.db.sql.QueryRowContext(ctx, s.db.q(`SELECT MAX(seq) FROM audit_records WHERE chain = $1 AND seq < $2`), s.chain, int64(seq)).Scan(&last)
		})
		if err != nil {
			return err
		}
		seq = 0
		if last.Valid {
			seq = uint64(last.Int64) + 1
		}
	}
	return &Error{Code: CodeCorrupt, Op: "audit read", Msg: fmt.Sprintf("chain %q: record %d is missing", s.chain, seq), Err: &audit.MissingError{Seq: seq}}
}
