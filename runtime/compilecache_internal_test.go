package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// variant returns wasm with a custom section that makes its digest differ;
// custom sections are stripped before compiling, so every variant has the
// same compiled size.
func variant(wasm []byte, i int) []byte {
	return wasmbin.AppendCustomSection(wasm, "variant", []byte{byte(i), byte(i >> 8)})
}

// The compile cache is bounded by the bytes its modules hold, not only by
// their count: with room for two modules by the estimate, loading a third
// evicts the least recently used, though CacheModules would keep 128.
func TestCompileCacheBoundedByBytes(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile(filepath.Join("..", "testdata", "guests", "scripted.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	probe, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := probe.Load(ctx, variant(wasm, 0))
	if err != nil {
		t.Fatal(err)
	}
	one := m.c.hostBytes
	if one <= int64(len(wasm)) {
		t.Fatalf("estimate %d for a %d-byte module, want more than its size", one, len(wasm))
	}
	_ = probe.Close(ctx)

	r, err := New(ctx, Config{CacheBytes: 2*one + one/2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	var digests []string
	for i := range 5 {
		m, err := r.Load(ctx, variant(wasm, i))
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, m.Digest())
		if got := r.cacheBytes.Load(); got > r.cfg.CacheBytes {
			t.Errorf("after %d loads the cache holds %d bytes by the estimate, over %d", i+1, got, r.cfg.CacheBytes)
		}
		_ = m.Close(ctx)
	}
	if n := r.cache.Len(); n != 2 {
		t.Errorf("%d modules cached, want 2", n)
	}
	for i, d := range digests {
		if want := i >= 3; r.cache.Contains(d) != want {
			t.Errorf("module %d cached = %v, want %v (least recently used evicted)", i, !want, want)
		}
	}
	if got := r.cacheBytes.Load(); got != 2*one {
		t.Errorf("cache bytes %d, want %d", got, 2*one)
	}
	r.cache.Purge()
	if got := r.cacheBytes.Load(); got != 0 {
		t.Errorf("cache bytes %d after a purge, want 0", got)
	}
}

// Custom sections (the name section above all) never reach wazero: it
// would keep a name section's maps for the module's life, 11 times its size.
func TestCustomSectionsAreNotCompiled(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile(filepath.Join("..", "testdata", "guests", "scripted.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	// A name section that names the module "named" (subsection 0).
	named := wasmbin.AppendCustomSection(wasm, "name", []byte{0x00, 0x06, 0x05, 'n', 'a', 'm', 'e', 'd'})
	for _, cfg := range []Config{{}, {disableMetering: true}} {
		r, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := r.Load(ctx, named)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.c.code.Name(); got != "" {
			t.Errorf("metered %v: the compiled module is named %q: its name section reached wazero", !cfg.disableMetering, got)
		}
		if len(m.c.code.CustomSections()) != 0 {
			t.Errorf("metered %v: wazero kept %d custom sections", !cfg.disableMetering, len(m.c.code.CustomSections()))
		}
		_ = r.Close(ctx)
	}
}
