package adversarial

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"
)

// A small encoder for modules WAT cannot express (or that would take wat2wasm
// longer to assemble than the runtime takes to refuse them).

// uleb is v in unsigned LEB128 (the varint of encoding/binary).
func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func section(id byte, body ...[]byte) []byte {
	b := cat(body...)
	return cat([]byte{id}, uleb(uint64(len(b))), b)
}

func vector(items ...[]byte) []byte { return cat(uleb(uint64(len(items))), cat(items...)) }

func name(s string) []byte { return cat(uleb(uint64(len(s))), []byte(s)) }

func wasmModule(sections ...[]byte) []byte {
	return cat([]byte("\x00asm\x01\x00\x00\x00"), cat(sections...))
}

var (
	handleType = []byte{0x60, 0x01, 0x7F, 0x01, 0x7E} // (i32) -> i64
	typeSec    = section(1, vector(handleType))
	memSec     = section(5, vector([]byte{0x00, 0x01}))
	exportSec  = section(7, vector(cat(name("memory"), []byte{0x02, 0x00}), cat(name("hook_v1_handle"), []byte{0x00, 0x00})))
	handleBody = []byte{0x00, 0x42, 0x00, 0x0B} // no locals; i64.const 0; end
)

// hookWith returns a valid hook shape whose n functions all have body.
func hookWith(n int, body []byte) []byte {
	types := make([][]byte, n)
	bodies := make([][]byte, n)
	for i := range types {
		types[i] = []byte{0x00}
		bodies[i] = cat(uleb(uint64(len(body))), body)
	}
	return wasmModule(typeSec, section(3, vector(types...)), memSec, exportSec, section(10, vector(bodies...)))
}

// nopBody is a function body of n bytes: n-4 nops then i64.const 0.
func nopBody(n int) []byte {
	return cat([]byte{0x00}, bytes.Repeat([]byte{0x01}, n-4), []byte{0x42, 0x00, 0x0B})
}

// localsBody declares locals of type i32 in groups of the given counts.
func localsBody(counts ...uint64) []byte {
	var decls [][]byte
	for _, c := range counts {
		decls = append(decls, cat(uleb(c), []byte{0x7F}))
	}
	return cat(vector(decls...), []byte{0x42, 0x00, 0x0B})
}

// Threat: a module shaped to exhaust the loader or the compiler (a huge code
// section, a huge function count or body, absurd locals, a billion table
// elements), to use a feature the host does not support, to crash wazero
// (a start function that is an import), or that is not a module at all.
// Defence: the bounded binary reader and the ABI checks refuse it at load,
// before anything is compiled, with an error that says what is wrong, in
// bounded time.
func TestModuleRefusedAtLoad(t *testing.T) {
	w := newWorld(t)
	hostile := corpus(t, "hostile.wat")
	rng := rand.New(rand.NewPCG(5, 5))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	tests := []struct {
		name string
		wasm func() []byte
		want string
	}{
		// Size and shape.
		{"oversize module", func() []byte {
			return wasmModule(typeSec, section(3, vector([]byte{0})), memSec, exportSec,
				section(10, vector(cat(uleb(4), handleBody))), section(0, name("pad"), make([]byte, 33<<20)))
		}, "module_bytes is"},
		{"code section over 16 MiB", func() []byte { return hookWith(17, nopBody(1_000_000)) }, "MaxCodeBytes"},
		{"function body over 1 MiB", func() []byte { return hookWith(1, nopBody(1<<20+16)) }, "MaxFunctionBodyBytes"},
		{"100,001 functions", func() []byte { return hookWith(100_001, handleBody) }, "MaxFunctions"},
		{"50,001 locals", func() []byte { return hookWith(1, localsBody(50_001)) }, "MaxLocals"},
		{"4 billion locals", func() []byte { return hookWith(1, localsBody(0xFFFFFFFF)) }, "MaxLocals"},
		{"local counts summing past 2^32", func() []byte { return hookWith(1, localsBody(0x80000000, 0x80000000, 1)) }, "MaxLocals"},
		{"1,001 parameters", func() []byte {
			params := bytes.Repeat([]byte{0x7F}, 1001)
			return wasmModule(section(1, vector(cat([]byte{0x60}, uleb(1001), params, []byte{0x00}))))
		}, "MaxParams"},
		{"a billion table elements", func() []byte { return corpus(t, "shape-huge-table.wat") }, "MaxTableElements"},
		{"100,001 data segments", func() []byte {
			segs := make([][]byte, 100_001)
			for i := range segs {
				segs[i] = []byte{0x00, 0x41, 0x00, 0x0B, 0x00}
			}
			return wasmModule(typeSec, section(3, vector([]byte{0})), memSec, exportSec,
				section(10, vector(cat(uleb(4), handleBody))), section(11, vector(segs...)))
		}, "MaxDataSegments"},
		{"a count that lies", func() []byte { return wasmModule(section(1, uleb(0xFFFFFFFF), handleType)) }, "not a valid WebAssembly module"},
		{"a section size that lies", func() []byte { return cat(wasmModule(), []byte{0x01}, uleb(0xFFFFFFFF), handleType) }, "not a valid WebAssembly module"},

		// Features the host does not support.
		{"threads", func() []byte { return corpus(t, "feature-threads.wat") }, "unsupported feature threads"},
		{"memory64", func() []byte { return corpus(t, "feature-memory64.wat") }, "unsupported feature memory64"},
		{"multi-memory", func() []byte { return corpus(t, "feature-multi-memory.wat") }, "unsupported feature multi-memory"},
		{"a component", func() []byte { return []byte("\x00asm\x0d\x00\x01\x00") }, "unsupported feature component-model"},

		// Imports and the start function.
		{"a start function that is an import", func() []byte { return corpus(t, "start-import.wat") }, "import env.f"},
		{"host_call with the wrong signature", func() []byte { return corpus(t, "import-host-call-wrong-signature.wat") },
			"import hook_v1.host_call: signature is (i32, i32, i32, i32) -> i64, want (i32, i32, i32, i32, i32, i32) -> i64"},
		{"env.abort", func() []byte { return corpus(t, "import-env-abort.wat") }, "import env.abort: a hook may import only"},
		{"WASI outside the set: path_open", func() []byte { return corpus(t, "import-wasi-path-open.wat") }, "import wasi_snapshot_preview1.path_open: not in the fixed WASI set"},
		{"WASI outside the set: sock_accept", func() []byte { return corpus(t, "import-wasi-sock-accept.wat") }, "import wasi_snapshot_preview1.sock_accept: not in the fixed WASI set"},
		{"an imported memory", func() []byte { return corpus(t, "import-memory.wat") }, "import env.memory: imports a memory"},

		// Not a module.
		{"empty", func() []byte { return nil }, "not a valid WebAssembly module"},
		{"text", func() []byte { return []byte("(module (func (export \"hook_v1_handle\")))") }, "not a valid WebAssembly module"},
		{"random bytes", func() []byte { return random }, "not a valid WebAssembly module"},
		{"an ELF binary", func() []byte { return append([]byte("\x7fELF\x02\x01\x01"), random[:64]...) }, "not a valid WebAssembly module"},
		{"wasm version 2", func() []byte { return append([]byte("\x00asm\x02\x00\x00\x00"), hostile[8:]...) }, "not a valid WebAssembly module"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := tt.wasm()
			before := totalAlloc()
			w.refusedAtLoad(t, wasm, tt.want)
			// Refusing costs little beyond hashing the bytes: nothing
			// proportional to what the module claims.
			if grew := totalAlloc() - before; grew > uint64(len(wasm))+8<<20 {
				t.Errorf("refusing a %d-byte module allocated %d MiB", len(wasm), grew>>20)
			}
		})
	}

	// Truncated: every prefix of a valid hook is refused (a cut at a section
	// boundary leaves a well-formed module without its exports).
	t.Run("truncated", func(t *testing.T) {
		for cut := 0; cut < len(hostile); cut += 37 {
			w.refusedAtLoad(t, hostile[:cut], "invalid module")
		}
	})
}

// Threat: a small module that passes every size and count limit but takes
// the compiler minutes or hours: wazero's compiler takes time quadratic in a
// function's basic blocks (measured without metering: 20,000 empty loops in
// one 58 KB function, 10 s; 20,000 blocks, 2 s; 100,000 blocks in 293 KB,
// 44 s; a 1 MiB body of loops extrapolates to about 50 minutes, and a module
// holds 16 of them). Defence needed: a bound at validation on the
// branch-creating instructions (block, loop, if, br, br_if, br_table) of one
// function and on the sum over functions of their squares. For scale, a Go
// hook (redact-secrets, 3.9 MB) has at most 1,639 per function and a sum of
// squares of 2.2e7.
func TestModuleCompileBomb(t *testing.T) {
	w := newWorld(t)
	for _, unit := range []struct {
		name string
		code []byte
	}{
		{"loops", []byte{0x03, 0x40, 0x0B}},
		{"blocks", []byte{0x02, 0x40, 0x0B}},
		{"ifs", []byte{0x41, 0x00, 0x04, 0x40, 0x0B}},
	} {
		t.Run(unit.name, func(t *testing.T) {
			body := cat([]byte{0x00}, bytes.Repeat(unit.code, 20_000), []byte{0x42, 0x00, 0x0B})
			within(t, 2*time.Second, "loading 20,000 "+unit.name+" in one function", func() {
				m, err := w.rt.Load(context.Background(), hookWith(1, body))
				if err == nil {
					_ = m.Close(context.Background())
					t.Fatal("a function of 20,000 control instructions was accepted")
				}
			})
		})
	}
	// Many functions, each under the per-function bound: the module-wide
	// sum of squares refuses them.
	t.Run("many functions of loops", func(t *testing.T) {
		body := cat([]byte{0x00}, bytes.Repeat([]byte{0x03, 0x40, 0x0B}, 2_500), []byte{0x42, 0x00, 0x0B})
		within(t, 2*time.Second, "loading 16 functions of 2,500 loops", func() {
			m, err := w.rt.Load(context.Background(), hookWith(16, body))
			if err == nil {
				_ = m.Close(context.Background())
				t.Fatal("16 functions of 2,500 loops were accepted")
			}
		})
	})
}
