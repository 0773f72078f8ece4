package wasmbin

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func readFixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hook.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t testing.TB, b []byte, lim Limits) *Module {
	t.Helper()
	m, err := parse(b, lim)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	checkInvariants(t, b, m)
	return m
}

func TestParseHook(t *testing.T) {
	b := hookModule()
	m := mustParse(t, b, Limits{})

	wantTypes := []FuncType{hostCallType, fdWriteType, voidType, handleType, {Params: []ValueType{I32}, Results: []ValueType{I32}}}
	if !reflect.DeepEqual(m.Types, wantTypes) {
		t.Errorf("Types = %v, want %v", m.Types, wantTypes)
	}
	if len(m.Imports) != 2 {
		t.Fatalf("Imports = %+v", m.Imports)
	}
	hc := m.Imports[0]
	if hc.Module != "hook_v1" || hc.Name != "host_call" || hc.Kind != KindFunc || hc.TypeIndex != 0 || !hc.Func.Equal(hostCallType) {
		t.Errorf("import 0 = %+v", hc)
	}
	if got := FormatFuncType(hc.Func); got != "(i32, i32, i32, i32, i32, i32) -> i64" {
		t.Errorf("host_call type = %q", got)
	}
	if m.Imports[1].Name != "fd_write" || m.Imports[1].Offset <= hc.Offset {
		t.Errorf("import 1 = %+v", m.Imports[1])
	}
	if !reflect.DeepEqual(m.Functions, []uint32{2, 3, 4}) {
		t.Errorf("Functions = %v", m.Functions)
	}
	if m.NumImportedFuncs() != 2 || m.NumFuncs() != 5 || m.NumMemories() != 1 || m.NumImportedMemories() != 0 ||
		m.NumTables() != 1 || m.NumImportedTables() != 0 || m.NumGlobals() != 1 || m.NumImportedGlobals() != 0 {
		t.Errorf("counts: funcs %d/%d memories %d/%d tables %d/%d globals %d/%d",
			m.NumImportedFuncs(), m.NumFuncs(), m.NumImportedMemories(), m.NumMemories(),
			m.NumImportedTables(), m.NumTables(), m.NumImportedGlobals(), m.NumGlobals())
	}
	if !reflect.DeepEqual(m.Memories, []MemoryType{{Min: 2, Max: 16, HasMax: true}}) {
		t.Errorf("Memories = %+v", m.Memories)
	}
	if mt, ok := m.Memory(); !ok || mt.Min != 2 {
		t.Errorf("Memory() = %+v, %v", mt, ok)
	}
	if !reflect.DeepEqual(m.Tables, []TableType{{Elem: FuncRef, Min: 4}}) {
		t.Errorf("Tables = %+v", m.Tables)
	}
	if len(m.Globals) != 1 || m.Globals[0].Type != (GlobalType{Type: I32, Mutable: true}) ||
		m.Globals[0].Init.Op != OpI32Const || m.Globals[0].Init.Value != 65536 || m.Globals[0].Init.Type(m) != I32 {
		t.Errorf("Globals = %+v", m.Globals)
	}
	wantExports := []Export{{"memory", KindMemory, 0}, {"_initialize", KindFunc, 2}, {"hook_v1_handle", KindFunc, 3}}
	if !reflect.DeepEqual(m.Exports, wantExports) {
		t.Errorf("Exports = %+v", m.Exports)
	}
	if ft, ok := m.ExportedFunc("hook_v1_handle"); !ok || FormatFuncType(ft) != "(i32) -> i64" {
		t.Errorf("ExportedFunc(hook_v1_handle) = %v, %v", ft, ok)
	}
	if ft, ok := m.ExportedFunc("_initialize"); !ok || FormatFuncType(ft) != "() -> ()" {
		t.Errorf("ExportedFunc(_initialize) = %v, %v", ft, ok)
	}
	if _, ok := m.ExportedFunc("memory"); ok {
		t.Error("ExportedFunc(memory) found a function")
	}
	if _, ok := m.ExportedFunc("missing"); ok {
		t.Error("ExportedFunc(missing) found a function")
	}
	if !m.ExportedMemory("memory") || m.ExportedMemory("hook_v1_handle") || m.ExportedMemory("nope") {
		t.Error("ExportedMemory wrong")
	}
	if m.Start != nil || m.StartIsImport() {
		t.Errorf("Start = %v", m.Start)
	}
	if len(m.Elements) != 1 || m.Elements[0].Mode != SegmentActive || m.Elements[0].Count != 3 ||
		m.Elements[0].Offset.Value != 0 || !bytes.Equal(m.Elements[0].Items, []byte{2, 3, 4}) {
		t.Errorf("Elements = %+v", m.Elements)
	}
	if m.DataCount == nil || *m.DataCount != 2 {
		t.Errorf("DataCount = %v", m.DataCount)
	}
	if len(m.Data) != 2 || m.Data[0].Mode != SegmentActive || m.Data[0].Offset.Value != 1024 || string(m.Data[0].Init) != "hello" ||
		m.Data[1].Mode != SegmentPassive || string(m.Data[1].Init) != "passive" {
		t.Errorf("Data = %+v", m.Data)
	}
	if len(m.Code) != 3 {
		t.Fatalf("Code = %+v", m.Code)
	}
	h := m.Code[1]
	if h.NumLocals != 3 || !reflect.DeepEqual(h.LocalDecls(), []LocalDecl{{2, I32}, {1, I64}}) || h.Body[0] != OpI32Const || h.BodyOffset != h.Offset+5 ||
		!bytes.Equal(h.Locals, []byte{2, 2, byte(I32), 1, byte(I64)}) {
		t.Errorf("handle body = %+v", h)
	}
	if m.Code[0].NumLocals != 0 || !bytes.Equal(m.Code[0].Body, []byte{OpEnd}) || m.Code[0].LocalDecls() != nil || !bytes.Equal(m.Code[0].Locals, []byte{0}) {
		t.Errorf("init body = %+v", m.Code[0])
	}
	if got, ok := m.CustomSection(ManifestSection); !ok || !bytes.Equal(got, manifest) {
		t.Errorf("manifest = %q, %v", got, ok)
	}
	if _, ok := m.CustomSection("missing"); ok {
		t.Error("CustomSection(missing) found something")
	}
	var ids []SectionID
	for _, s := range m.Sections {
		ids = append(ids, s.ID)
	}
	wantIDs := []SectionID{SectionType, SectionImport, SectionFunction, SectionTable, SectionMemory, SectionGlobal,
		SectionExport, SectionElement, SectionDataCount, SectionCode, SectionData, SectionCustom, SectionCustom}
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Errorf("section ids = %v, want %v", ids, wantIDs)
	}
	if m.Sections[11].Name != ManifestSection || m.Sections[12].Name != "name" {
		t.Errorf("custom section names: %q %q", m.Sections[11].Name, m.Sections[12].Name)
	}

	// Parse (with its recover) agrees with parse.
	m2, err := Parse(b, Limits{})
	if err != nil || !reflect.DeepEqual(m, m2) {
		t.Errorf("Parse differs from parse: %v", err)
	}
}

// TestFixture parses testdata/hook.wasm, made by wat2wasm from hook.wat, so
// the decoder is checked against an encoder other than Builder.
func TestFixture(t *testing.T) {
	b := readFixture(t)
	m := mustParse(t, b, Limits{})
	if len(m.Types) != 5 || len(m.Imports) != 3 || len(m.Functions) != 3 || len(m.Code) != 3 {
		t.Fatalf("shape: %d types, %d imports, %d functions", len(m.Types), len(m.Imports), len(m.Functions))
	}
	if m.Imports[2].Kind != KindGlobal || m.Imports[2].Global != (GlobalType{Type: I32}) {
		t.Errorf("import 2 = %+v", m.Imports[2])
	}
	if ft, _ := m.FuncType(1); FormatFuncType(ft) != "(i32, i32, i32, i32) -> i32" {
		t.Errorf("fd_write type = %s", ft)
	}
	if ft, ok := m.ExportedFunc("hook_v1_handle"); !ok || ft.String() != "(i32) -> i64" {
		t.Errorf("hook_v1_handle = %v %v", ft, ok)
	}
	if !m.ExportedMemory("memory") || !reflect.DeepEqual(m.Memories, []MemoryType{{Min: 1, Max: 16, HasMax: true}}) {
		t.Errorf("memory: %+v", m.Memories)
	}
	if !reflect.DeepEqual(m.Tables, []TableType{{Elem: ExternRef, Min: 1}, {Elem: FuncRef, Min: 4}}) {
		t.Errorf("Tables = %+v", m.Tables)
	}
	g := m.Globals
	if len(g) != 6 {
		t.Fatalf("Globals = %+v", g)
	}
	if g[0].Type != (GlobalType{Type: I32, Mutable: true}) || g[0].Init.Op != OpGlobalGet || g[0].Init.Value != 0 || g[0].Init.Type(m) != I32 {
		t.Errorf("global 1 = %+v", g[0])
	}
	if g[1].Init.Op != OpI64Const || int64(g[1].Init.Value) != math.MinInt64 {
		t.Errorf("global 2 = %+v", g[1])
	}
	if g[2].Init.Op != OpF32Const || math.Float32frombits(uint32(g[2].Init.Value)) != 3.5 {
		t.Errorf("global 3 = %+v", g[2])
	}
	if g[3].Init.Op != OpF64Const || math.Float64frombits(g[3].Init.Value) != -2.25 {
		t.Errorf("global 4 = %+v", g[3])
	}
	if g[4].Init.Op != OpRefFunc || g[4].Init.Value != 3 || g[4].Type.Type != FuncRef {
		t.Errorf("global 5 = %+v", g[4])
	}
	if g[5].Init.Op != OpRefNull || g[5].Init.RefType != ExternRef || g[5].Init.Type(m) != ExternRef {
		t.Errorf("global 6 = %+v", g[5])
	}
	wantFlags := []uint32{2, 1, 2, 3, 2, 5, 6, 3}
	wantModes := []SegmentMode{SegmentActive, SegmentPassive, SegmentActive, SegmentDeclarative, SegmentActive, SegmentPassive, SegmentActive, SegmentDeclarative}
	if len(m.Elements) != len(wantFlags) {
		t.Fatalf("Elements = %+v", m.Elements)
	}
	for i, e := range m.Elements {
		if e.Flags != wantFlags[i] || e.Mode != wantModes[i] {
			t.Errorf("element %d: flags %d mode %s, want %d %s", i, e.Flags, e.Mode, wantFlags[i], wantModes[i])
		}
	}
	if e := m.Elements[0]; e.Table != 1 || e.Count != 2 || !bytes.Equal(e.Items, []byte{2, 3}) {
		t.Errorf("element 0 = %+v", e)
	}
	if e := m.Elements[6]; e.Table != 0 || e.Type != ExternRef || !e.Exprs || e.Count != 1 {
		t.Errorf("element 6 = %+v", e)
	}
	if len(m.Data) != 3 || string(m.Data[0].Init) != "hello" || m.Data[1].Mode != SegmentPassive ||
		m.Data[2].Offset.Op != OpGlobalGet || !bytes.Equal(m.Data[2].Init, []byte{0, 1, 2}) {
		t.Errorf("Data = %+v", m.Data)
	}
	if c := m.Code[1]; c.NumLocals != 4 || len(c.LocalDecls()) != 3 || c.LocalDecls()[2] != (LocalDecl{1, F64}) {
		t.Errorf("handle locals = %+v", c.LocalDecls())
	}

	// A manifest appended to wat2wasm output reads back.
	with := AppendCustomSection(b, ManifestSection, manifest)
	m = mustParse(t, with, Limits{})
	if got, ok := m.CustomSection(ManifestSection); !ok || !bytes.Equal(got, manifest) {
		t.Errorf("manifest after append = %q %v", got, ok)
	}
}

// TestParseValid covers unusual but valid modules.
func TestParseValid(t *testing.T) {
	padded5 := func(v uint32) []byte { // v as a 5-byte LEB128, as linkers pad
		return []byte{byte(v) | 0x80, byte(v>>7) | 0x80, byte(v>>14) | 0x80, byte(v>>21) | 0x80, byte(v >> 28)}
	}
	tests := []struct {
		name  string
		in    []byte
		lim   Limits
		check func(t *testing.T, m *Module)
	}{
		{"header only", mod(), Limits{}, func(t *testing.T, m *Module) {
			if len(m.Sections) != 0 {
				t.Error("sections in an empty module")
			}
		}},
		{"empty sections", mod(sec(SectionType, u32(0)), sec(SectionImport, u32(0)), sec(SectionFunction, u32(0)), sec(SectionTable, u32(0)),
			sec(SectionMemory, u32(0)), sec(SectionGlobal, u32(0)), sec(SectionExport, u32(0)), sec(SectionElement, u32(0)),
			sec(SectionDataCount, u32(0)), sec(SectionCode, u32(0)), sec(SectionData, u32(0))), Limits{}, func(t *testing.T, m *Module) {
			if len(m.Sections) != 11 || m.DataCount == nil || *m.DataCount != 0 {
				t.Errorf("got %d sections", len(m.Sections))
			}
		}},
		{"custom sections everywhere", mod(custom("a", nil), typeVoid, custom("b", []byte{1}), oneFunc, custom("a", []byte{2}), oneBody, custom("", nil)), Limits{}, func(t *testing.T, m *Module) {
			if len(m.Customs) != 4 || m.Customs[1].Name != "b" || m.Customs[3].Name != "" {
				t.Errorf("Customs = %+v", m.Customs)
			}
			if d, ok := m.CustomSection("a"); !ok || len(d) != 0 {
				t.Errorf("first section a has data %v", d)
			}
		}},
		{"padded LEB128 everywhere", mod(
			cat(raw(byte(SectionType)), padded5(8), padded5(1), raw(0x60, 0x00, 0x00)),
			cat(raw(byte(SectionFunction)), padded5(10), padded5(1), padded5(0)),
			cat(raw(byte(SectionCode)), padded5(16), padded5(1), padded5(6), padded5(0), raw(OpEnd))), Limits{}, func(t *testing.T, m *Module) {
			if len(m.Code) != 1 || m.Code[0].Size != 6 || m.Code[0].BodyOffset != m.Code[0].Offset+5 {
				t.Errorf("Code = %+v", m.Code)
			}
		}},
		{"padded s32 and s64 constants", mod(sec(SectionGlobal, u32(2),
			raw(byte(I32), 0x00, OpI32Const, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, OpEnd),
			raw(byte(I64), 0x00, OpI64Const, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, OpEnd))), Limits{}, func(t *testing.T, m *Module) {
			if int32(m.Globals[0].Init.Value) != -1 || int64(m.Globals[1].Init.Value) != -1 {
				t.Errorf("Globals = %+v", m.Globals)
			}
		}},
		{"start is an import", mod(typeVoid, sec(SectionImport, u32(1), str("env"), str("f"), raw(0x00), u32(0)), sec(SectionStart, u32(0))), Limits{}, func(t *testing.T, m *Module) {
			if m.Start == nil || *m.Start != 0 || !m.StartIsImport() {
				t.Errorf("Start = %v, StartIsImport %v", m.Start, m.StartIsImport())
			}
		}},
		{"start is defined", mod(typeVoid, sec(SectionImport, u32(1), str("env"), str("f"), raw(0x00), u32(0)), oneFunc, sec(SectionStart, u32(1)), oneBody), Limits{}, func(t *testing.T, m *Module) {
			if m.Start == nil || *m.Start != 1 || m.StartIsImport() {
				t.Errorf("Start = %v, StartIsImport %v", m.Start, m.StartIsImport())
			}
		}},
		{"imported memory", mod(sec(SectionImport, u32(1), str("env"), str("memory"), raw(0x02, 0x01), u32(1), u32(2)), sec(SectionExport, u32(1), str("memory"), raw(0x02), u32(0))), Limits{}, func(t *testing.T, m *Module) {
			if mt, ok := m.Memory(); !ok || mt != (MemoryType{Min: 1, Max: 2, HasMax: true}) || m.NumMemories() != 1 || !m.ExportedMemory("memory") {
				t.Errorf("memory = %+v %v", mt, ok)
			}
		}},
		{"memory of 65536 pages", mod(sec(SectionMemory, u32(1), raw(0x01), u32(0), u32(65536))), Limits{}, nil},
		{"every element segment form", mod(typeVoid, oneFunc, sec(SectionTable, u32(2), raw(byte(FuncRef), 0x00), u32(4), raw(byte(ExternRef), 0x00), u32(1)),
			sec(SectionElement, u32(8),
				raw(0x00), I32Const(0), raw(OpEnd), u32(1), u32(0), // 0: active table 0, indices
				raw(0x01, 0x00), u32(1), u32(0), // 1: passive, indices
				raw(0x02), u32(0), I32Const(1), raw(OpEnd, 0x00), u32(1), u32(0), // 2: active table x, indices
				raw(0x03, 0x00), u32(1), u32(0), // 3: declarative, indices
				raw(0x04), I32Const(2), raw(OpEnd), u32(2), raw(0xD2, 0x00, OpEnd, 0xD0, byte(FuncRef), OpEnd), // 4: active table 0, exprs
				raw(0x05, byte(ExternRef)), u32(1), raw(0xD0, byte(ExternRef), OpEnd), // 5: passive, exprs
				raw(0x06), u32(1), I32Const(0), raw(OpEnd, byte(ExternRef)), u32(1), raw(0xD0, byte(ExternRef), OpEnd), // 6: active table x, exprs
				raw(0x07, byte(FuncRef)), u32(1), raw(0xD2, 0x00, OpEnd)), // 7: declarative, exprs
			oneBody), Limits{}, func(t *testing.T, m *Module) {
			modes := []SegmentMode{SegmentActive, SegmentPassive, SegmentActive, SegmentDeclarative, SegmentActive, SegmentPassive, SegmentActive, SegmentDeclarative}
			for i, e := range m.Elements {
				if e.Flags != uint32(i) || e.Mode != modes[i] || e.Exprs != (i >= 4) {
					t.Errorf("element %d = %+v", i, e)
				}
			}
			if m.Elements[6].Table != 1 || m.Elements[6].Type != ExternRef || m.Elements[4].Count != 2 {
				t.Errorf("elements = %+v", m.Elements)
			}
		}},
		{"every data segment form", mod(oneMemory, sec(SectionData, u32(3),
			raw(0x00), I32Const(8), raw(OpEnd), u32(2), raw('h', 'i'),
			raw(0x01), u32(1), raw('p'),
			raw(0x02), u32(0), I32Const(-1), raw(OpEnd), u32(0))), Limits{}, func(t *testing.T, m *Module) {
			d := m.Data
			if d[0].Offset.Value != 8 || string(d[0].Init) != "hi" || d[1].Mode != SegmentPassive || int32(d[2].Offset.Value) != -1 || d[2].Memory != 0 {
				t.Errorf("Data = %+v", d)
			}
		}},
		{"global.get of an earlier global", mod(sec(SectionGlobal, u32(2), raw(byte(I32), 0x00), I32Const(7), raw(OpEnd), raw(byte(I32), 0x00, 0x23, 0x00, OpEnd))), Limits{}, nil},
		{"v128 with AllowSIMD", mod(sec(SectionType, u32(1), functype([]ValueType{V128}, []ValueType{V128})),
			sec(SectionGlobal, u32(1), raw(byte(V128), 0x00, 0xFD, 0x0C), make([]byte, 16), raw(OpEnd))), Limits{AllowSIMD: true}, func(t *testing.T, m *Module) {
			if m.Types[0].String() != "(v128) -> v128" || m.Globals[0].Init.Op != OpV128Const || m.Globals[0].Init.Type(m) != V128 {
				t.Errorf("got %v %+v", m.Types, m.Globals)
			}
		}},
		{"locals exactly at MaxLocals", mod(typeVoidI32, sec(SectionFunction, u32(1), u32(1)), sec(SectionCode, u32(1), u32(4), u32(1), u32(9), raw(byte(I32)), raw(OpEnd))), Limits{MaxLocals: 10}, func(t *testing.T, m *Module) {
			if m.Code[0].NumLocals != 9 {
				t.Errorf("NumLocals = %d", m.Code[0].NumLocals)
			}
		}},
		{"duplicate imports", mod(typeVoid, sec(SectionImport, u32(2), str("m"), str("f"), raw(0x00), u32(0), str("m"), str("f"), raw(0x00), u32(0))), Limits{}, nil},
		{"unicode names", mod(oneMemory, sec(SectionExport, u32(2), str("mémoire"), raw(0x02), u32(0), str("🦀"), raw(0x02), u32(0))), Limits{}, func(t *testing.T, m *Module) {
			if !m.ExportedMemory("mémoire") || !m.ExportedMemory("🦀") {
				t.Error("unicode exports not found")
			}
		}},
		{"limits at their values", hookModule(), Limits{MaxModuleBytes: uint64(len(hookModule())), MaxFunctions: 5, MaxImports: 2, MaxExports: 3,
			MaxTypes: 5, MaxCustomSections: 2, MaxTables: 1, MaxTableElements: 4, MaxGlobals: 1, MaxDataSegments: 2, MaxElementSegments: 1,
			MaxLocals: 4, MaxParams: 6, MaxResults: 1, MaxNameBytes: 22, MaxMemoryPages: 2,
			MaxLocalsTotal: 5, MaxTypeValues: 16, MaxElementItems: 3, MaxDataBytes: 12}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, tt.in, tt.lim)
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
}

// lebCase is a LEB128 encoding and the value it decodes to, or the error it
// gets.
type lebCase[T int32 | int64 | uint32] struct {
	in   []byte
	want T
	err  string
}

// checkLEB decodes each case with read (name in messages).
func checkLEB[T int32 | int64 | uint32](t *testing.T, name string, cases []lebCase[T], read func(*reader) (T, error)) {
	t.Helper()
	for _, tt := range cases {
		r := &reader{b: tt.in, end: len(tt.in), section: "test"}
		got, err := read(r)
		if tt.err != "" {
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tt.err)) {
				t.Errorf("%s % x: got %d, %v; want error %q", name, tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want || !r.eof() {
			t.Errorf("%s % x: got %d, %v; want %d", name, tt.in, got, err, tt.want)
		}
	}
}

func TestLEB128(t *testing.T) {
	u32Tests := []lebCase[uint32]{
		{[]byte{0x00}, 0, ""},
		{[]byte{0x7F}, 127, ""},
		{[]byte{0x80, 0x01}, 128, ""},
		{[]byte{0xE5, 0x8E, 0x26}, 624485, ""},
		{[]byte{0xFF, 0xFF, 0xFF, 0xFF, 0x0F}, math.MaxUint32, ""},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x00}, 0, ""}, // padded: valid
		{[]byte{0x81, 0x80, 0x00}, 1, ""},
		{[]byte{0xFF, 0xFF, 0xFF, 0xFF, 0x1F}, 0, "unused bits"},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x40}, 0, "unused bits"},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 0, "longer than 5 bytes"},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80}, 0, "longer than 5 bytes"},
		{[]byte{0x80}, 0, "unexpected end"},
		{[]byte{}, 0, "unexpected end"},
	}
	checkLEB(t, "u32", u32Tests, func(r *reader) (uint32, error) { return r.u32("v") })

	s32Tests := []lebCase[int32]{
		{[]byte{0x00}, 0, ""},
		{[]byte{0x7F}, -1, ""},
		{[]byte{0x3F}, 63, ""},
		{[]byte{0x40}, -64, ""},
		{[]byte{0x80, 0x7F}, -128, ""},
		{[]byte{0xC0, 0xBB, 0x78}, -123456, ""},
		{[]byte{0xFF, 0xFF, 0xFF, 0xFF, 0x07}, math.MaxInt32, ""},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x78}, math.MinInt32, ""},
		{[]byte{0xFF, 0xFF, 0xFF, 0xFF, 0x7F}, -1, ""}, // padded -1
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x00}, 0, ""},  // padded 0
		{[]byte{0xFF, 0xFF, 0xFF, 0xFF, 0x0F}, 0, "sign extension"},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x70}, 0, "sign extension"},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x38}, 0, "sign extension"},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 0, "longer than 5 bytes"},
		{[]byte{0xFF}, 0, "unexpected end"},
	}
	checkLEB(t, "s32", s32Tests, func(r *reader) (int32, error) { return r.s32("v") })

	ff9 := bytes.Repeat([]byte{0xFF}, 9)
	x809 := bytes.Repeat([]byte{0x80}, 9)
	s64Tests := []lebCase[int64]{
		{[]byte{0x00}, 0, ""},
		{[]byte{0x7F}, -1, ""},
		{append(bytes.Clone(ff9), 0x00), math.MaxInt64, ""},
		{append(bytes.Clone(x809), 0x7F), math.MinInt64, ""},
		{append(bytes.Clone(ff9), 0x7F), -1, ""},
		{append(bytes.Clone(x809), 0x01), 0, "sign extension"},
		{append(bytes.Clone(x809), 0x7E), 0, "sign extension"},
		{append(append(bytes.Clone(x809), 0x80), 0x00), 0, "longer than 10 bytes"},
		{x809, 0, "unexpected end"},
	}
	checkLEB(t, "s64", s64Tests, func(r *reader) (int64, error) { return r.s64("v") })

	// The encoders round-trip through the decoders.
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 127, 128, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64} {
		enc := AppendSLEB128(nil, v)
		r := &reader{b: enc, end: len(enc)}
		if got, err := r.s64("v"); err != nil || got != v || !r.eof() {
			t.Errorf("s64 round trip %d: % x -> %d, %v", v, enc, got, err)
		}
		if v == int64(int32(v)) {
			r = &reader{b: enc, end: len(enc)}
			if got, err := r.s32("v"); err != nil || int64(got) != v || !r.eof() {
				t.Errorf("s32 round trip %d: % x -> %d, %v", v, enc, got, err)
			}
		}
	}
	for _, v := range []uint64{0, 1, 127, 128, 16383, 16384, math.MaxUint32} {
		enc := AppendULEB128(nil, v)
		r := &reader{b: enc, end: len(enc)}
		if got, err := r.u32("v"); err != nil || uint64(got) != v || !r.eof() || len(enc) != lebLen(v) {
			t.Errorf("u32 round trip %d: % x -> %d, %v", v, enc, got, err)
		}
	}
}

func TestFormatFuncType(t *testing.T) {
	tests := []struct {
		ft   FuncType
		want string
	}{
		{hostCallType, "(i32, i32, i32, i32, i32, i32) -> i64"},
		{handleType, "(i32) -> i64"},
		{FuncType{Results: []ValueType{I32}}, "() -> i32"},
		{FuncType{Params: []ValueType{I32}}, "(i32) -> ()"},
		{FuncType{}, "() -> ()"},
		{FuncType{Params: []ValueType{F32, F64}, Results: []ValueType{I32, I64}}, "(f32, f64) -> (i32, i64)"},
		{FuncType{Params: []ValueType{FuncRef, ExternRef, V128}}, "(funcref, externref, v128) -> ()"},
		{FuncType{Params: []ValueType{0x40}}, "(0x40) -> ()"},
	}
	for _, tt := range tests {
		if got := FormatFuncType(tt.ft); got != tt.want {
			t.Errorf("FormatFuncType(%v) = %q, want %q", tt.ft.Params, got, tt.want)
		}
	}
	// The ABI package's WASI table uses the same notation.
	if got := FormatFuncType(fdWriteType); got != "(i32, i32, i32, i32) -> i32" {
		t.Errorf("fd_write = %q", got)
	}
}

func TestModuleHelpers(t *testing.T) {
	var b Builder
	b.ImportFunc("m", "f0", voidType)
	b.ImportGlobal("m", "g0", GlobalType{Type: I64})
	b.ImportFunc("m", "f1", handleType)
	b.ImportTable("m", "t0", TableType{Elem: FuncRef, Min: 1})
	b.ImportMemory("m", "mem", MemoryType{Min: 1})
	f2 := b.Func(fdWriteType, nil, []byte{0x41, 0x00})
	g1 := b.Global(GlobalType{Type: F32}, []byte{0x43, 0, 0, 0, 0})
	b.Export("f1", KindFunc, 1)
	b.Export("f2", KindFunc, f2)
	b.Export("g1", KindGlobal, g1)
	m := mustParse(t, b.Bytes(), Limits{})
	if m.NumImportedFuncs() != 2 || m.NumImportedGlobals() != 1 || m.NumImportedTables() != 1 || m.NumImportedMemories() != 1 || f2 != 2 || g1 != 1 {
		t.Fatalf("counts wrong: %+v", m.Imports)
	}
	for i, want := range []string{"() -> ()", "(i32) -> i64", "(i32, i32, i32, i32) -> i32"} {
		ft, ok := m.FuncType(uint32(i))
		if !ok || ft.String() != want {
			t.Errorf("FuncType(%d) = %v, %v; want %s", i, ft, ok, want)
		}
	}
	if _, ok := m.FuncType(3); ok {
		t.Error("FuncType(3) found")
	}
	if _, ok := m.FuncType(math.MaxUint32); ok {
		t.Error("FuncType(MaxUint32) found")
	}
	if !m.IsImportedFunc(1) || m.IsImportedFunc(2) {
		t.Error("IsImportedFunc wrong")
	}
	if gt, ok := m.GlobalType(0); !ok || gt.Type != I64 {
		t.Errorf("GlobalType(0) = %v %v", gt, ok)
	}
	if gt, ok := m.GlobalType(1); !ok || gt.Type != F32 {
		t.Errorf("GlobalType(1) = %v %v", gt, ok)
	}
	if _, ok := m.GlobalType(2); ok {
		t.Error("GlobalType(2) found")
	}
	if ft, ok := m.ExportedFunc("f1"); !ok || ft.String() != "(i32) -> i64" {
		t.Errorf("ExportedFunc(f1) = %v", ft)
	}
	if _, ok := m.ExportedFunc("g1"); ok {
		t.Error("ExportedFunc(g1) found a function")
	}
	if e, ok := m.Export("g1"); !ok || e.Kind != KindGlobal || e.Index != 1 {
		t.Errorf("Export(g1) = %+v", e)
	}
	// A hand-made Module with an inconsistent function list does not panic.
	bad := &Module{Functions: []uint32{7}}
	if _, ok := bad.FuncType(0); ok {
		t.Error("FuncType with a bad type index found")
	}
	var empty Module
	if _, ok := empty.Memory(); ok || empty.StartIsImport() || empty.ExportedMemory("memory") {
		t.Error("empty module has things")
	}
	for _, s := range []struct{ got, want string }{
		{I32.String(), "i32"}, {ValueType(0x01).String(), "0x01"},
		{KindFunc.String(), "func"}, {KindTable.String(), "table"}, {KindMemory.String(), "memory"}, {KindGlobal.String(), "global"}, {ExternKind(9).String(), "kind(9)"},
		{SectionDataCount.String(), "datacount"}, {SectionTag.String(), "tag"}, {SectionID(20).String(), "unknown(20)"},
		{SegmentDeclarative.String(), "declarative"}, {SegmentMode(5).String(), "mode(5)"},
	} {
		if s.got != s.want {
			t.Errorf("String() = %q, want %q", s.got, s.want)
		}
	}
}

func TestDefaultLimits(t *testing.T) {
	d := DefaultLimits()
	v := reflect.ValueOf(d)
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() == reflect.Uint64 && f.Uint() == 0 {
			t.Errorf("DefaultLimits().%s is zero", v.Type().Field(i).Name)
		}
	}
	if d.MaxModuleBytes != 32<<20 || d.MaxMemories != 1 || d.MaxLocals != 50_000 || d.MaxDataSegments != 100_000 || d.AllowSIMD {
		t.Errorf("DefaultLimits() = %+v", d)
	}
	// An explicit value is kept.
	if got := (Limits{MaxFunctions: 7}).withDefaults(); got.MaxFunctions != 7 || got.MaxImports != DefaultMaxImports {
		t.Errorf("withDefaults = %+v", got)
	}
}
