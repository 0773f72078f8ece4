package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// TestFileKV checks that --kv's store keeps data across opens, by scope, and
// refuses a file that is not its JSON.
func TestFileKV(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kv.json")
	a := builtin.KVScope{Tenant: "acme", Hook: "loop-guard"}
	b := builtin.KVScope{Tenant: "acme", Hook: "other"}

	s, err := openFileKV(path) // no file yet: empty
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.Get(ctx, a, "k"); found {
		t.Fatal("found a key in a new store")
	}
	if err := s.Set(ctx, a, "k", []byte(`{"n":1,"s":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, b, "k", []byte(`2`)); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v, %v; want mode 0600", st, err)
	}

	s2, err := openFileKV(path) // another process, later
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		scope builtin.KVScope
		want  string
	}{{a, `{"n":1,"s":"x"}`}, {b, `2`}} {
		v, found, err := s2.Get(ctx, tt.scope, "k")
		if err != nil || !found || string(v) != tt.want {
			t.Errorf("Get(%v) = %s, %v, %v; want %s", tt.scope, v, found, err, tt.want)
		}
	}
	if _, found, _ := s2.Get(ctx, builtin.KVScope{Tenant: "other", Hook: "loop-guard"}, "k"); found {
		t.Error("a key crossed tenants")
	}

	// The key limit of a scope is MemoryKV's.
	for i := 0; i < builtin.DefaultMaxKeysPerScope-1; i++ {
		s2.data[a][strings.Repeat("x", i+2)] = []byte("1")
	}
	if err := s2.Set(ctx, a, "one-too-many", []byte("1")); !errors.Is(err, builtin.ErrKVFull) {
		t.Errorf("Set over the key limit: %v, want ErrKVFull", err)
	}

	for name, content := range map[string]string{
		"not json":        "{",
		"duplicate key":   `{"scopes":[],"scopes":[]}`,
		"wrong structure": `{"scopes":{"tenant":1}}`,
	} {
		bad := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(bad, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := openFileKV(bad); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}
