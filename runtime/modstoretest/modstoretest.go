// Package modstoretest is a conformance kit for runtime.ModuleStore
// implementations: call Run from a test with a function that makes a fresh,
// empty store, and it checks the contract runtime.ModuleStore documents,
// each rule as a subtest, including under concurrency.
//
//	func TestModuleStore(t *testing.T) {
//		modstoretest.Run(t, func(t *testing.T) runtime.ModuleStore { return runtime.NewMemoryModules() })
//	}
package modstoretest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Callers is how many goroutines the concurrent subtest runs.
const Callers = 16

// Module returns module bytes distinguished by i and a report of them. The
// bytes are not a valid hook (stores do not validate; StoreModule does).
func Module(i int, size int) ([]byte, *runtime.ModuleInfo) {
	wasm := make([]byte, size)
	copy(wasm, "\x00asm\x01\x00\x00\x00")
	for j := 8; j < size; j++ {
		wasm[j] = byte(i*31 + j)
	}
	max := uint32(4)
	return wasm, &runtime.ModuleInfo{
		Digest: runtime.Digest(wasm), Size: len(wasm), ABIVersion: "1",
		Imports:        []runtime.ImportInfo{{Module: "hook_v1", Name: "host_call", Kind: "func", Signature: "(i32,i32,i32,i32)->i32"}},
		Exports:        []runtime.ExportInfo{{Name: "memory", Kind: "memory"}, {Name: "hook_v1_handle", Kind: "func", Signature: "(i32,i32)->i64"}},
		MemoryMinPages: 1, MemoryMaxPages: &max, Functions: i + 1,
		Manifest: &abi.Manifest{Name: fmt.Sprintf("hook-%d", i), Version: "1.0.0"},
	}
}

func same(a, b *runtime.ModuleInfo) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// Run checks the contract of runtime.ModuleStore on stores made by open,
// one per subtest.
func Run(t *testing.T, open func(t *testing.T) runtime.ModuleStore) {
	ctx := context.Background()
	put := func(t *testing.T, s runtime.ModuleStore, wasm []byte, info *runtime.ModuleInfo) {
		t.Helper()
		if err := s.Put(ctx, wasm, info); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	t.Run("put then get round-trips bytes and report", func(t *testing.T) {
		s := open(t)
		for i, size := range []int{9, 4096, 1 << 20} {
			wasm, info := Module(i, size)
			put(t, s, wasm, info)
			got, gi, err := s.Get(ctx, info.Digest)
			if err != nil || !bytes.Equal(got, wasm) || !same(gi, info) {
				t.Fatalf("Get(%d bytes) = %d bytes, %+v, %v", size, len(got), gi, err)
			}
			if gi, err := s.Info(ctx, info.Digest); err != nil || !same(gi, info) {
				t.Fatalf("Info = %+v, %v", gi, err)
			}
			// Copies: changing what Get returned changes nothing stored.
			got[0] ^= 0xff
			if again, _, err := s.Get(ctx, info.Digest); err != nil || !bytes.Equal(again, wasm) {
				t.Fatalf("the stored bytes changed with the caller's copy: %v", err)
			}
		}
	})
	t.Run("unknown digest", func(t *testing.T) {
		s := open(t)
		d := runtime.Digest([]byte("nothing"))
		if _, _, err := s.Get(ctx, d); !errors.Is(err, runtime.ErrModuleNotFound) {
			t.Fatalf("Get: %v", err)
		}
		if _, err := s.Info(ctx, d); !errors.Is(err, runtime.ErrModuleNotFound) {
			t.Fatalf("Info: %v", err)
		}
		if err := s.Delete(ctx, d); !errors.Is(err, runtime.ErrModuleNotFound) {
			t.Fatalf("Delete: %v", err)
		}
	})
	t.Run("a report that is not of the bytes is refused", func(t *testing.T) {
		s := open(t)
		wasm, info := Module(1, 64)
		other, _ := Module(2, 64)
		short := *info
		short.Size--
		for name, tc := range map[string]struct {
			wasm []byte
			info *runtime.ModuleInfo
		}{"other bytes": {other, info}, "wrong size": {wasm, &short}, "no report": {wasm, nil}} {
			if err := s.Put(ctx, tc.wasm, tc.info); !errors.Is(err, runtime.ErrModuleMismatch) {
				t.Fatalf("%s: Put = %v", name, err)
			}
		}
		if ds, err := s.List(ctx); err != nil || len(ds) != 0 {
			t.Fatalf("List after refused Puts = %v, %v", ds, err)
		}
	})
	t.Run("list, put again, delete", func(t *testing.T) {
		s := open(t)
		var want []string
		for i := range 5 {
			wasm, info := Module(i, 100+i)
			put(t, s, wasm, info)
			want = append(want, info.Digest)
		}
		wasm, info := Module(3, 103)
		info.Functions = 99 // a newer report of the same bytes
		put(t, s, wasm, info)
		if gi, err := s.Info(ctx, info.Digest); err != nil || gi.Functions != 99 {
			t.Fatalf("the report was not replaced: %+v, %v", gi, err)
		}
		sortStrings(want)
		if ds, err := s.List(ctx); err != nil || fmt.Sprint(ds) != fmt.Sprint(want) {
			t.Fatalf("List = %v, %v; want %v", ds, err, want)
		}
		if err := s.Delete(ctx, want[0]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Get(ctx, want[0]); !errors.Is(err, runtime.ErrModuleNotFound) {
			t.Fatalf("Get after Delete: %v", err)
		}
		if ds, err := s.List(ctx); err != nil || fmt.Sprint(ds) != fmt.Sprint(want[1:]) {
			t.Fatalf("List after Delete = %v, %v; want %v", ds, err, want[1:])
		}
	})
	t.Run("concurrent puts of one module keep one", func(t *testing.T) {
		s := open(t)
		wasm, info := Module(7, 2048)
		var wg sync.WaitGroup
		for range Callers {
			wg.Go(func() {
				if err := s.Put(ctx, wasm, info); err != nil {
					t.Errorf("Put: %v", err)
				}
				if got, _, err := s.Get(ctx, info.Digest); err != nil || !bytes.Equal(got, wasm) {
					t.Errorf("Get: %v", err)
				}
			})
		}
		wg.Wait()
		if ds, err := s.List(ctx); err != nil || len(ds) != 1 || ds[0] != info.Digest {
			t.Fatalf("List = %v, %v", ds, err)
		}
	})
	t.Run("store module validates first", func(t *testing.T) {
		s := open(t)
		if _, err := runtime.StoreModule(ctx, s, []byte("not wasm"), runtime.ValidateOptions{}); err == nil {
			t.Fatal("StoreModule stored garbage")
		}
		if ds, err := s.List(ctx); err != nil || len(ds) != 0 {
			t.Fatalf("List = %v, %v", ds, err)
		}
	})
}

func sortStrings(s []string) { slices.Sort(s) }
