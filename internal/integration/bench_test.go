package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// BenchmarkRedactSecretsGo runs the Go-SDK redact-secrets hook on a 1 KiB
// reply with one secret in it, on a warm instance.
func BenchmarkRedactSecretsGo(b *testing.B) {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{CacheDir: testutil.CacheDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	wasm := testutil.BuildHook(b, "hooks-examples/redact-secrets")
	m, err := rt.Load(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("lorem ipsum dolor sit amet ", 36)[:1000] + " AKIAIOSFODNN7EXAMPLE"
	req := runtime.Request{Tenant: "t", Context: map[string]any{"outgoing": text}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rt.Invoke(ctx, m, req); err != nil {
			b.Fatal(err)
		}
	}
}
