package wasmbin

// Builder assembles small modules in memory, for tests that need a module of
// a given shape without a WebAssembly toolchain. It writes sections in the
// required order and every LEB128 in its shortest form. It does not check
// what it is given: a test may build an invalid module on purpose.
//
// Function indices follow the WebAssembly rule (imports first), so all
// function imports must be added before the first Func; ImportFunc panics
// otherwise. Expressions and function bodies are given as instruction bytes
// without their final end, which the Builder appends.
//
//	var b wasmbin.Builder
//	b.ImportFunc("hook_v1", "host_call", hostCallType)
//	mem := b.Memory(wasmbin.MemoryType{Min: 1})
//	h := b.Func(wasmbin.FuncType{Params: []wasmbin.ValueType{wasmbin.I32},
//		Results: []wasmbin.ValueType{wasmbin.I64}}, nil, wasmbin.I64Const(0))
//	b.Export("memory", wasmbin.KindMemory, mem)
//	b.Export("hook_v1_handle", wasmbin.KindFunc, h)
//	module := b.Bytes()
type Builder struct {
	types     []FuncType
	imports   []byte
	nImports  int
	nFuncImp  uint32
	nMemImp   uint32
	nTabImp   uint32
	nGlobImp  uint32
	funcs     []uint32
	bodies    [][]byte
	tables    []TableType
	memories  []MemoryType
	globals   [][]byte
	exports   []Export
	start     *uint32
	elems     [][]byte
	data      [][]byte
	dataCount bool
	customs   []CustomSection
}

// Type adds ft to the type section unless an equal type is there, and
// returns its index.
func (b *Builder) Type(ft FuncType) uint32 {
	for i, t := range b.types {
		if t.Equal(ft) {
			return uint32(i)
		}
	}
	b.types = append(b.types, ft)
	return uint32(len(b.types) - 1)
}

func (b *Builder) importHeader(module, name string, kind ExternKind) {
	b.imports = appendName(b.imports, module)
	b.imports = appendName(b.imports, name)
	b.imports = append(b.imports, byte(kind))
	b.nImports++
}

// ImportFunc adds a function import and returns its function index.
func (b *Builder) ImportFunc(module, name string, ft FuncType) uint32 {
	if len(b.funcs) > 0 {
		panic("wasmbin.Builder: ImportFunc after Func")
	}
	t := b.Type(ft)
	b.importHeader(module, name, KindFunc)
	b.imports = appendULEB(b.imports, uint64(t))
	b.nFuncImp++
	return b.nFuncImp - 1
}

// ImportMemory adds a memory import and returns its memory index.
func (b *Builder) ImportMemory(module, name string, mt MemoryType) uint32 {
	b.importHeader(module, name, KindMemory)
	b.imports = appendLimits(b.imports, mt.Min, mt.Max, mt.HasMax)
	b.nMemImp++
	return b.nMemImp - 1
}

// ImportTable adds a table import and returns its table index.
func (b *Builder) ImportTable(module, name string, tt TableType) uint32 {
	b.importHeader(module, name, KindTable)
	b.imports = append(b.imports, byte(tt.Elem))
	b.imports = appendLimits(b.imports, tt.Min, tt.Max, tt.HasMax)
	b.nTabImp++
	return b.nTabImp - 1
}

// ImportGlobal adds a global import and returns its global index.
func (b *Builder) ImportGlobal(module, name string, gt GlobalType) uint32 {
	b.importHeader(module, name, KindGlobal)
	b.imports = appendGlobalType(b.imports, gt)
	b.nGlobImp++
	return b.nGlobImp - 1
}

// Func defines a function of type ft with the given local declarations and
// instructions (without the final end) and returns its function index.
func (b *Builder) Func(ft FuncType, locals []LocalDecl, body []byte) uint32 {
	var raw []byte
	raw = appendULEB(raw, uint64(len(locals)))
	for _, l := range locals {
		raw = appendULEB(raw, uint64(l.Count))
		raw = append(raw, byte(l.Type))
	}
	raw = append(raw, body...)
	raw = append(raw, OpEnd)
	return b.FuncRaw(b.Type(ft), raw)
}

// FuncRaw defines a function with type index typeIndex whose body (local
// declarations and instructions, including the final end) is raw, written
// as is after its size. It returns the function index.
func (b *Builder) FuncRaw(typeIndex uint32, raw []byte) uint32 {
	b.funcs = append(b.funcs, typeIndex)
	b.bodies = append(b.bodies, raw)
	return b.nFuncImp + uint32(len(b.funcs)) - 1
}

// Table defines a table and returns its table index.
func (b *Builder) Table(tt TableType) uint32 {
	b.tables = append(b.tables, tt)
	return b.nTabImp + uint32(len(b.tables)) - 1
}

// Memory defines a memory and returns its memory index.
func (b *Builder) Memory(mt MemoryType) uint32 {
	b.memories = append(b.memories, mt)
	return b.nMemImp + uint32(len(b.memories)) - 1
}

// Global defines a global initialised by the constant instruction init
// (without end) and returns its global index.
func (b *Builder) Global(gt GlobalType, init []byte) uint32 {
	g := appendGlobalType(nil, gt)
	g = append(g, init...)
	g = append(g, OpEnd)
	b.globals = append(b.globals, g)
	return b.nGlobImp + uint32(len(b.globals)) - 1
}

// Export adds an export.
func (b *Builder) Export(name string, kind ExternKind, index uint32) {
	b.exports = append(b.exports, Export{Name: name, Kind: kind, Index: index})
}

// Start sets the start function.
func (b *Builder) Start(funcIndex uint32) { b.start = &funcIndex }

// Elem adds an active element segment for table 0 at the given offset.
func (b *Builder) Elem(offset int32, funcs ...uint32) {
	e := []byte{0x00}
	e = append(e, I32Const(offset)...)
	e = append(e, OpEnd)
	e = appendULEB(e, uint64(len(funcs)))
	for _, f := range funcs {
		e = appendULEB(e, uint64(f))
	}
	b.elems = append(b.elems, e)
}

// ElemRaw adds an element segment encoded as raw (flags onwards).
func (b *Builder) ElemRaw(raw []byte) { b.elems = append(b.elems, raw) }

// Data adds an active data segment for memory 0 at the given offset.
func (b *Builder) Data(offset int32, data []byte) {
	d := []byte{0x00}
	d = append(d, I32Const(offset)...)
	d = append(d, OpEnd)
	d = appendULEB(d, uint64(len(data)))
	d = append(d, data...)
	b.data = append(b.data, d)
}

// PassiveData adds a passive data segment.
func (b *Builder) PassiveData(data []byte) {
	d := []byte{0x01}
	d = appendULEB(d, uint64(len(data)))
	d = append(d, data...)
	b.data = append(b.data, d)
}

// DataCount makes Bytes write a datacount section.
func (b *Builder) DataCount() { b.dataCount = true }

// Custom adds a custom section, written after all other sections.
func (b *Builder) Custom(name string, data []byte) {
	b.customs = append(b.customs, CustomSection{Name: name, Data: data})
}

// Bytes returns the encoded module.
func (b *Builder) Bytes() []byte {
	out := []byte(Magic + Version)
	vec := func(id SectionID, n int, items []byte) {
		if n == 0 {
			return
		}
		out = AppendSection(out, id, append(appendULEB(nil, uint64(n)), items...))
	}
	var s []byte
	for _, t := range b.types {
		s = append(s, 0x60)
		s = appendValueTypes(s, t.Params)
		s = appendValueTypes(s, t.Results)
	}
	vec(SectionType, len(b.types), s)
	vec(SectionImport, b.nImports, b.imports)
	s = nil
	for _, f := range b.funcs {
		s = appendULEB(s, uint64(f))
	}
	vec(SectionFunction, len(b.funcs), s)
	s = nil
	for _, t := range b.tables {
		s = append(s, byte(t.Elem))
		s = appendLimits(s, t.Min, t.Max, t.HasMax)
	}
	vec(SectionTable, len(b.tables), s)
	s = nil
	for _, m := range b.memories {
		s = appendLimits(s, m.Min, m.Max, m.HasMax)
	}
	vec(SectionMemory, len(b.memories), s)
	vec(SectionGlobal, len(b.globals), concat(b.globals))
	s = nil
	for _, e := range b.exports {
		s = appendName(s, e.Name)
		s = append(s, byte(e.Kind))
		s = appendULEB(s, uint64(e.Index))
	}
	vec(SectionExport, len(b.exports), s)
	if b.start != nil {
		out = AppendSection(out, SectionStart, appendULEB(nil, uint64(*b.start)))
	}
	vec(SectionElement, len(b.elems), concat(b.elems))
	if b.dataCount {
		out = AppendSection(out, SectionDataCount, appendULEB(nil, uint64(len(b.data))))
	}
	s = nil
	for _, body := range b.bodies {
		s = appendULEB(s, uint64(len(body)))
		s = append(s, body...)
	}
	vec(SectionCode, len(b.bodies), s)
	vec(SectionData, len(b.data), concat(b.data))
	for _, c := range b.customs {
		out = AppendCustomSection(out, c.Name, c.Data)
	}
	return out
}

// AppendSection appends a section with the given id and content (its size
// is written in front) to module and returns the extended slice. It is the
// raw form of AppendCustomSection, for tests that need sections in an
// arbitrary order.
func AppendSection(module []byte, id SectionID, content []byte) []byte {
	module = append(module, byte(id))
	module = appendULEB(module, uint64(len(content)))
	return append(module, content...)
}

// AppendULEB128 appends v in unsigned LEB128, shortest form.
func AppendULEB128(b []byte, v uint64) []byte { return appendULEB(b, v) }

// AppendSLEB128 appends v in signed LEB128, shortest form.
func AppendSLEB128(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// I32Const returns the instruction i32.const v.
func I32Const(v int32) []byte { return AppendSLEB128([]byte{OpI32Const}, int64(v)) }

// I64Const returns the instruction i64.const v.
func I64Const(v int64) []byte { return AppendSLEB128([]byte{OpI64Const}, v) }

func appendName(b []byte, s string) []byte {
	b = appendULEB(b, uint64(len(s)))
	return append(b, s...)
}

func appendValueTypes(b []byte, ts []ValueType) []byte {
	b = appendULEB(b, uint64(len(ts)))
	for _, t := range ts {
		b = append(b, byte(t))
	}
	return b
}

func appendLimits(b []byte, min, max uint32, hasMax bool) []byte {
	if hasMax {
		b = append(b, 0x01)
		b = appendULEB(b, uint64(min))
		return appendULEB(b, uint64(max))
	}
	b = append(b, 0x00)
	return appendULEB(b, uint64(min))
}

func appendGlobalType(b []byte, gt GlobalType) []byte {
	mut := byte(0)
	if gt.Mutable {
		mut = 1
	}
	return append(b, byte(gt.Type), mut)
}

func concat(parts [][]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
