package modstoretest_test

import (
	"context"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/runtime/modstoretest"
)

func TestMemoryModules(t *testing.T) {
	modstoretest.Run(t, func(*testing.T) runtime.ModuleStore { return runtime.NewMemoryModules() })
}

// StoreModule stores a valid module with the report Validate makes of it.
func TestStoreModule(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewMemoryModules()
	wasm := testutil.ReadFile(t, "testdata/guests/policy.wasm")
	info, err := runtime.StoreModule(ctx, s, wasm, runtime.ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, gi, err := s.Get(ctx, runtime.Digest(wasm))
	if err != nil || len(got) != len(wasm) || gi.Digest != info.Digest || gi.ABIVersion != "1" {
		t.Fatalf("Get = %d bytes, %+v, %v", len(got), gi, err)
	}
}
