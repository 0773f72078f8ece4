package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
)

// Names of the key-value capabilities.
const (
	KVGetName = "kv.get"
	KVSetName = "kv.set"
)

// Defaults and limits of the key-value capabilities.
const (
	// MaxKeyBytes is the longest key, in bytes.
	MaxKeyBytes = 256
	// DefaultMaxValueBytes bounds a value's JSON encoding when
	// KVConfig.MaxValueBytes is zero.
	DefaultMaxValueBytes = 64 << 10
	// DefaultMaxKeysPerScope bounds the keys of one (tenant, hook) when
	// MemoryKV.MaxKeysPerScope is zero.
	DefaultMaxKeysPerScope = 1000
)

// ErrKVFull means a scope holds as many keys as its store allows. kv.set
// answers it with QUOTA_EXCEEDED.
var ErrKVFull = errors.New("builtin: key-value scope is full")

// KVScope is what key-value data is scoped by: tenants and hooks never see
// each other's data. It comes from the call's Caller, never from the payload.
// It is a comparable value, safe to copy and share.
type KVScope struct {
	Tenant string
	Hook   string
}

// KVStore stores JSON values by scope and key. Values are stored and returned
// as their compact JSON encoding.
//
// Implementations must be safe for concurrent use by multiple goroutines.
type KVStore interface {
	// Get returns the value under key in scope, and whether there is one.
	Get(ctx context.Context, scope KVScope, key string) (value []byte, found bool, err error)
	// Set stores value under key in scope. It returns an error wrapping
	// ErrKVFull if the key is new and the scope is full.
	Set(ctx context.Context, scope KVScope, key string, value []byte) error
}

// MemoryKV is an in-memory KVStore. It copies values in and out.
//
// The zero value is an empty store ready to use. A MemoryKV is safe for
// concurrent use by multiple goroutines.
type MemoryKV struct {
	// MaxKeysPerScope bounds the keys of one scope. Zero means
	// DefaultMaxKeysPerScope (1000). Set it before first use.
	MaxKeysPerScope int

	mu   sync.RWMutex                  // guards data
	data map[KVScope]map[string][]byte // by scope, then key
}

// NewMemoryKV returns an empty MemoryKV with the default limits.
func NewMemoryKV() *MemoryKV { return &MemoryKV{} }

// Get implements KVStore.
func (s *MemoryKV) Get(ctx context.Context, scope KVScope, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.data[scope][key]
	return bytes.Clone(v), ok, nil
}

// Set implements KVStore.
func (s *MemoryKV) Set(ctx context.Context, scope KVScope, key string, value []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	limit := s.MaxKeysPerScope
	if limit <= 0 {
		limit = DefaultMaxKeysPerScope
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		s.data = make(map[KVScope]map[string][]byte)
	}
	m := s.data[scope]
	if m == nil {
		m = make(map[string][]byte)
		s.data[scope] = m
	}
	if _, exists := m[key]; !exists && len(m) >= limit {
		return fmt.Errorf("%w: %d keys", ErrKVFull, limit)
	}
	m[key] = bytes.Clone(value)
	return nil
}

// KVConfig configures kv.get and kv.set. The zero value works: a fresh
// MemoryKV and the default limits. Both capabilities are free. It is read
// once by KV, KVGet or KVSet; the Store must be safe for concurrent use.
type KVConfig struct {
	// Store holds the data. Nil means a new MemoryKV (shared by the two
	// capabilities built from this config).
	Store KVStore
	// MaxValueBytes bounds a value's compact JSON encoding, in bytes.
	// Zero means DefaultMaxValueBytes (64 KiB).
	MaxValueBytes int
	// Gates guard both capabilities. Optional.
	Gates []capability.Gate
}

func (c KVConfig) withDefaults() KVConfig {
	if c.Store == nil {
		c.Store = NewMemoryKV()
	}
	if c.MaxValueBytes <= 0 {
		c.MaxValueBytes = DefaultMaxValueBytes
	}
	return c
}

// KV returns the kv.get and kv.set capabilities sharing one store.
func KV(cfg KVConfig) (get, set capability.Capability) {
	cfg = cfg.withDefaults()
	return kvGet(cfg), kvSet(cfg)
}

// KVGet returns kv.get: {"key": string of 1 to 256 bytes} -> {"found": bool,
// "value": the stored value or null}. Data is scoped by the caller's tenant
// and hook.
func KVGet(cfg KVConfig) capability.Capability { return kvGet(cfg.withDefaults()) }

// KVSet returns kv.set: {"key": string of 1 to 256 bytes, "value": any JSON
// value} -> {"ok": true}. A value whose encoding is over MaxValueBytes gets
// INVALID_REQUEST; a new key in a full scope gets QUOTA_EXCEEDED.
func KVSet(cfg KVConfig) capability.Capability { return kvSet(cfg.withDefaults()) }

const kvKeySchema = `{"type": "string", "minLength": 1, "maxLength": 256}`

func kvGet(cfg KVConfig) capability.Capability {
	return capability.Capability{
		Name:        KVGetName,
		Description: "Reads a JSON value stored by this hook for this tenant.",
		Schema: `{"type": "object", "properties": {"key": ` + kvKeySchema + `},
			"required": ["key"], "additionalProperties": false}`,
		Gates: cfg.Gates,
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			key, err := kvRequestKey(ctx, req)
			if err != nil {
				return nil, err
			}
			raw, found, err := cfg.Store.Get(ctx, scopeOf(req), key)
			if err != nil {
				return nil, err
			}
			var v any
			if found {
				if v, err = abi.ParseJSON(raw, abi.JSONLimits{MaxBytes: len(raw) + 1, MaxDepth: 1 << 10}); err != nil {
					return nil, fmt.Errorf("kv.get: stored value is corrupt: %w", err)
				}
			}
			return &capability.Result{Value: map[string]any{"found": found, "value": v}}, nil
		},
	}
}

func kvSet(cfg KVConfig) capability.Capability {
	return capability.Capability{
		Name:        KVSetName,
		Description: "Stores a JSON value under a key for this hook and tenant.",
		Schema: `{"type": "object", "properties": {"key": ` + kvKeySchema + `, "value": true},
			"required": ["key", "value"], "additionalProperties": false}`,
		Gates: cfg.Gates,
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			key, err := kvRequestKey(ctx, req)
			if err != nil {
				return nil, err
			}
			m, _ := req.Payload.(map[string]any)
			enc, err := abi.Marshal(m["value"])
			if err != nil {
				return nil, fmt.Errorf("kv.set: encoding the value: %w", err)
			}
			if len(enc) > cfg.MaxValueBytes {
				return nil, abi.Errorf(abi.StatusInvalidRequest,
					"value is %d bytes encoded, over the limit of %d", len(enc), cfg.MaxValueBytes)
			}
			if err := cfg.Store.Set(ctx, scopeOf(req), key, enc); err != nil {
				if errors.Is(err, ErrKVFull) {
					return nil, abi.Errorf(abi.StatusQuotaExceeded,
						"this hook's key-value store is full; overwrite an existing key")
				}
				return nil, err
			}
			return &capability.Result{Value: map[string]any{"ok": true}}, nil
		},
	}
}

// kvRequestKey returns the key of a kv request, unless ctx has ended.
func kvRequestKey(ctx context.Context, req *capability.Request) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return kvKey(req.Payload)
}

// kvKey returns the payload's key, checking its length in bytes (the schema
// counts characters).
func kvKey(payload any) (string, error) {
	m, _ := payload.(map[string]any)
	key, ok := m["key"].(string)
	if !ok || key == "" {
		return "", abi.NewError(abi.StatusInvalidRequest, "key must be a non-empty string")
	}
	if len(key) > MaxKeyBytes {
		return "", abi.Errorf(abi.StatusInvalidRequest, "key is %d bytes, over the limit of %d", len(key), MaxKeyBytes)
	}
	return key, nil
}

func scopeOf(req *capability.Request) KVScope {
	return KVScope{Tenant: req.Caller.Tenant, Hook: req.Caller.Hook}
}
