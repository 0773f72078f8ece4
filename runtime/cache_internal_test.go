package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestIdenticalBytesShareCompiledCode(t *testing.T) {
	ctx := context.Background()
	r, err := New(ctx, Config{CacheModules: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	wasm, err := os.ReadFile(filepath.Join("..", "testdata", "guests", "scripted.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Load(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Load(ctx, append([]byte(nil), wasm...))
	if err != nil {
		t.Fatal(err)
	}
	if a.c != b.c {
		t.Fatal("identical bytes were compiled twice")
	}
	// Pools stay separate per tenant even though the code is shared.
	if _, err := r.Invoke(ctx, a, Request{Tenant: "x", Context: map[string]any{"s": "@@"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Invoke(ctx, b, Request{Tenant: "y", Context: map[string]any{"s": "@@"}}); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	n := len(r.pools)
	r.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d pools, want one per tenant", n)
	}
	// Closing one Module keeps the shared code alive for the other.
	_ = a.Close(ctx)
	if _, err := r.Invoke(ctx, b, Request{Tenant: "y", Context: map[string]any{"s": "@@"}}); err != nil {
		t.Fatal(err)
	}
}
