package wasmbin

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

var (
	bigOnce   sync.Once
	bigModule []byte
)

// largeModule returns a generated module of about 4 MB shaped like a Go
// hook: 20,000 functions of 120-byte bodies with locals, a table holding all
// of them, 50,000 small data segments and a 256 KiB name section.
func largeModule() []byte {
	bigOnce.Do(func() {
		var b Builder
		hc := b.ImportFunc("hook_v1", "host_call", hostCallType)
		mem := b.Memory(MemoryType{Min: 64})
		b.Table(TableType{Elem: FuncRef, Min: 20_001})
		b.Global(GlobalType{Type: I32, Mutable: true}, I32Const(1<<20))
		// local.get 0; i32.const 1; i32.add; local.set 0 -- 16 times
		body := bytes.Repeat([]byte{0x20, 0x00, 0x41, 0x01, 0x6A, 0x21, 0x00}, 16)
		body = append(body, 0x20, 0x00, 0xAD) // local.get 0; i64.extend_i32_u
		locals := []LocalDecl{{Count: 2, Type: I32}, {Count: 1, Type: I64}}
		funcs := make([]uint32, 0, 20_000)
		for i := 0; i < 20_000; i++ {
			funcs = append(funcs, b.Func(handleType, locals, body))
		}
		b.Export("memory", KindMemory, mem)
		b.Export("hook_v1_handle", KindFunc, funcs[0])
		b.Elem(1, append([]uint32{hc}, funcs...)...)
		seg := bytes.Repeat([]byte("data"), 6)
		for i := 0; i < 50_000; i++ {
			b.Data(int32(i*32), seg)
		}
		b.Custom("name", bytes.Repeat([]byte{'n'}, 256<<10))
		bigModule = b.Bytes()
	})
	return bigModule
}

// BenchmarkParse parses the generated ~4 MB module. Parsing must stay in the
// low milliseconds: it runs on every upload, before compilation.
func BenchmarkParse(b *testing.B) {
	mod := largeModule()
	b.SetBytes(int64(len(mod)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(mod, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendCustomSection embeds a manifest in the generated module.
func BenchmarkAppendCustomSection(b *testing.B) {
	mod := largeModule()
	b.SetBytes(int64(len(mod)))
	for i := 0; i < b.N; i++ {
		out, err := SetCustomSection(mod, ManifestSection, manifest)
		if err != nil || len(out) < len(mod) {
			b.Fatal(err)
		}
	}
}

// TestLargeModule parses the generated module and bounds the time and the
// memory it takes, generously enough for a loaded CI machine.
func TestLargeModule(t *testing.T) {
	mod := largeModule()
	if len(mod) < 3<<20 {
		t.Fatalf("generated module is only %d bytes", len(mod))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	m, err := Parse(mod, Limits{})
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, mod, m)
	if len(m.Code) != 20_000 || len(m.Data) != 50_000 || m.Elements[0].Count != 20_001 {
		t.Errorf("shape: %d bodies, %d data segments", len(m.Code), len(m.Data))
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes parsed in %v, %d bytes allocated", len(mod), elapsed, alloc)
	if elapsed > 2*time.Second {
		t.Errorf("parse took %v", elapsed)
	}
	if alloc > uint64(4*len(mod)) {
		t.Errorf("parse allocated %d bytes for a %d-byte module", alloc, len(mod))
	}
}

// TestShapeLimits builds modules at and one over the default count limits.
func TestShapeLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds modules of 100,000 items")
	}
	// Each builds a module of n of something: at the default limit it parses;
	// one more is refused by the limit named.
	atLimit := []struct {
		name  string
		n     int
		limit string
		build func(b *Builder, n int)
	}{
		{"functions", DefaultMaxFunctions, "MaxFunctions", func(b *Builder, n int) {
			ti := b.Type(voidType)
			for i := 0; i < n; i++ {
				b.FuncRaw(ti, []byte{0x00, OpEnd})
			}
		}},
		{"data segments", DefaultMaxDataSegments, "MaxDataSegments", func(b *Builder, n int) {
			b.Memory(MemoryType{Min: 1})
			for i := 0; i < n; i++ {
				b.PassiveData(nil)
			}
		}},
		{"function body", DefaultMaxFunctionBodyBytes, "MaxFunctionBodyBytes", func(b *Builder, size int) {
			body := append([]byte{0x00}, bytes.Repeat([]byte{0x01}, size-2)...) // nop...
			b.FuncRaw(b.Type(voidType), append(body, OpEnd))
		}},
	}
	for _, tt := range atLimit {
		t.Run(tt.name, func(t *testing.T) {
			build := func(n int) []byte {
				var b Builder
				tt.build(&b, n)
				return b.Bytes()
			}
			mustParse(t, build(tt.n), Limits{})
			_, err := Parse(build(tt.n+1), Limits{})
			checkErr(t, err, wantErr{limit: tt.limit})
		})
	}
	t.Run("module size", func(t *testing.T) {
		b := AppendCustomSection([]byte(Magic+Version), "pad", make([]byte, DefaultMaxModuleBytes-20))
		b = append(b, make([]byte, DefaultMaxModuleBytes-len(b))...) // pad the section's tail into the module
		_, err := Parse(b, Limits{})
		if _, ok := err.(*LimitError); ok {
			t.Fatalf("a module of exactly MaxModuleBytes hit the limit: %v", err)
		}
		_, err = Parse(append(b, 0), Limits{})
		checkErr(t, err, wantErr{limit: "MaxModuleBytes"})
	})
	t.Run("locals", func(t *testing.T) {
		var b Builder
		b.Func(handleType, []LocalDecl{{Count: DefaultMaxLocals - 1, Type: I32}}, nil)
		mustParse(t, b.Bytes(), Limits{})
		var c Builder
		c.Func(handleType, []LocalDecl{{Count: DefaultMaxLocals - 1, Type: I32}, {Count: 1, Type: F64}}, nil)
		_, err := Parse(c.Bytes(), Limits{})
		checkErr(t, err, wantErr{limit: "MaxLocals"})
	})
}

// TestAllocationBound parses the inputs that allocate the most per input
// byte (the largest Go structs per smallest encoding), at the default
// limits, and checks the 32 MiB bound documented on Parse.
func TestAllocationBound(t *testing.T) {
	if testing.Short() {
		t.Skip("builds large modules")
	}
	var worst Builder
	ti := worst.Type(voidType)
	for i := 0; i < DefaultMaxFunctions; i++ {
		worst.FuncRaw(ti, []byte{0x00, OpEnd})
	}
	worst.Memory(MemoryType{Min: 1})
	for i := 0; i < DefaultMaxDataSegments; i++ {
		worst.PassiveData(nil)
	}
	for i := 0; i < DefaultMaxElementSegments; i++ {
		worst.ElemRaw([]byte{0x01, 0x00, 0x00})
	}
	for i := 0; i < DefaultMaxExports; i++ {
		worst.Export(strconv.Itoa(i), KindFunc, 0)
	}
	// Locals: millions of declarations (each a 2-byte entry), kept encoded.
	locals := bytes.Repeat([]byte{0x00, byte(I32)}, 4<<20)
	body := append(AppendULEB128(nil, 4<<20), locals...)
	worst.FuncRaw(ti, append(body, OpEnd))
	mod := worst.Bytes()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := Parse(mod, Limits{MaxFunctions: DefaultMaxFunctions + 1, MaxExports: DefaultMaxExports, MaxFunctionBodyBytes: 16 << 20, MaxModuleBytes: 32 << 20, MaxCodeBytes: 32 << 20})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d-byte module: %d functions, %d data segments, %d element segments, %d exports; %d bytes allocated",
		len(mod), len(m.Functions), len(m.Data), len(m.Elements), len(m.Exports), alloc)
	if alloc > 32<<20 {
		t.Errorf("parse allocated %d bytes", alloc)
	}
}
