// Package kvtest is a conformance kit for builtin.KVStore implementations:
// call Run with a function that makes a fresh, empty store and it checks the
// contract builtin.KVStore documents, each rule as a subtest, including under
// concurrency.
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// Harness is one fresh store under test.
type Harness struct {
	// Store is the implementation, empty.
	Store builtin.KVStore
	// MaxKeysPerScope is the store's limit on the keys of one scope; it
	// must be small (a few dozen) for the test to stay quick.
	MaxKeysPerScope int
}

// Run checks the contract of builtin.KVStore on stores made by newStore, one
// per subtest.
func Run(t *testing.T, newStore func(t *testing.T) Harness) {
	ctx := context.Background()
	a := builtin.KVScope{Tenant: "acme", Hook: "h1"}
	get := func(t *testing.T, s builtin.KVStore, sc builtin.KVScope, key string) ([]byte, bool) {
		t.Helper()
		v, ok, err := s.Get(ctx, sc, key)
		if err != nil {
			t.Fatalf("Get(%v, %q): %v", sc, key, err)
		}
		return v, ok
	}
	set := func(t *testing.T, s builtin.KVStore, sc builtin.KVScope, key, value string) {
		t.Helper()
		if err := s.Set(ctx, sc, key, []byte(value)); err != nil {
			t.Fatalf("Set(%v, %q): %v", sc, key, err)
		}
	}
	t.Run("set get overwrite", func(t *testing.T) {
		s := newStore(t).Store
		if v, ok := get(t, s, a, "k"); ok || v != nil {
			t.Fatalf("missing key: %q, %v", v, ok)
		}
		set(t, s, a, "k", `{"n":1}`)
		if v, ok := get(t, s, a, "k"); !ok || string(v) != `{"n":1}` {
			t.Fatalf("got %q, %v", v, ok)
		}
		set(t, s, a, "k", `"two"`)
		if v, _ := get(t, s, a, "k"); string(v) != `"two"` {
			t.Fatalf("after overwrite: %q", v)
		}
		bin := "\x00\xff\"\n\u00e9"
		set(t, s, a, "bin", bin)
		if v, _ := get(t, s, a, "bin"); string(v) != bin {
			t.Fatalf("bytes not kept: %q", v)
		}
	})
	t.Run("scopes are isolated", func(t *testing.T) {
		s := newStore(t).Store
		scopes := []builtin.KVScope{
			{Tenant: "acme", Hook: "h1"}, {Tenant: "acme", Hook: "h2"}, {Tenant: "other", Hook: "h1"},
			{Tenant: "acme\x00h1", Hook: ""}, {Tenant: "", Hook: "acme\x00h1"}, {Tenant: "ac", Hook: "meh1"},
		}
		for i, sc := range scopes {
			set(t, s, sc, "k", fmt.Sprint(i))
		}
		for i, sc := range scopes {
			if v, ok := get(t, s, sc, "k"); !ok || string(v) != fmt.Sprint(i) {
				t.Errorf("scope %v sees %q, %v; want %d", sc, v, ok, i)
			}
		}
	})
	t.Run("values are copied", func(t *testing.T) {
		s := newStore(t).Store
		in := []byte(`"abc"`)
		if err := s.Set(ctx, a, "k", in); err != nil {
			t.Fatal(err)
		}
		in[1] = 'X'
		v, _ := get(t, s, a, "k")
		if string(v) != `"abc"` {
			t.Fatalf("store shares the caller's slice: %q", v)
		}
		v[1] = 'Y'
		if v2, _ := get(t, s, a, "k"); string(v2) != `"abc"` {
			t.Fatalf("store shares its slice: %q", v2)
		}
	})
	t.Run("scope quota", func(t *testing.T) {
		h := newStore(t)
		for i := range h.MaxKeysPerScope {
			set(t, h.Store, a, fmt.Sprint("k", i), "1")
		}
		if err := h.Store.Set(ctx, a, "one-more", []byte("1")); !errors.Is(err, builtin.ErrKVFull) {
			t.Fatalf("new key in a full scope: %v", err)
		}
		set(t, h.Store, a, "k0", "2") // an existing key may change
		set(t, h.Store, builtin.KVScope{Tenant: "acme", Hook: "h2"}, "k", "1")
		if _, ok := get(t, h.Store, a, "one-more"); ok {
			t.Fatal("the refused key was stored")
		}
	})
	t.Run("concurrent new keys never pass the quota", func(t *testing.T) {
		h := newStore(t)
		var stored, full atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range h.MaxKeysPerScope {
					err := h.Store.Set(ctx, a, fmt.Sprintf("g%d-%d", g, i), []byte("1"))
					switch {
					case err == nil:
						stored.Add(1)
					case errors.Is(err, builtin.ErrKVFull):
						full.Add(1)
					default:
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if stored.Load() != int64(h.MaxKeysPerScope) {
			t.Fatalf("%d keys stored in a scope of %d", stored.Load(), h.MaxKeysPerScope)
		}
	})
	t.Run("concurrent writers of one key", func(t *testing.T) {
		s := newStore(t).Store
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 10 {
					if err := s.Set(ctx, a, "k", fmt.Appendf(nil, "%d", g*100+i)); err != nil {
						t.Error(err)
					}
					if _, _, err := s.Get(ctx, a, "k"); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if v, ok := get(t, s, a, "k"); !ok || len(v) == 0 || bytes.ContainsAny(v, "\x00") {
			t.Fatalf("final value %q, %v", v, ok)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		s := newStore(t).Store
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Set(cctx, a, "k", []byte("1")); err == nil {
			t.Fatal("Set with a cancelled context succeeded")
		}
		if _, ok := get(t, s, a, "k"); ok {
			t.Fatal("Set with a cancelled context stored its value")
		}
		if _, _, err := s.Get(cctx, a, "k"); err == nil {
			t.Fatal("Get with a cancelled context succeeded")
		}
	})
}
