package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrModuleNotFound is wrapped by a ModuleStore's error for a digest it does
// not hold.
var ErrModuleNotFound = errors.New("runtime: module not found")

// ErrModuleMismatch is wrapped by a ModuleStore's error for a module whose
// bytes do not hash to the digest of its report (or whose report's size is
// not theirs): on Put, a caller's mistake; on Get, a store that changed
// them.
var ErrModuleMismatch = errors.New("runtime: module does not match its digest")

// ModuleStore keeps modules by content: each under the hex sha256 of its
// bytes (Digest), with the report Validate made of it, so a server can
// accept a module once and load it by digest later, in any process. Put of
// bytes already held keeps one copy (the report is replaced by the newer).
// Implementations check that the bytes match the digest on Put and on Get,
// and must be safe for concurrent use. The store layer (package store)
// keeps them in SQLite or Postgres; runtime/modstoretest is the conformance
// kit. Use StoreModule to validate and store in one step.
type ModuleStore interface {
	// Put stores wasm with info, its report: info.Digest must be
	// Digest(wasm) and info.Size len(wasm), else an error wrapping
	// ErrModuleMismatch.
	Put(ctx context.Context, wasm []byte, info *ModuleInfo) error
	// Get returns the bytes and report of the module digest, or an error
	// wrapping ErrModuleNotFound (ErrModuleMismatch for stored bytes that
	// no longer hash to it).
	Get(ctx context.Context, digest string) ([]byte, *ModuleInfo, error)
	// Info returns the report of the module digest without its bytes.
	Info(ctx context.Context, digest string) (*ModuleInfo, error)
	// List returns the digests held, sorted.
	List(ctx context.Context) ([]string, error)
	// Delete removes the module digest; an error wrapping
	// ErrModuleNotFound if it is not held.
	Delete(ctx context.Context, digest string) error
}

// StoreModule validates wasm with opts and stores it with its report in s.
// A module Validate refuses is not stored; the error is Validate's.
func StoreModule(ctx context.Context, s ModuleStore, wasm []byte, opts ValidateOptions) (*ModuleInfo, error) {
	info, err := Validate(wasm, opts)
	if err != nil {
		return nil, err
	}
	if err := s.Put(ctx, wasm, info); err != nil {
		return nil, err
	}
	return info, nil
}

// CheckModule reports whether wasm and info are a module and its report:
// info.Digest is Digest(wasm) and info.Size len(wasm). Stores call it on Put
// and on Get; digest, if not empty, is the digest asked for.
func CheckModule(digest string, wasm []byte, info *ModuleInfo) error {
	switch got := Digest(wasm); {
	case info == nil:
		return fmt.Errorf("%w: no report", ErrModuleMismatch)
	case got != info.Digest:
		return fmt.Errorf("%w: the bytes hash to %s, the report says %s", ErrModuleMismatch, got, info.Digest)
	case digest != "" && got != digest:
		return fmt.Errorf("%w: the bytes stored under %s hash to %s", ErrModuleMismatch, digest, got)
	case info.Size != len(wasm):
		return fmt.Errorf("%w: %d bytes, the report says %d", ErrModuleMismatch, len(wasm), info.Size)
	}
	return nil
}

// MemoryModules is a ModuleStore in memory (reports kept as JSON, so each
// Get returns copies). It is safe for concurrent use.
type MemoryModules struct {
	mu   sync.Mutex // guards mods
	mods map[string]memModule
}

type memModule struct {
	wasm, info []byte
}

// NewMemoryModules returns an empty MemoryModules.
func NewMemoryModules() *MemoryModules { return &MemoryModules{mods: map[string]memModule{}} }

// Put implements ModuleStore.
func (m *MemoryModules) Put(_ context.Context, wasm []byte, info *ModuleInfo) error {
	if err := CheckModule("", wasm, info); err != nil {
		return err
	}
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mods[info.Digest] = memModule{wasm: bytes.Clone(wasm), info: b}
	return nil
}

func (m *MemoryModules) get(digest string) (memModule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mod, ok := m.mods[digest]
	if !ok {
		return memModule{}, fmt.Errorf("%w: %q", ErrModuleNotFound, digest)
	}
	return mod, nil
}

// Get implements ModuleStore.
func (m *MemoryModules) Get(_ context.Context, digest string) ([]byte, *ModuleInfo, error) {
	mod, err := m.get(digest)
	if err != nil {
		return nil, nil, err
	}
	var info ModuleInfo
	if err := json.Unmarshal(mod.info, &info); err != nil {
		return nil, nil, err
	}
	return bytes.Clone(mod.wasm), &info, nil
}

// Info implements ModuleStore.
func (m *MemoryModules) Info(_ context.Context, digest string) (*ModuleInfo, error) {
	mod, err := m.get(digest)
	if err != nil {
		return nil, err
	}
	var info ModuleInfo
	if err := json.Unmarshal(mod.info, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// List implements ModuleStore.
func (m *MemoryModules) List(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ds := make([]string, 0, len(m.mods))
	for d := range m.mods {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	return ds, nil
}

// Delete implements ModuleStore.
func (m *MemoryModules) Delete(_ context.Context, digest string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mods[digest]; !ok {
		return fmt.Errorf("%w: %q", ErrModuleNotFound, digest)
	}
	delete(m.mods, digest)
	return nil
}
