package interceptor

import (
	"bytes"
	"context"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// Bounds of a SessionKV's scope (one hook's state under one tenant: a key
// per session).
const (
	// DefaultMaxSessionStates is the keys a scope keeps when
	// SessionKV.MaxKeysPerScope is zero.
	DefaultMaxSessionStates = 4096
	// DefaultMaxSessionStateBytes is the bytes of values a scope keeps
	// when SessionKV.MaxBytesPerScope is zero.
	DefaultMaxSessionStateBytes = 32 << 20
)

// SessionKV is the key-value store of an interceptor server. The security
// hooks keep a key per session, and a session's end is nothing they see: in
// a store that refuses a new key once a scope is full (builtin.MemoryKV,
// 1,000 keys), every session after the first thousand has its state
// refused, and a fail-closed hook then blocks all its traffic (fail-open:
// lets it through unchecked). A SessionKV instead forgets the scope's least
// recently used key (read or written) when a new one would pass
// MaxKeysPerScope or MaxBytesPerScope: the state of the session idle
// longest goes, never a new session's.
//
// The zero value is an empty store with the default bounds; it is safe for
// concurrent use.
type SessionKV struct {
	// MaxKeysPerScope bounds a scope's keys. Zero means
	// DefaultMaxSessionStates. Set it before first use.
	MaxKeysPerScope int
	// MaxBytesPerScope bounds the bytes of a scope's values. Zero means
	// DefaultMaxSessionStateBytes. Set it before first use.
	MaxBytesPerScope int

	mu     sync.Mutex
	scopes map[builtin.KVScope]*lruScope
}

// lruScope is one scope's keys, in order of use, and their values' bytes.
// SessionKV's lock guards it, so its LRU is the unsynchronised one.
type lruScope struct {
	keys  *simplelru.LRU[string, []byte]
	bytes int
}

// Get implements builtin.KVStore; the key becomes the most recently used.
func (s *SessionKV) Get(ctx context.Context, scope builtin.KVScope, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.scopes[scope]
	if sc == nil {
		return nil, false, nil
	}
	v, ok := sc.keys.Get(key)
	return bytes.Clone(v), ok, nil
}

// Set implements builtin.KVStore. It never refuses for want of room: the
// least recently used keys of the scope go until the bounds hold.
func (s *SessionKV) Set(ctx context.Context, scope builtin.KVScope, key string, value []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	maxKeys, maxBytes := s.MaxKeysPerScope, s.MaxBytesPerScope
	if maxKeys <= 0 {
		maxKeys = DefaultMaxSessionStates
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxSessionStateBytes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scopes == nil {
		s.scopes = map[builtin.KVScope]*lruScope{}
	}
	sc := s.scopes[scope]
	if sc == nil {
		sc = &lruScope{}
		var err error
		// The cache evicts past maxKeys itself, and counts the bytes
		// that go.
		if sc.keys, err = simplelru.NewLRU(maxKeys, func(_ string, v []byte) { sc.bytes -= len(v) }); err != nil {
			return err
		}
		s.scopes[scope] = sc
	}
	if old, ok := sc.keys.Peek(key); ok {
		sc.bytes -= len(old) // replaced, not evicted: no callback
	}
	sc.keys.Add(key, bytes.Clone(value))
	sc.bytes += len(value)
	for sc.keys.Len() > 1 && sc.bytes > maxBytes {
		sc.keys.RemoveOldest()
	}
	return nil
}

// Len returns how many keys scope holds.
func (s *SessionKV) Len(scope builtin.KVScope) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc := s.scopes[scope]; sc != nil {
		return sc.keys.Len()
	}
	return 0
}
