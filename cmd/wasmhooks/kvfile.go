package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// MaxKVFileBytes bounds the file --kv reads: 64 MiB.
const MaxKVFileBytes = 64 << 20

const kvUsage = "keep kv.get/kv.set data in this JSON file, so that the next run sees it (default: in memory, gone when the process ends)"

// fileKV is the builtin.KVStore behind --kv: kv data kept in one JSON file,
// so that the data one `wasmhooks run` or `chain` writes is there for the
// next (a hook that keeps state across calls, such as loop-detector, can be
// run one call at a time). It is for local use and demos: the whole file is
// read when the command starts and rewritten at each Set (to a temporary
// file, renamed over it, mode 0600); two processes that write one file at
// the same time lose each other's writes. Scopes and the key limit are
// builtin.MemoryKV's.
type fileKV struct {
	path string
	mu   sync.Mutex                            // guards data and the file
	data map[builtin.KVScope]map[string][]byte // compact JSON values
}

// kvFile is the file's format.
type kvFile struct {
	Scopes []kvFileScope `json:"scopes"`
}

type kvFileScope struct {
	Tenant string                     `json:"tenant"`
	Hook   string                     `json:"hook"`
	Data   map[string]json.RawMessage `json:"data"`
}

// openFileKV reads path, or starts empty if it does not exist.
func openFileKV(path string) (*fileKV, error) {
	s := &fileKV{path: path, data: map[builtin.KVScope]map[string][]byte{}}
	raw, err := runtime.ReadFileLimit(path, MaxKVFileBytes, "kv_file_bytes")
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--kv: %w", err)
	}
	if _, err := abi.ParseJSON(raw, abi.JSONLimits{MaxBytes: MaxKVFileBytes}); err != nil {
		return nil, fmt.Errorf("--kv %s: %w", path, err)
	}
	var f kvFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("--kv %s: %w", path, err)
	}
	for _, sc := range f.Scopes {
		m := map[string][]byte{}
		for k, v := range sc.Data {
			var b bytes.Buffer
			if err := json.Compact(&b, v); err != nil {
				return nil, fmt.Errorf("--kv %s: %w", path, err)
			}
			m[k] = b.Bytes()
		}
		s.data[builtin.KVScope{Tenant: sc.Tenant, Hook: sc.Hook}] = m
	}
	return s, nil
}

// Get implements builtin.KVStore.
func (s *fileKV) Get(ctx context.Context, scope builtin.KVScope, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[scope][key]
	return bytes.Clone(v), ok, nil
}

// Set implements builtin.KVStore: it stores the value and rewrites the file.
func (s *fileKV) Set(ctx context.Context, scope builtin.KVScope, key string, value []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.data[scope]
	if m == nil {
		m = map[string][]byte{}
		s.data[scope] = m
	}
	if _, exists := m[key]; !exists && len(m) >= builtin.DefaultMaxKeysPerScope {
		return fmt.Errorf("%w: %d keys", builtin.ErrKVFull, builtin.DefaultMaxKeysPerScope)
	}
	old, had := m[key]
	m[key] = bytes.Clone(value)
	if err := s.write(); err != nil {
		if had {
			m[key] = old
		} else {
			delete(m, key)
		}
		return err
	}
	return nil
}

// write rewrites the file, scopes in a stable order.
func (s *fileKV) write() error {
	var f kvFile
	for sc, m := range s.data {
		d := make(map[string]json.RawMessage, len(m))
		for k, v := range m {
			d[k] = v
		}
		f.Scopes = append(f.Scopes, kvFileScope{Tenant: sc.Tenant, Hook: sc.Hook, Data: d})
	}
	sort.Slice(f.Scopes, func(i, j int) bool {
		a, b := f.Scopes[i], f.Scopes[j]
		return a.Tenant < b.Tenant || a.Tenant == b.Tenant && a.Hook < b.Hook
	})
	enc, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	if len(enc) > MaxKVFileBytes {
		return fmt.Errorf("%w: the --kv file would be over %d bytes", builtin.ErrKVFull, MaxKVFileBytes)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".kv-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(enc, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.path)
}
