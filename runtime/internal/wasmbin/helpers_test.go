package wasmbin

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var (
	i32x4        = []ValueType{I32, I32, I32, I32}
	hostCallType = FuncType{Params: []ValueType{I32, I32, I32, I32, I32, I32}, Results: []ValueType{I64}}
	handleType   = FuncType{Params: []ValueType{I32}, Results: []ValueType{I64}}
	fdWriteType  = FuncType{Params: i32x4, Results: []ValueType{I32}}
	voidType     = FuncType{}
	manifest     = []byte(`{"name":"test","version":"1.0.0","capabilities":["llm.run"]}`)
)

// hookBuilder returns a Builder holding a complete hook that uses most of
// the format: two function imports, a memory, a table, a global, three
// functions, exports, an element segment, datacount, active and passive data
// and two custom sections.
func hookBuilder() *Builder {
	var b Builder
	hc := b.ImportFunc("hook_v1", "host_call", hostCallType)
	b.ImportFunc("wasi_snapshot_preview1", "fd_write", fdWriteType)
	mem := b.Memory(MemoryType{Min: 2, Max: 16, HasMax: true})
	b.Table(TableType{Elem: FuncRef, Min: 4})
	b.Global(GlobalType{Type: I32, Mutable: true}, I32Const(65536))
	initFn := b.Func(voidType, nil, nil)
	// host_call(0, 0, 1024, in_len, 1024, 4096); drop; i64.const 0
	var body []byte
	for _, v := range []int32{0, 0, 1024} {
		body = append(body, I32Const(v)...)
	}
	body = append(body, 0x20, 0x00) // local.get 0
	body = append(body, I32Const(1024)...)
	body = append(body, I32Const(4096)...)
	body = append(body, 0x10)
	body = AppendULEB128(body, uint64(hc))
	body = append(body, 0x1A) // drop
	body = append(body, I64Const(0)...)
	handle := b.Func(handleType, []LocalDecl{{Count: 2, Type: I32}, {Count: 1, Type: I64}}, body)
	helper := b.Func(FuncType{Params: []ValueType{I32}, Results: []ValueType{I32}}, nil, []byte{0x20, 0x00})
	b.Export("memory", KindMemory, mem)
	b.Export("_initialize", KindFunc, initFn)
	b.Export("hook_v1_handle", KindFunc, handle)
	b.Elem(0, initFn, handle, helper)
	b.DataCount()
	b.Data(1024, []byte("hello"))
	b.PassiveData([]byte("passive"))
	b.Custom(ManifestSection, manifest)
	b.Custom("name", []byte{0x01, 0x02, 0x03})
	return &b
}

func hookModule() []byte { return hookBuilder().Bytes() }

// withManifest embeds data in b as its manifest (SetCustomSection), parses
// the result with parse, and fails t unless it parses and reads data back.
func withManifest(t *testing.T, parse func([]byte, Limits) (*Module, error), b, data []byte) *Module {
	t.Helper()
	with, err := SetCustomSection(b, ManifestSection, data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parse(with, Limits{})
	if err != nil {
		t.Fatalf("SetCustomSection broke the module: %v", err)
	}
	if got, ok := m.CustomSection(ManifestSection); !ok || !bytes.Equal(got, data) {
		t.Fatal("manifest not read back")
	}
	return m
}

// mod returns a module: the header followed by the given sections.
func mod(sections ...[]byte) []byte {
	out := []byte(Magic + Version)
	for _, s := range sections {
		out = append(out, s...)
	}
	return out
}

// sec encodes a section whose content is the concatenation of parts.
func sec(id SectionID, parts ...[]byte) []byte {
	return AppendSection(nil, id, cat(parts...))
}

// custom encodes a custom section.
func custom(name string, payload []byte) []byte {
	return AppendCustomSection(nil, name, payload)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func u32(v uint64) []byte { return AppendULEB128(nil, v) }

func str(s string) []byte { return appendName(nil, s) }

func raw(b ...byte) []byte { return b }

// functype encodes one type-section entry.
func functype(params, results []ValueType) []byte {
	out := []byte{0x60}
	out = appendValueTypes(out, params)
	return appendValueTypes(out, results)
}

// Common sections for the error tables.
var (
	typeVoid    = sec(SectionType, u32(1), functype(nil, nil)) // type 0: () -> ()
	typeVoidI32 = sec(SectionType, u32(2), functype(nil, nil), functype([]ValueType{I32}, nil))
	oneFunc     = sec(SectionFunction, u32(1), u32(0))                        // one function of type 0
	oneBody     = sec(SectionCode, u32(1), u32(2), raw(0x00, OpEnd))          // its body: no locals, end
	oneMemory   = sec(SectionMemory, u32(1), raw(0x00), u32(1))               // memory 0: 1 page
	oneTable    = sec(SectionTable, u32(1), raw(byte(FuncRef), 0x00), u32(1)) // table 0: 1 funcref
	voidModule  = mod(typeVoid, oneFunc, oneBody)                             // one function
	hostImport  = cat(str("hook_v1"), str("host_call"), raw(byte(KindFunc)), u32(0))
)

// wantErr describes an expected error: exactly one of format, limit and
// feature is set.
type wantErr struct {
	format  string // substring of the *FormatError's message
	limit   string // the *LimitError's Limit
	feature string // the *FeatureError's Feature
}

func checkErr(t *testing.T, err error, want wantErr) {
	t.Helper()
	if err == nil {
		t.Fatalf("Parse succeeded, want %+v", want)
	}
	var fe *FormatError
	var le *LimitError
	var xe *FeatureError
	switch {
	case want.format != "":
		if !errors.As(err, &fe) {
			t.Fatalf("got %T %v, want *FormatError containing %q", err, err, want.format)
		}
		if !strings.Contains(err.Error(), want.format) {
			t.Fatalf("got %q, want it to contain %q", err, want.format)
		}
		if fe.Section == "" {
			t.Fatalf("FormatError without a section: %v", err)
		}
	case want.limit != "":
		if !errors.As(err, &le) || le.Limit != want.limit {
			t.Fatalf("got %T %v, want *LimitError for %s", err, err, want.limit)
		}
		if le.Got <= le.Max {
			t.Fatalf("LimitError with Got %d <= Max %d", le.Got, le.Max)
		}
	case want.feature != "":
		if !errors.As(err, &xe) || xe.Feature != want.feature {
			t.Fatalf("got %T %v, want *FeatureError for %s", err, err, want.feature)
		}
	default:
		t.Fatalf("bad test: empty wantErr (err %v)", err)
	}
}

// checkInvariants checks what every successful parse must guarantee.
func checkInvariants(t testing.TB, b []byte, m *Module) {
	t.Helper()
	pos := HeaderSize
	for i, s := range m.Sections {
		if s.Offset != pos {
			t.Fatalf("section %d (%s) at %d, want %d", i, s.ID, s.Offset, pos)
		}
		if s.ContentOffset <= s.Offset || s.End() > len(b) || !bytes.Equal(b[s.ContentOffset:s.End()], s.Content) {
			t.Fatalf("section %d (%s) bounds wrong: %+v", i, s.ID, s)
		}
		pos = s.End()
	}
	if pos != len(b) {
		t.Fatalf("sections end at %d, module at %d", pos, len(b))
	}
	if len(m.Code) != len(m.Functions) {
		t.Fatalf("%d bodies for %d functions", len(m.Code), len(m.Functions))
	}
	for i, c := range m.Code {
		if c.BodyOffset < c.Offset || c.BodyOffset+len(c.Body) != c.Offset+c.Size || len(c.Body) == 0 || c.Body[len(c.Body)-1] != OpEnd {
			t.Fatalf("body %d bounds wrong: offset %d size %d body at %d len %d", i, c.Offset, c.Size, c.BodyOffset, len(c.Body))
		}
		if !bytes.Equal(b[c.BodyOffset:c.BodyOffset+len(c.Body)], c.Body) {
			t.Fatalf("body %d does not alias the module", i)
		}
		if c.Offset+len(c.Locals) != c.BodyOffset || !bytes.Equal(b[c.Offset:c.BodyOffset], c.Locals) {
			t.Fatalf("body %d locals wrong", i)
		}
		var n uint64
		for _, d := range c.LocalDecls() {
			n += uint64(d.Count)
		}
		if n != c.NumLocals {
			t.Fatalf("body %d: LocalDecls sum to %d, NumLocals %d", i, n, c.NumLocals)
		}
	}
	for i, d := range m.Data {
		if !bytes.Equal(b[d.InitOffset:d.InitOffset+len(d.Init)], d.Init) {
			t.Fatalf("data segment %d does not alias the module", i)
		}
	}
	for i := range m.Elements {
		n := uint32(0)
		for range m.Elements[i].ItemExprs() {
			n++
		}
		if n != m.Elements[i].Count {
			t.Fatalf("element segment %d: ItemExprs gives %d items, Count is %d", i, n, m.Elements[i].Count)
		}
	}
	customs := 0
	for _, s := range m.Sections {
		if s.ID == SectionCustom {
			if m.Customs[customs].Offset != s.Offset || m.Customs[customs].Name != s.Name {
				t.Fatalf("custom section %d mismatch", customs)
			}
			customs++
		}
	}
	if customs != len(m.Customs) {
		t.Fatalf("%d custom sections listed, %d in Sections", len(m.Customs), customs)
	}
	if m.NumMemories() > 1 {
		t.Fatalf("%d memories accepted", m.NumMemories())
	}
}
