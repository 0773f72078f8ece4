package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

const hostCallImport = `(import "hook_v1" "host_call" (func (param i32 i32 i32 i32 i32 i32) (result i64)))`
const handleFunc = `(func (export "hook_v1_handle") (param i32) (result i64) (i64.const 0))`

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		wat  string
		want string // substring of the error; empty means valid
	}{
		{"minimal", `(module ` + hostCallImport + ` (memory (export "memory") 1) ` + handleFunc + `)`, ""},
		{"without host_call", `(module (memory (export "memory") 1) ` + handleFunc + `)`, ""},
		{"with the WASI set", `(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
			(import "wasi_snapshot_preview1" "sched_yield" (func (result i32)))
			(memory (export "memory") 1) ` + handleFunc + `)`, ""},
		{"missing handle", `(module (memory (export "memory") 1))`, "export hook_v1_handle: missing"},
		{"missing memory", `(module (memory 1) ` + handleFunc + `)`, `export memory: missing`},
		{"handle with wrong signature", `(module (memory (export "memory") 1) (func (export "hook_v1_handle") (result i64) (i64.const 0)))`, "export hook_v1_handle: signature is () -> i64, want (i32) -> i64"},
		{"_initialize with wrong signature", `(module (memory (export "memory") 1) ` + handleFunc + ` (func (export "_initialize") (param i32)))`, "export _initialize: must be a function () -> ()"},
		{"host_call with wrong signature", `(module (import "hook_v1" "host_call" (func (param i32 i32 i32 i32) (result i64))) (memory (export "memory") 1) ` + handleFunc + `)`,
			"import hook_v1.host_call: signature is (i32, i32, i32, i32) -> i64, want (i32, i32, i32, i32, i32, i32) -> i64"},
		{"env.abort", `(module (import "env" "abort" (func (param i32 i32 i32 i32))) (memory (export "memory") 1) ` + handleFunc + `)`, "import env.abort: a hook may import only"},
		{"WASI outside the set", `(module (import "wasi_snapshot_preview1" "path_open" (func (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32))) (memory (export "memory") 1) ` + handleFunc + `)`,
			"import wasi_snapshot_preview1.path_open: not in the fixed WASI set"},
		{"WASI with the wrong signature", `(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32) (result i32))) (memory (export "memory") 1) ` + handleFunc + `)`,
			"import wasi_snapshot_preview1.fd_write: signature is (i32) -> i32, want (i32, i32, i32, i32) -> i32"},
		{"another hook_v1 function", `(module (import "hook_v1" "log" (func)) (memory (export "memory") 1) ` + handleFunc + `)`, "import hook_v1.log: hook_v1 has no function"},
		{"ABI v2 import", `(module (import "hook_v2" "host_call" (func (param i32 i32 i32 i32 i32 i32) (result i64))) (memory (export "memory") 1) ` + handleFunc + `)`, "targets hook ABI v2; this host speaks v1"},
		{"ABI v2 export", `(module (memory (export "memory") 1) (func (export "hook_v2_handle") (param i32) (result i64) (i64.const 0)))`, "targets hook ABI v2"},
		{"imported memory", `(module (import "env" "memory" (memory 1)) (export "memory" (memory 0)) ` + handleFunc + `)`, "import env.memory: imports a memory"},
		{"minimum memory over the limit", `(module (memory (export "memory") 5000) ` + handleFunc + `)`, "memory_min_pages is 5000, over the limit of 4096"},
		{"4 GiB maximum is accepted", `(module (memory (export "memory") 1 65536) ` + handleFunc + `)`, ""},
		{"shared memory (threads)", `(module (memory (export "memory") 1 2 shared) ` + handleFunc + `)`, "threads"},
		{"memory64", `(module (memory (export "memory") i64 1) ` + handleFunc + `)`, "memory64"},
		{"two memories", `(module (memory (export "memory") 1) (memory 1) ` + handleFunc + `)`, "multi-memory"},
		{"start function is an import", `(module (import "env" "f" (func $f)) (memory (export "memory") 1) (start $f) ` + handleFunc + `)`, "import env.f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := runtime.Validate(testutil.WAT(t, tt.wat), runtime.ValidateOptions{})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if info.ABIVersion != "1" {
					t.Errorf("ABI version %q", info.ABIVersion)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestManifest(t *testing.T) {
	base := testutil.WAT(t, `(module (memory (export "memory") 1) `+handleFunc+`)`)
	t.Run("good, unknown fields ignored", func(t *testing.T) {
		wasm, err := runtime.EmbedManifest(base, []byte(`{"name":"x","capabilities":["llm.run"],"points":["tool.before"],"future":1}`))
		if err != nil {
			t.Fatal(err)
		}
		info, err := runtime.Validate(wasm, runtime.ValidateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Manifest == nil || info.Manifest.Name != "x" || len(info.Manifest.Capabilities) != 1 {
			t.Fatalf("manifest %+v", info.Manifest)
		}
		// Re-embedding replaces rather than duplicates.
		again, err := runtime.EmbedManifest(wasm, []byte(`{"name":"y"}`))
		if err != nil {
			t.Fatal(err)
		}
		info, err = runtime.Validate(again, runtime.ValidateOptions{})
		if err != nil || info.Manifest.Name != "y" {
			t.Fatalf("re-embedded: %v %+v", err, info)
		}
	})
	t.Run("bad manifests are refused", func(t *testing.T) {
		for _, bad := range []string{`{"capabilities":"llm.run"}`, `{"name":1}`, `{"points":["nowhere"]}`, `{"a":1,"a":2}`, `[]`} {
			if _, err := runtime.EmbedManifest(base, []byte(bad)); err == nil {
				t.Errorf("EmbedManifest accepted %s", bad)
			}
		}
	})
	t.Run("point not allowed by the manifest", func(t *testing.T) {
		wasm, err := runtime.EmbedManifest(testutil.ReadFile(t, "testdata/guests/scripted.wasm"), []byte(`{"points":["tool.before"]}`))
		if err != nil {
			t.Fatal(err)
		}
		r, m := loaded(t, runtime.Config{}, wasm)
		_, err = r.Invoke(context.Background(), m, runtime.Request{Tenant: "t", Point: "message.outbound"})
		if !errors.Is(err, runtime.ErrInvalidRequest) || !strings.Contains(err.Error(), "does not allow point") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestValidateGarbage(t *testing.T) {
	valid := scripted(t)
	tests := []struct {
		name string
		wasm []byte
	}{
		{"empty", nil},
		{"garbage", []byte("this is not wasm at all")},
		{"truncated", valid[:len(valid)/2]},
		{"bad version", append([]byte{0, 'a', 's', 'm', 2, 0, 0, 0}, valid[8:]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runtime.Validate(tt.wasm, runtime.ValidateOptions{})
			var ve *runtime.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
		})
	}
	t.Run("oversize", func(t *testing.T) {
		_, err := runtime.Validate(valid, runtime.ValidateOptions{MaxModuleBytes: 100})
		var le *runtime.LimitError
		if !errors.As(err, &le) || le.Limit != "module_bytes" {
			t.Fatalf("err = %v, want a module_bytes LimitError", err)
		}
	})
}

func TestLoadRefusesInvalid(t *testing.T) {
	r := newRuntime(t, runtime.Config{})
	_, err := r.Load(context.Background(), testutil.WAT(t, `(module (import "env" "abort" (func)) (memory (export "memory") 1) `+handleFunc+`)`))
	if runtime.Code(err) != "invalid_module" || !strings.Contains(err.Error(), "env.abort") {
		t.Fatalf("err = %v (code %s)", err, runtime.Code(err))
	}
}
