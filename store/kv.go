package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// KVOptions configures a KV. The zero value is ready to use.
type KVOptions struct {
	// MaxKeysPerScope bounds the live keys of one (tenant, hook). Zero
	// means builtin.DefaultMaxKeysPerScope (1000).
	MaxKeysPerScope int
	// MaxValueBytes bounds a stored value, in bytes; a longer one is
	// refused with ErrValueTooLarge. Zero means
	// builtin.DefaultMaxValueBytes (64 KiB), the bound kv.set applies by
	// default: the store enforces it again so that no caller can fill the
	// database with one key.
	MaxValueBytes int
	// TTL, if positive, makes every value expire that long after it was
	// last set: an expired value is not found, does not count against the
	// scope's keys, and SweepExpired deletes it. Zero means never.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// CodeValueTooLarge: a kv value longer than KVOptions.MaxValueBytes, or a key
// outside 1 to builtin.MaxKeyBytes bytes.
const CodeValueTooLarge = "STORE_VALUE_TOO_LARGE"

// ErrValueTooLarge matches a value refused for its size.
var ErrValueTooLarge = &Error{Code: CodeValueTooLarge}

// KV is a builtin.KVStore kept in a database. The scope quota holds across
// processes: setting a new key locks its scope's row first.
type KV struct {
	db   *DB
	opts KVOptions
}

var _ builtin.KVStore = (*KV)(nil)

// NewKV returns the kv store of db.
func NewKV(db *DB, opts KVOptions) *KV {
	if opts.MaxKeysPerScope <= 0 {
		opts.MaxKeysPerScope = builtin.DefaultMaxKeysPerScope
	}
	if opts.MaxValueBytes <= 0 {
		opts.MaxValueBytes = builtin.DefaultMaxValueBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &KV{db: db, opts: opts}
}

// Get implements builtin.KVStore.
func (s *KV) Get(ctx context.Context, scope builtin.KVScope, key string) ([]byte, bool, error) {
	var (
		v   []byte
		exp sql.NullInt64
	)
	err := s.db.sql.QueryRowContext(ctx, s.db.q(`SELECT value, expires_at FROM kv_values
		WHERE tenant = $1 AND hook = $2 AND key = $3`), []byte(scope.Tenant), []byte(scope.Hook), []byte(key)).Scan(&v, &exp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, Unavailable("kv get", err)
	case exp.Valid && exp.Int64 <= s.opts.Now().UnixNano():
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

// Set implements builtin.KVStore.
func (s *KV) Set(ctx context.Context, scope builtin.KVScope, key string, value []byte) error {
	if len(value) > s.opts.MaxValueBytes {
		return &Error{Code: CodeValueTooLarge, Op: "kv set", Msg: fmt.Sprintf("%d bytes, bound %d", len(value), s.opts.MaxValueBytes)}
	}
	if len(key) == 0 || len(key) > builtin.MaxKeyBytes {
		return &Error{Code: CodeValueTooLarge, Op: "kv set", Msg: fmt.Sprintf("key of %d bytes, bound 1 to %d", len(key), builtin.MaxKeyBytes)}
	}
	now := s.opts.Now().UnixNano()
	var exp sql.NullInt64
	if s.opts.TTL > 0 {
		exp = sql.NullInt64{Int64: now + s.opts.TTL.Nanoseconds(), Valid: true}
	}
	return s.db.tx(ctx, "kv set", func(tx *sql.Tx) error {
		if _, err := s.db.stmt(ctx, tx, `INSERT INTO kv_scopes (tenant, hook) VALUES ($1, $2)
			ON CONFLICT (tenant, hook) DO NOTHING`).ExecContext(ctx, []byte(scope.Tenant), []byte(scope.Hook)); err != nil {
			return err
		}
		var one int
		if err := s.db.stmt(ctx, tx, `SELECT 1 FROM kv_scopes WHERE tenant = $1 AND hook = $2`+s.db.d.ForUpdate()).QueryRowContext(ctx,
			[]byte(scope.Tenant), []byte(scope.Hook)).Scan(&one); err != nil {
			return err
		}
		var live int
		if err := s.db.stmt(ctx, tx, `SELECT COUNT(*) FROM kv_values WHERE tenant = $1 AND hook = $2 AND key = $3
			AND (expires_at IS NULL OR expires_at > $4)`).QueryRowContext(ctx, []byte(scope.Tenant), []byte(scope.Hook), []byte(key), now).Scan(&live); err != nil {
			return err
		}
		if live == 0 {
			var n int
			if err := s.db.stmt(ctx, tx, `SELECT COUNT(*) FROM kv_values WHERE tenant = $1 AND hook = $2
				AND (expires_at IS NULL OR expires_at > $3)`).QueryRowContext(ctx, []byte(scope.Tenant), []byte(scope.Hook), now).Scan(&n); err != nil {
				return err
			}
			if n >= s.opts.MaxKeysPerScope {
				return &kvFull{fmt.Errorf("%w: %d keys", builtin.ErrKVFull, s.opts.MaxKeysPerScope)}
			}
		}
		_, err := s.db.stmt(ctx, tx, `INSERT INTO kv_values (tenant, hook, key, value, expires_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant, hook, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`).ExecContext(ctx,
			[]byte(scope.Tenant), []byte(scope.Hook), []byte(key), value, exp)
		return err
	})
}

// kvFull carries builtin.ErrKVFull through tx as an answer, not a failure.
type kvFull struct{ err error }

func (e *kvFull) Error() string { return e.err.Error() }
func (e *kvFull) Unwrap() error { return e.err }

// SweepExpired deletes the values expired at now and returns how many.
func (s *KV) SweepExpired(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.sql.ExecContext(ctx, s.db.q(`DELETE FROM kv_values WHERE expires_at IS NOT NULL AND expires_at <= $1`), now.UnixNano())
	if err != nil {
		return 0, Unavailable("kv sweep", err)
	}
	n, err := res.RowsAffected()
	return n, Unavailable("kv sweep", err)
}
