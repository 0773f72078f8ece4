package meter

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// The module of TestFunctionIndicesShifted: two imported functions, ten
// functions f0..f9 returning 100..109, reached through every construct
// that names a function.
const (
	shiftF0 = 2 // index of f0 (after env.host and env.host2)
	// The original indices of the functions after f9.
	shiftStart = shiftF0 + 10 + iota - 1
	shiftDirect
	shiftT
	shiftU
	shiftViaGlobal
	shiftRefFunc
	shiftHost
	shiftHost2
	shiftLocals
	shiftFuncs // the number of functions
)

var typeVI = wasmbin.FuncType{Results: []wasmbin.ValueType{i32}} // () -> i32

// shiftModule builds the module of TestFunctionIndicesShifted; names is
// the payload of its name section (none if nil).
func shiftModule(names []byte) []byte {
	var b wasmbin.Builder
	vi := b.Type(typeVI)
	b.ImportFunc(hostModule, hostFunc, typeA)
	b.ImportFunc(hostModule, hostFunc2, typeA)
	mem := b.Memory(wasmbin.MemoryType{Min: 1})
	b.Table(wasmbin.TableType{Elem: wasmbin.FuncRef, Min: 8}) // table 0: $t
	b.Table(wasmbin.TableType{Elem: wasmbin.FuncRef, Min: 8}) // table 1: $u
	g := b.Global(wasmbin.GlobalType{Type: i32, Mutable: true}, wasmbin.I32Const(0))
	fr := b.Global(wasmbin.GlobalType{Type: wasmbin.FuncRef}, refFuncInstr(shiftF0+9)) // ref.func f9
	for k := range 10 {
		b.Func(typeVI, nil, wasmbin.I32Const(int32(100+k)))
	}
	callIndirect := func(table byte) []byte { return []byte{wasmbin.OpCallIndirect, byte(vi), table} }
	c := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	funcs := []struct {
		t    wasmbin.FuncType
		body []byte
	}{
		// start: g = f1() + 1000
		{typeC, c(callOp(shiftF0+1), wasmbin.I32Const(1000), []byte{0x6A, wasmbin.OpGlobalSet, byte(g)})},
		// direct: f1()
		{typeVI, callOp(shiftF0 + 1)},
		// t(i): $t[i]()
		{typeIToI, c([]byte{wasmbin.OpLocalGet, 0}, callIndirect(0))},
		// u(i): $u[4:5] = segment 4, $u[5:6] = segment 5, then $u[i]()
		{typeIToI, c(wasmbin.I32Const(4), wasmbin.I32Const(0), wasmbin.I32Const(1), []byte{wasmbin.OpPrefixFC, 12, 4, 1},
			wasmbin.I32Const(5), wasmbin.I32Const(0), wasmbin.I32Const(1), []byte{wasmbin.OpPrefixFC, 12, 5, 1},
			[]byte{wasmbin.OpLocalGet, 0}, callIndirect(1))},
		// viaglobal: $u[7] = $fr; $u[7]()
		{typeVI, c(wasmbin.I32Const(7), []byte{wasmbin.OpGlobalGet, byte(fr), wasmbin.OpTableSet, 1}, wasmbin.I32Const(7), callIndirect(1))},
		// reffunc(i): $u[7] = i ? f7 : f8; $u[7]()
		{typeIToI, c(wasmbin.I32Const(7), []byte{wasmbin.OpLocalGet, 0, wasmbin.OpIf, byte(wasmbin.FuncRef)}, refFuncInstr(shiftF0+7),
			[]byte{wasmbin.OpElse}, refFuncInstr(shiftF0+8), []byte{wasmbin.OpEnd, wasmbin.OpTableSet, 1}, wasmbin.I32Const(7), callIndirect(1))},
		// host, host2: env.host(6, 1), env.host2(6, 1)
		{typeVI, c(wasmbin.I32Const(6), wasmbin.I32Const(1), callOp(0))},
		{typeVI, c(wasmbin.I32Const(6), wasmbin.I32Const(1), callOp(1))},
	}
	for _, f := range funcs {
		b.Func(f.t, nil, f.body)
	}
	// locals(p): q = p + 1; q
	b.Func(typeIToI, []wasmbin.LocalDecl{{Count: 1, Type: i32}}, []byte{wasmbin.OpLocalGet, 0, wasmbin.OpI32Const, 1, 0x6A, wasmbin.OpLocalTee, 1})
	b.Start(shiftStart)
	for name, f := range shiftExports {
		b.Export(name, wasmbin.KindFunc, f)
	}
	b.Export("memory", wasmbin.KindMemory, mem)
	b.Export("g", wasmbin.KindGlobal, g)
	// Every form of element segment (flags 0 to 7).
	seg := func(parts ...[]byte) { b.ElemRaw(c(parts...)) }
	end := []byte{wasmbin.OpEnd}
	seg([]byte{0}, wasmbin.I32Const(0), end, []byte{2, shiftF0, shiftF0 + 1})        // $t[0:2] = f0, f1
	seg([]byte{2, 1}, wasmbin.I32Const(0), end, []byte{0, 1, shiftF0 + 2})           // $u[0] = f2
	seg([]byte{4}, wasmbin.I32Const(2), end, []byte{2}, refFunc(shiftF0+3), refNull) // $t[2:4] = f3, null
	seg([]byte{6, 1}, wasmbin.I32Const(1), end, []byte{byte(wasmbin.FuncRef), 1}, refFunc(shiftF0+4))
	seg([]byte{1, 0, 1, shiftF0 + 5})                            // passive: f5
	seg([]byte{5, byte(wasmbin.FuncRef), 1}, refFunc(shiftF0+6)) // passive: f6
	seg([]byte{3, 0, 1, shiftF0 + 7})                            // declares f7
	seg([]byte{7, byte(wasmbin.FuncRef), 1}, refFunc(shiftF0+8)) // declares f8
	if names != nil {
		b.Custom("name", names)
	}
	return b.Bytes()
}

var (
	typeIToI = wasmbin.FuncType{Params: []wasmbin.ValueType{i32}, Results: []wasmbin.ValueType{i32}}
	refNull  = []byte{wasmbin.OpRefNull, byte(wasmbin.FuncRef), wasmbin.OpEnd}
	// shiftExports are the exported functions of shiftModule.
	shiftExports = map[string]uint32{
		"f0": shiftF0, "direct": shiftDirect, "t": shiftT, "u": shiftU, "viaglobal": shiftViaGlobal,
		"reffunc": shiftRefFunc, "host": shiftHost, "host2": shiftHost2, "locals": shiftLocals,
	}
)

func callOp(f uint32) []byte { return wasmbin.AppendULEB128([]byte{wasmbin.OpCall}, uint64(f)) }

func refFuncInstr(f uint32) []byte {
	return wasmbin.AppendULEB128([]byte{wasmbin.OpRefFunc}, uint64(f))
}

func refFunc(f uint32) []byte { return append(refFuncInstr(f), wasmbin.OpEnd) }

// funcName is the name shiftModule's name section gives function f.
func funcName(f uint32) string { return fmt.Sprintf("fn%d", f) }

// shiftNames is the name section of shiftModule: every subsection that
// names a function, and some that do not.
func shiftNames() []byte {
	var funcs, locals, labels []byte
	funcs = wasmbin.AppendULEB128(funcs, shiftFuncs)
	for f := uint32(0); f < shiftFuncs; f++ {
		funcs = appendNameAssoc(funcs, f, funcName(f))
	}
	locals = wasmbin.AppendULEB128(locals, 2)
	locals = append(wasmbin.AppendULEB128(locals, shiftF0), 0) // f0: no names
	locals = wasmbin.AppendULEB128(locals, shiftLocals)
	locals = appendNameAssoc(append(locals, 2), 0, "p")
	locals = appendNameAssoc(locals, 1, "q")
	labels = wasmbin.AppendULEB128(append(labels, 1), shiftRefFunc)
	labels = appendNameAssoc(append(labels, 1), 0, "l")
	return nameSubsections(
		nameSub{0, appendName(nil, "shifted")},
		nameSub{1, funcs},
		nameSub{2, locals},
		nameSub{3, labels},
		nameSub{4, appendNameAssoc([]byte{1}, 0, "vi")},
		nameSub{7, appendNameAssoc(appendNameAssoc([]byte{2}, 0, "g"), 1, "fr")},
		nameSub{0x20, []byte{0xFF, 0xFF}},
	)
}

// nameSub is a subsection of the name section.
type nameSub struct {
	id      byte
	content []byte
}

func nameSubsections(subs ...nameSub) []byte {
	var b []byte
	for _, s := range subs {
		b = append(b, s.id)
		b = wasmbin.AppendULEB128(b, uint64(len(s.content)))
		b = append(b, s.content...)
	}
	return b
}

func appendNameAssoc(b []byte, idx uint32, name string) []byte {
	return appendName(wasmbin.AppendULEB128(b, uint64(idx)), name)
}

// decodeNames splits a name section's payload into its subsections and
// decodes the function names (1) and local names (2); it fails the test
// on anything malformed. (It shares no code with the rewrite.)
func decodeNames(t testing.TB, b []byte) (subs []nameSub, funcs map[uint32]string, locals map[uint32]map[uint32]string) {
	t.Helper()
	u32 := func(b *[]byte) uint32 {
		v, n := binary.Uvarint(*b)
		if n <= 0 || n > 5 || v > 1<<32-1 {
			t.Fatalf("name section: bad LEB128 in % x", *b)
		}
		*b = (*b)[n:]
		return uint32(v)
	}
	name := func(b *[]byte) string {
		n := u32(b)
		if uint64(n) > uint64(len(*b)) || !utf8.Valid((*b)[:n]) {
			t.Fatalf("name section: bad name")
		}
		s := string((*b)[:n])
		*b = (*b)[n:]
		return s
	}
	nameMap := func(b *[]byte) map[uint32]string {
		m := map[uint32]string{}
		last := -1
		for range u32(b) {
			idx := u32(b)
			if int(idx) <= last {
				t.Fatalf("name section: index %d after %d", idx, last)
			}
			last = int(idx)
			m[idx] = name(b)
		}
		return m
	}
	for len(b) > 0 {
		id := b[0]
		b = b[1:]
		n := u32(&b)
		if uint64(n) > uint64(len(b)) {
			t.Fatalf("name section: subsection %d of %d bytes past the end", id, n)
		}
		content := b[:n]
		b = b[n:]
		if len(subs) > 0 && id <= subs[len(subs)-1].id {
			t.Fatalf("name section: subsection %d after %d", id, subs[len(subs)-1].id)
		}
		subs = append(subs, nameSub{id, content})
		switch id {
		case 1:
			funcs = nameMap(&content)
		case 2:
			locals = map[uint32]map[uint32]string{}
			last := -1
			for range u32(&content) {
				f := u32(&content)
				if int(f) <= last {
					t.Fatalf("name section: local names of %d after %d", f, last)
				}
				last = int(f)
				locals[f] = nameMap(&content)
			}
		default:
			continue
		}
		if len(content) != 0 {
			t.Fatalf("name section: %d bytes left in subsection %d", len(content), id)
		}
	}
	return subs, funcs, locals
}

// shifted maps an index of shiftModule to the instrumented module's.
func shifted(f uint32) uint32 {
	if f < shiftF0 {
		return f
	}
	return f + 1
}

// TestFunctionIndicesShifted instruments a module that names functions in
// every way the format allows (imports before them, exports, a start
// function, every form of element segment, a global initialised with
// ref.func, ref.func and call in code, call_indirect through tables filled
// by active segments, table.init and table.set, a name section) and checks
// that after the yield import moved every defined function up one index
// each still reaches the same function, on both engines, and that the
// name section names the right ones.
func TestFunctionIndicesShifted(t *testing.T) {
	names := shiftNames()
	wasm := shiftModule(names)
	inst := mustInstrument(t, wasm)
	validate(t, wasm, inst)

	// The structure, as parsed back.
	m, err := wasmbin.Parse(wasm, wasmbin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := wasmbin.Parse(inst, wasmbin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m2.Imports); n != 3 || m2.Imports[2].Module != YieldModule || m2.Imports[2].Name != YieldImport ||
		m2.Imports[2].Kind != wasmbin.KindFunc || m2.Imports[2].Func.String() != "() -> ()" {
		t.Errorf("imports = %+v, want env.host, env.host2, then the yield import", m2.Imports)
	}
	for _, e := range m.Exports {
		want := e.Index
		if e.Kind == wasmbin.KindFunc {
			want = shifted(e.Index)
		}
		if got, ok := m2.Export(e.Name); !ok || got.Kind != e.Kind || got.Index != want {
			t.Errorf("export %q = %+v, want %s %d", e.Name, got, e.Kind, want)
		}
	}
	if got, ok := m2.Export(StartExport); m2.Start != nil || !ok || got.Index != shifted(shiftStart) {
		t.Errorf("start section %v, %s = %+v; want none, and function %d", m2.Start, StartExport, got, shifted(shiftStart))
	}
	if init := m2.Globals[1].Init; init.Op != wasmbin.OpRefFunc || init.Value != uint64(shifted(shiftF0+9)) {
		t.Errorf("global 1 initialiser = %+v, want ref.func %d", init, shifted(shiftF0+9))
	}
	if len(m2.Elements) != len(m.Elements) {
		t.Fatalf("%d element segments, want %d", len(m2.Elements), len(m.Elements))
	}
	for i := range m.Elements {
		s, s2 := &m.Elements[i], &m2.Elements[i]
		if s2.Flags != s.Flags || s2.Mode != s.Mode || s2.Table != s.Table || !bytes.Equal(s2.Offset.Raw, s.Offset.Raw) || s2.Type != s.Type || s2.Count != s.Count {
			t.Errorf("element segment %d = %+v, want %+v", i, s2, s)
		}
		var want, got []string
		for e := range s.ItemExprs() {
			if e.Op == wasmbin.OpRefFunc {
				e.Value = uint64(shifted(uint32(e.Value)))
			}
			want = append(want, fmt.Sprintf("%#x %d", e.Op, e.Value))
		}
		for e := range s2.ItemExprs() {
			got = append(got, fmt.Sprintf("%#x %d", e.Op, e.Value))
		}
		if !slices.Equal(got, want) {
			t.Errorf("element segment %d (flags %d): items %v, want %v", i, s.Flags, got, want)
		}
	}

	// The name section.
	data, ok := m2.CustomSection("name")
	if !ok {
		t.Fatal("the name section was dropped")
	}
	subs, funcs, locals := decodeNames(t, data)
	origSubs, _, _ := decodeNames(t, names)
	orig := map[byte][]byte{}
	for _, s := range origSubs {
		orig[s.id] = s.content
	}
	var ids []byte
	for _, s := range subs {
		ids = append(ids, s.id)
		if s.id != 1 && s.id != 2 && !bytes.Equal(s.content, orig[s.id]) {
			t.Errorf("subsection %d changed", s.id)
		}
	}
	if !bytes.Equal(ids, []byte{0, 1, 2, 4, 7}) {
		t.Errorf("subsections %v, want the label names (3) and the unknown one (32) dropped", ids)
	}
	for f := uint32(0); f < shiftFuncs; f++ {
		if got := funcs[shifted(f)]; got != funcName(f) {
			t.Errorf("function %d is named %q, want %q (it was %d)", shifted(f), got, funcName(f), f)
		}
	}
	if _, ok := funcs[shiftF0]; ok || len(funcs) != shiftFuncs {
		t.Errorf("function names %v: want %d, none for the yield import (%d)", funcs, shiftFuncs, shiftF0)
	}
	wantLocals := map[uint32]map[uint32]string{shifted(shiftF0): {}, shifted(shiftLocals): {0: "p", 1: "q"}}
	if fmt.Sprint(locals) != fmt.Sprint(wantLocals) {
		t.Errorf("local names %v, want %v", locals, wantLocals)
	}

	// Running it: every call reaches the function it reached before.
	calls := []struct {
		name string
		args []uint64
		want uint64 // the result; 0: a trap
	}{
		{"f0", nil, 100},
		{"direct", nil, 101},
		{"t", []uint64{0}, 100},
		{"t", []uint64{1}, 101},
		{"t", []uint64{2}, 103},
		{"t", []uint64{3}, 0}, // a null element
		{"u", []uint64{0}, 102},
		{"u", []uint64{1}, 104},
		{"u", []uint64{4}, 105},
		{"u", []uint64{5}, 106},
		{"viaglobal", nil, 109},
		{"reffunc", []uint64{1}, 107},
		{"reffunc", []uint64{0}, 108},
		{"host", nil, 43},
		{"host2", nil, 67},
		{"locals", []uint64{41}, 42},
	}
	e := newEngines(t)
	for _, rt := range []wazero.Runtime{e.compiler, e.interpreter} {
		orig := compile(t, rt, wasm)
		metered := compile(t, rt, inst)
		for _, c := range calls {
			want := call(t, rt, orig, c.name, c.args, false, 0, 0)
			got := call(t, rt, metered, c.name, c.args, true, hugeFuel, hugeStack)
			if (c.want == 0) != (want.err != "") || (c.want != 0 && want.results[0] != c.want) || want.global != 1101 {
				t.Fatalf("bad test: the original's %s%v = %v (error %q), g = %d; want %d, g = 1101", c.name, c.args, want.results, want.err, want.global, c.want)
			}
			got.fuel, got.stack = 0, 0
			if diff := sameOutcome(got, want); diff != "" {
				t.Errorf("%s%v: %s", c.name, c.args, diff)
			}
		}
		// wazero reads the same names.
		if got := metered.Name(); got != "shifted" {
			t.Errorf("module name %q", got)
		}
		for name, f := range shiftExports {
			def := metered.ExportedFunctions()[name]
			if def == nil || def.Name() != funcName(f) || def.Index() != shifted(f) {
				t.Errorf("export %q: %v, want function %d named %q", name, def, shifted(f), funcName(f))
			}
		}
	}
}

// validate runs wabt's validator on the modules, with the features of
// WebAssembly 2.0 (its default): with --enable-all, wabt 1.0.32 types
// ref.func as a typed function reference that it then refuses where a
// funcref is expected.
func validate(t *testing.T, modules ...[]byte) {
	t.Helper()
	dir := t.TempDir()
	for i, b := range modules {
		p := filepath.Join(dir, fmt.Sprintf("m%d.wasm", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("wasm-validate", p).CombinedOutput(); err != nil {
			t.Errorf("module %d: wasm-validate: %v\n%s", i, err, out)
		}
	}
}

// TestNameSection checks the rewriting of the name section on its own: the
// function indices of subsections 1 and 2 shifted, the label names (3) and
// unknown subsections dropped, the rest kept, and a malformed section
// dropped whole.
func TestNameSection(t *testing.T) {
	// The module: env.host, then functions 1 and 2, which become 2 and 3.
	module := func(names []byte) []byte {
		var b wasmbin.Builder
		b.ImportFunc(hostModule, hostFunc, typeA)
		b.Func(typeC, nil, nil)
		b.Func(typeIToI, []wasmbin.LocalDecl{{Count: 1, Type: i64}}, []byte{wasmbin.OpLocalGet, 0})
		b.Custom("name", names)
		return b.Bytes()
	}
	// funcs are the names of the functions of original indices idx, at
	// their new indices when shift is set.
	funcs := func(shift bool, idx ...uint32) []byte {
		b := wasmbin.AppendULEB128(nil, uint64(len(idx)))
		for _, f := range idx {
			at := f
			if shift && f > 0 {
				at++
			}
			b = appendNameAssoc(b, at, funcName(f))
		}
		return b
	}
	locals := func(f uint32) []byte {
		b := wasmbin.AppendULEB128([]byte{1}, uint64(f))
		return appendNameAssoc(appendNameAssoc(append(b, 2), 0, "p"), 1, "x")
	}
	module0 := nameSub{0, appendName(nil, "m")}
	tests := []struct {
		name string
		in   []byte
		want []byte // nil: dropped
	}{
		{"empty", []byte{}, []byte{}},
		{"module name only", nameSubsections(module0), nameSubsections(module0)},
		{"function names", nameSubsections(nameSub{1, funcs(false, 0, 1, 2)}), nameSubsections(nameSub{1, funcs(true, 0, 1, 2)})},
		{"padded indices", nameSubsections(nameSub{1, []byte{1, 0x82, 0x80, 0x00, 1, 'b'}}), nameSubsections(nameSub{1, []byte{1, 3, 1, 'b'}})},
		{"local names", nameSubsections(nameSub{2, locals(2)}), nameSubsections(nameSub{2, locals(3)})},
		{"local names of an import", nameSubsections(nameSub{2, locals(0)}), nameSubsections(nameSub{2, locals(0)})},
		{"all", nameSubsections(module0, nameSub{1, funcs(false, 1)}, nameSub{2, locals(1)}, nameSub{3, locals(1)}, nameSub{4, []byte{0}},
			nameSub{9, []byte{7, 7}}, nameSub{11, nil}, nameSub{12, []byte{1}}, nameSub{0xFF, nil}),
			nameSubsections(module0, nameSub{1, funcs(true, 1)}, nameSub{2, locals(2)}, nameSub{4, []byte{0}}, nameSub{9, []byte{7, 7}}, nameSub{11, nil})},
		{"label names only", nameSubsections(nameSub{3, locals(1)}), []byte{}},
		// Malformed.
		{"truncated subsection", append([]byte{1, 5}, funcs(false, 1)[:3]...), nil},
		{"truncated size", []byte{1, 0x80}, nil},
		{"size past the end", []byte{4, 9, 0}, nil},
		{"function names past their subsection", nameSubsections(nameSub{1, funcs(false, 1)[:4]}), nil},
		{"bytes left in the function names", nameSubsections(nameSub{1, append(funcs(false, 1), 0)}), nil},
		{"bytes left in the local names", nameSubsections(nameSub{2, append(locals(1), 0)}), nil},
		{"local names past their subsection", nameSubsections(nameSub{2, locals(1)[:6]}), nil},
		{"function name not UTF-8", nameSubsections(nameSub{1, []byte{1, 1, 2, 0xC3, 0x28}}), nil},
		{"local name not UTF-8", nameSubsections(nameSub{2, []byte{1, 1, 1, 0, 1, 0xFF}}), nil},
		{"module name not UTF-8", nameSubsections(nameSub{0, []byte{1, 0xFF}}), nil},
		{"two module names", nameSubsections(nameSub{0, append(appendName(nil, "a"), appendName(nil, "b")...)}), nil},
		{"index of 6 bytes", nameSubsections(nameSub{1, []byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0}}), nil},
		{"index over 32 bits", nameSubsections(nameSub{1, []byte{1, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0}}), nil},
		{"out of order", nameSubsections(nameSub{1, funcs(false, 1)}, module0), nil},
		{"twice", nameSubsections(nameSub{4, []byte{0}}, nameSub{4, []byte{0}}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := mustInstrument(t, module(tt.in))
			m, err := wasmbin.Parse(out, wasmbin.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := m.CustomSection("name")
			switch {
			case tt.want == nil && ok:
				t.Fatalf("kept % x, want the section dropped", got)
			case tt.want != nil && !ok:
				t.Fatalf("dropped, want % x", tt.want)
			case !bytes.Equal(got, tt.want):
				t.Fatalf("got % x, want % x", got, tt.want)
			}
			if ok {
				decodeNames(t, got)
			}
			compiles(t, out)
		})
	}
}

// compiles checks that wazero compiles b.
func compiles(t *testing.T, b []byte) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, b); err != nil {
		t.Fatalf("wazero: %v", err)
	}
}

// TestYieldImportAdded checks where the yield import and its type go: at
// the end of the imports, in an import section created at its place in
// the order if the module has none, with a type () -> () found or
// appended.
func TestYieldImportAdded(t *testing.T) {
	build := func(f func(b *wasmbin.Builder)) []byte {
		var b wasmbin.Builder
		f(&b)
		return b.Bytes()
	}
	tests := []struct {
		name     string
		wasm     []byte
		yield    uint32 // the index of the yield import
		typ      uint32 // the index of its type
		newTypes int    // the types appended
	}{
		{"empty module", build(func(b *wasmbin.Builder) {}), 0, 0, 1},
		{"a memory import, no types", build(func(b *wasmbin.Builder) {
			b.ImportMemory("env", "memory", wasmbin.MemoryType{Min: 1})
		}), 0, 0, 1},
		{"no imports", build(func(b *wasmbin.Builder) { b.Func(typeA, nil, wasmbin.I32Const(1)) }), 0, 1, 1},
		{"the type is there", build(func(b *wasmbin.Builder) {
			b.Type(typeA)
			b.Type(typeC)
			b.ImportFunc(hostModule, hostFunc, typeA)
			b.ImportGlobal("env", "g", wasmbin.GlobalType{Type: i32})
			b.ImportFunc(hostModule, hostFunc2, typeA)
			b.Func(typeC, nil, append(append(wasmbin.I32Const(1), wasmbin.I32Const(2)...), wasmbin.OpCall, 1, wasmbin.OpDrop))
		}), 2, 1, 0},
		{"a start function, no imports", build(func(b *wasmbin.Builder) {
			b.Start(b.Func(typeC, nil, nil))
			b.DataCount()
		}), 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := mustInstrument(t, tt.wasm)
			validate(t, out)
			m, _ := wasmbin.Parse(tt.wasm, wasmbin.Limits{})
			m2, err := wasmbin.Parse(out, wasmbin.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			last := m2.Imports[len(m2.Imports)-1]
			if len(m2.Imports) != len(m.Imports)+1 || last.Module != YieldModule || last.Name != YieldImport || last.Kind != wasmbin.KindFunc || last.TypeIndex != tt.typ {
				t.Errorf("imports %+v, want the yield import last, of type %d", m2.Imports, tt.typ)
			}
			if got := m2.NumImportedFuncs() - 1; got != int(tt.yield) {
				t.Errorf("the yield import is function %d, want %d", got, tt.yield)
			}
			if got := len(m2.Types) - len(m.Types); got != tt.newTypes || m2.Types[tt.typ].String() != "() -> ()" {
				t.Errorf("%d types appended, type %d is %s; want %d, () -> ()", got, tt.typ, m2.Types[tt.typ], tt.newTypes)
			}
			compiles(t, out)
		})
	}
}
