package meter

import (
	"bytes"
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// TestMergeData: active data segments a few bytes apart become one, and the
// memory an instance starts with is the same byte for byte; modules where
// merging could be seen are left alone.
func TestMergeData(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		segments int // after instrumenting
	}{
		{"adjacent and close", `(data (i32.const 0) "ab") (data (i32.const 2) "cd") (data (i32.const 36) "ef")`, 1},
		{"just too far", `(data (i32.const 0) "ab") (data (i32.const 35) "cd")`, 2},
		{"out of order", `(data (i32.const 30) "ef") (data (i32.const 0) "ab")`, 1},
		{"far apart", `(data (i32.const 0) "ab") (data (i32.const 1000) "cd")`, 2},
		{"one close, one far", `(data (i32.const 0) "ab") (data (i32.const 10) "cd") (data (i32.const 5000) "ef")`, 2},
		{"overlapping", `(data (i32.const 0) "abcd") (data (i32.const 2) "XY")`, 2},
		{"passive", `(data (i32.const 0) "ab") (data "cd")`, 2},
		{"empty segment", `(data (i32.const 0) "ab") (data (i32.const 4) "")`, 2},
		{"high offsets", `(data (i32.const 0xFFF0) "ab") (data (i32.const 0xFFF8) "cd")`, 1},
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.NewHostModuleBuilder(YieldModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(yieldHost), nil, nil).Export(YieldImport).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := testutil.WAT(t, `(module (memory (export "memory") 1) `+tt.data+`
				(func (export "f") (result i32) (i32.const 1)))`)
			inst := mustInstrument(t, wasm)
			m, err := wasmbin.Parse(inst, wasmbin.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Data) != tt.segments {
				t.Errorf("%d segments after instrumenting, want %d", len(m.Data), tt.segments)
			}
			var mems [2][]byte
			for i, b := range [][]byte{wasm, inst} {
				mod, err := rt.InstantiateWithConfig(ctx, b, wazero.NewModuleConfig().WithName("").WithStartFunctions())
				if err != nil {
					t.Fatal(err)
				}
				v, _ := mod.Memory().Read(0, mod.Memory().Size())
				mems[i] = bytes.Clone(v)
				_ = mod.Close(ctx)
			}
			if !bytes.Equal(mems[0], mems[1]) {
				t.Error("the instrumented module starts with other memory contents")
			}
		})
	}
}

// TestMergeDataGoHook: Go's tens of thousands of data segments become a
// few hundred (wazero keeps 24 bytes per segment in every instance), for
// 0.7 MB more data in the module.
func TestMergeDataGoHook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go hook for wasip1")
	}
	wasm := testutil.BuildHook(t, "hooks-examples/redact-secrets")
	before, err := wasmbin.Parse(wasm, wasmbin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	after, err := wasmbin.Parse(mustInstrument(t, wasm), wasmbin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	size := func(m *wasmbin.Module) (n int) {
		for _, d := range m.Data {
			n += len(d.Init)
		}
		return n
	}
	t.Logf("%d data segments of %d bytes -> %d of %d", len(before.Data), size(before), len(after.Data), size(after))
	if len(after.Data) > len(before.Data)/20 || size(after) > size(before)*2 {
		t.Errorf("%d data segments of %d bytes -> %d of %d: want a twentieth of the segments for at most twice the bytes",
			len(before.Data), size(before), len(after.Data), size(after))
	}
}
