package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wasmhooks/wasmhooks/runtime"
)

// Modules is a runtime.ModuleStore kept in a database: module bytes by the
// hex sha256 of their content, with their validation reports. Bytes are
// checked against their digest on Put and on Get, so a row changed in the
// database is refused (runtime.ErrModuleMismatch), never loaded.
type Modules struct {
	db *DB
}

var _ runtime.ModuleStore = (*Modules)(nil)

// NewModules returns the module store of db.
func NewModules(db *DB) *Modules { return &Modules{db: db} }

// Put implements runtime.ModuleStore: bytes already held keep one row,
// with the newer report.
func (s *Modules) Put(ctx context.Context, wasm []byte, info *runtime.ModuleInfo) error {
	if err := runtime.CheckModule("", wasm, info); err != nil {
		return err
	}
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	return s.db.retry(ctx, "modules put", func() error {
		_, err := s.db.sql.ExecContext(ctx, s.db.q(`INSERT INTO modules (digest, wasm, size, info) VALUES ($1, $2, $3, $4)
			ON CONFLICT (digest) DO UPDATE SET info = excluded.info`), info.Digest, wasm, len(wasm), b)
		return err
	})
}

// Get implements runtime.ModuleStore.
func (s *Modules) Get(ctx context.Context, digest string) ([]byte, *runtime.ModuleInfo, error) {
	var wasm, b []byte
	err := s.db.retry(ctx, "modules get", func() error {
		return s.db.sql.QueryRowContext(ctx, s.db.q(`SELECT wasm, info FROM modules WHERE digest = $1`), digest).Scan(&wasm, &b)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("%w: %q", runtime.ErrModuleNotFound, digest)
	}
	if err != nil {
		return nil, nil, err
	}
	info, err := decodeModuleInfo(digest, b)
	if err != nil {
		return nil, nil, err
	}
	if err := runtime.CheckModule(digest, wasm, info); err != nil {
		return nil, nil, err
	}
	return bytes.Clone(wasm), info, nil
}

// Info implements runtime.ModuleStore.
func (s *Modules) Info(ctx context.Context, digest string) (*runtime.ModuleInfo, error) {
	var b []byte
	err := s.db.retry(ctx, "modules info", func() error {
		return s.db.sql.QueryRowContext(ctx, s.db.q(`SELECT info FROM modules WHERE digest = $1`), digest).Scan(&b)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %q", runtime.ErrModuleNotFound, digest)
	}
	if err != nil {
		return nil, err
	}
	return decodeModuleInfo(digest, b)
}

func decodeModuleInfo(digest string, b []byte) (*runtime.ModuleInfo, error) {
	var info runtime.ModuleInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, &Error{Code: CodeCorrupt, Op: "modules", Msg: fmt.Sprintf("module %s: its report does not decode", digest), Err: err}
	}
	if info.Digest != digest {
		return nil, fmt.Errorf("%w: the report stored under %s is of %s", runtime.ErrModuleMismatch, digest, info.Digest)
	}
	return &info, nil
}

// List implements runtime.ModuleStore.
func (s *Modules) List(ctx context.Context) ([]string, error) {
	var ds []string
	err := s.db.retry(ctx, "modules list", func() error {
		ds = ds[:0]
		rows, err := s.db.sql.QueryContext(ctx, `SELECT digest FROM modules ORDER BY digest`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				return err
			}
			ds = append(ds, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// Delete implements runtime.ModuleStore.
func (s *Modules) Delete(ctx context.Context, digest string) error {
	var n int64
	err := s.db.retry(ctx, "modules delete", func() error {
		r, err := s.db.sql.ExecContext(ctx, s.db.q(`DELETE FROM modules WHERE digest = $1`), digest)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", runtime.ErrModuleNotFound, digest)
	}
	return nil
}
