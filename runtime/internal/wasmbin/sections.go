package wasmbin

import "fmt"

// The decoders of the individual sections. Each reads exactly its section's
// bytes through r (the caller checks that nothing is left over), checks
// counts against the bytes left before allocating, and checks every index
// against the index spaces known so far. Item context ("import 3", "data
// segment 7") is added with within, only on error.

func (p *parser) customSection(r *reader, sec *Section) error {
	if uint64(len(p.m.Customs)) >= p.lim.MaxCustomSections {
		return &LimitError{Limit: "MaxCustomSections", Max: p.lim.MaxCustomSections, Got: uint64(len(p.m.Customs)) + 1}
	}
	name, err := r.name("custom section name", p.lim.MaxNameBytes)
	if err != nil {
		return err
	}
	if name == ManifestSection {
		if p.haveManifest {
			return r.errorf(sec.Offset, "duplicate custom section %q", name)
		}
		p.haveManifest = true
	}
	data, _ := r.readBytes(uint64(r.remaining()), "custom section payload")
	sec.Name = name
	p.m.Customs = append(p.m.Customs, CustomSection{Name: name, Data: data, Offset: sec.Offset})
	return nil
}

// valueType reads a value type, refusing the types of unsupported proposals
// with a *FeatureError.
func (p *parser) valueType(r *reader, what string) (ValueType, error) {
	return p.typeByte(r, what, false)
}

// refType reads a reference type: a value type of the others is an error.
func (p *parser) refType(r *reader, what string) (ValueType, error) {
	return p.typeByte(r, what, true)
}

func (p *parser) typeByte(r *reader, what string, ref bool) (ValueType, error) {
	c, off, err := r.readByteAt(what)
	if err != nil {
		return 0, err
	}
	switch v := ValueType(c); v {
	case FuncRef, ExternRef:
		return v, nil
	case I32, I64, F32, F64, V128:
		switch {
		case ref:
			return 0, r.errorf(off, "%s: %s is not a reference type", what, v)
		case v != V128 || p.lim.AllowSIMD:
			return v, nil
		}
		return 0, &FeatureError{Feature: FeatureSIMD, Reason: fmt.Sprintf("%s has type v128 (%s section, offset %d)", what, r.section, off)}
	}
	return 0, unknownType(r, off, c, what)
}

func unknownType(r *reader, off int, c byte, what string) error {
	switch {
	case c == 0x69 || c == 0x74: // exnref, nullexnref
		return &FeatureError{Feature: FeatureExceptionHandling,
			Reason: fmt.Sprintf("%s has type exnref (%s section, offset %d)", what, r.section, off)}
	case c == 0x63 || c == 0x64 || (c >= 0x6A && c <= 0x6E) || (c >= 0x71 && c <= 0x73):
		return &FeatureError{Feature: FeatureGC,
			Reason: fmt.Sprintf("%s has a GC or typed reference type 0x%02x (%s section, offset %d)", what, c, r.section, off)}
	}
	return r.errorf(off, "%s: invalid value type 0x%02x", what, c)
}

func (p *parser) typeSection(r *reader) (err error) {
	p.m.Types, err = vector(r, "type", 3, "MaxTypes", p.lim.MaxTypes, p.funcType)
	return err
}

// vector reads a section that is a vector of items: the count (see
// limitedCount), then each item, whose error is placed "<what> <i>".
func vector[T any](r *reader, what string, minSize int, limit string, max uint64, item func(*reader, *T) error) ([]T, error) {
	n, err := limitedCount(r, what, minSize, limit, max, 0)
	if err != nil {
		return nil, err
	}
	return vectorItems(r, n, what, 0, item)
}

// limitedCount reads the count of a vector whose items take at least
// minSize bytes each, and refuses one that makes more than max (the limit
// named limit) with the before already in the index space.
func limitedCount(r *reader, what string, minSize int, limit string, max, before uint64) (uint32, error) {
	n, err := r.count(what, minSize)
	if err != nil {
		return 0, err
	}
	if before+uint64(n) > max {
		return 0, &LimitError{Limit: limit, Max: max, Got: before + uint64(n)}
	}
	return n, nil
}

// vectorItems reads the n items of a vector whose count was read; an
// item's error is placed "<what> <index>", its index in the index space
// after the before that precede these.
func vectorItems[T any](r *reader, n uint32, what string, before uint64, item func(*reader, *T) error) ([]T, error) {
	items := make([]T, n)
	for i := range items {
		if err := item(r, &items[i]); err != nil {
			return nil, within(err, "%s %d", what, before+uint64(i))
		}
	}
	return items, nil
}

func (p *parser) funcType(r *reader, ft *FuncType) error {
	form, off, err := r.readByteAt("form")
	if err != nil {
		return err
	}
	if form != 0x60 {
		switch form {
		case 0x4E, 0x4F, 0x50, 0x5E, 0x5F:
			return &FeatureError{Feature: FeatureGC, Reason: fmt.Sprintf("GC composite or recursive type (form 0x%02x at offset %d)", form, off)}
		}
		return r.errorf(off, "invalid form 0x%02x (want 0x60, a function type)", form)
	}
	if ft.Params, err = p.typeList(r, "param", p.lim.MaxParams, "MaxParams"); err != nil {
		return err
	}
	if ft.Results, err = p.typeList(r, "result", p.lim.MaxResults, "MaxResults"); err != nil {
		return err
	}
	p.typeValues += uint64(len(ft.Params) + len(ft.Results))
	if p.typeValues > p.lim.MaxTypeValues {
		return &LimitError{Limit: "MaxTypeValues", Max: p.lim.MaxTypeValues, Got: p.typeValues}
	}
	return nil
}

func (p *parser) typeList(r *reader, what string, max uint64, limitName string) ([]ValueType, error) {
	n, err := r.count(what, 1)
	if err != nil {
		return nil, err
	}
	if uint64(n) > max {
		return nil, &LimitError{Limit: limitName, Max: max, Got: uint64(n)}
	}
	if n == 0 {
		return nil, nil
	}
	ts := make([]ValueType, n)
	for i := range ts {
		if ts[i], err = p.valueType(r, what); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// limits reads the limits of a memory or table. The flag bits of the
// threads (0x02), memory64 (0x04) and custom-page-sizes (0x08) proposals are
// recognised and refused with a *FeatureError.
func (p *parser) limits(r *reader) (min, max uint32, hasMax bool, err error) {
	flags, off, err := r.readByteAt("limits flags")
	if err != nil {
		return 0, 0, false, err
	}
	switch {
	case flags&^0x0F != 0:
		return 0, 0, false, r.errorf(off, "invalid limits flags 0x%02x", flags)
	case flags&0x04 != 0:
		return 0, 0, false, &FeatureError{Feature: FeatureMemory64, Reason: fmt.Sprintf("64-bit limits (flags 0x%02x at offset %d)", flags, off)}
	case flags&0x02 != 0:
		return 0, 0, false, &FeatureError{Feature: FeatureThreads, Reason: fmt.Sprintf("shared (flags 0x%02x at offset %d)", flags, off)}
	case flags&0x08 != 0:
		return 0, 0, false, &FeatureError{Feature: FeatureCustomPageSizes, Reason: fmt.Sprintf("custom page size (flags 0x%02x at offset %d)", flags, off)}
	}
	if min, err = r.u32("minimum"); err != nil {
		return 0, 0, false, err
	}
	if flags&0x01 != 0 {
		if max, err = r.u32("maximum"); err != nil {
			return 0, 0, false, err
		}
		if max < min {
			return 0, 0, false, r.errorf(off, "maximum %d is below minimum %d", max, min)
		}
		hasMax = true
	}
	return min, max, hasMax, nil
}

func (p *parser) tableType(r *reader) (TableType, error) {
	off := r.pos
	if r.pos < r.end && r.b[r.pos] == 0x40 {
		return TableType{}, &FeatureError{Feature: FeatureGC,
			Reason: fmt.Sprintf("table with an initialiser expression (typed function references, offset %d)", off)}
	}
	elem, err := p.refType(r, "element type")
	if err != nil {
		return TableType{}, err
	}
	min, max, hasMax, err := p.limits(r)
	if err != nil {
		return TableType{}, err
	}
	p.numTables++
	if p.numTables > p.lim.MaxTables {
		return TableType{}, &LimitError{Limit: "MaxTables", Max: p.lim.MaxTables, Got: p.numTables}
	}
	p.tableElems += uint64(min)
	if p.tableElems > p.lim.MaxTableElements {
		return TableType{}, &LimitError{Limit: "MaxTableElements", Max: p.lim.MaxTableElements, Got: p.tableElems}
	}
	return TableType{Elem: elem, Min: min, Max: max, HasMax: hasMax}, nil
}

func (p *parser) memoryType(r *reader) (MemoryType, error) {
	off := r.pos
	min, max, hasMax, err := p.limits(r)
	if err != nil {
		return MemoryType{}, err
	}
	const maxPages = 65536
	if min > maxPages {
		return MemoryType{}, r.errorf(off, "minimum %d pages exceeds 65536 (4 GiB)", min)
	}
	if hasMax && max > maxPages {
		return MemoryType{}, r.errorf(off, "maximum %d pages exceeds 65536 (4 GiB)", max)
	}
	p.numMemories++
	if p.numMemories > p.lim.MaxMemories {
		return MemoryType{}, &FeatureError{Feature: FeatureMultiMemory,
			Reason: fmt.Sprintf("memory %d at offset %d: at most %d memories supported", p.numMemories-1, off, p.lim.MaxMemories)}
	}
	if uint64(min) > p.lim.MaxMemoryPages {
		return MemoryType{}, &LimitError{Limit: "MaxMemoryPages", Max: p.lim.MaxMemoryPages, Got: uint64(min)}
	}
	return MemoryType{Min: min, Max: max, HasMax: hasMax}, nil
}

func (p *parser) globalType(r *reader) (GlobalType, error) {
	t, err := p.valueType(r, "global type")
	if err != nil {
		return GlobalType{}, err
	}
	mut, off, err := r.readByteAt("mutability")
	if err != nil {
		return GlobalType{}, err
	}
	switch mut {
	case 0x00, 0x01:
	case 0x02, 0x03:
		return GlobalType{}, &FeatureError{Feature: FeatureThreads, Reason: fmt.Sprintf("shared global (offset %d)", off)}
	default:
		return GlobalType{}, r.errorf(off, "invalid mutability 0x%02x", mut)
	}
	p.numGlobals++
	if p.numGlobals > p.lim.MaxGlobals {
		return GlobalType{}, &LimitError{Limit: "MaxGlobals", Max: p.lim.MaxGlobals, Got: p.numGlobals}
	}
	gt := GlobalType{Type: t, Mutable: mut == 0x01}
	p.globalTypes = append(p.globalTypes, gt)
	return gt, nil
}

func (p *parser) addFuncs(n uint64) error {
	p.numFuncs += n
	if p.numFuncs > p.lim.MaxFunctions {
		return &LimitError{Limit: "MaxFunctions", Max: p.lim.MaxFunctions, Got: p.numFuncs}
	}
	return nil
}

func (p *parser) importSection(r *reader) (err error) {
	p.m.Imports, err = vector(r, "import", 4, "MaxImports", p.lim.MaxImports, p.importEntry)
	return err
}

func (p *parser) importEntry(r *reader, imp *Import) error {
	var err error
	imp.Offset = r.pos
	if imp.Module, err = r.name("module name", p.lim.MaxNameBytes); err != nil {
		return err
	}
	if imp.Name, err = r.name("field name", p.lim.MaxNameBytes); err != nil {
		return err
	}
	if err := p.importDesc(r, imp); err != nil {
		return within(err, "%q.%q", imp.Module, imp.Name)
	}
	return nil
}

func (p *parser) importDesc(r *reader, imp *Import) error {
	var err error
	kind, off, err := r.readByteAt("kind")
	if err != nil {
		return err
	}
	switch ExternKind(kind) {
	case KindFunc:
		tOff := r.pos
		if imp.TypeIndex, err = r.u32("type index"); err != nil {
			return err
		}
		if uint64(imp.TypeIndex) >= uint64(len(p.m.Types)) {
			return r.errorf(tOff, "type index %d out of range (%d types)", imp.TypeIndex, len(p.m.Types))
		}
		imp.Func = p.m.Types[imp.TypeIndex]
		if err := p.addFuncs(1); err != nil {
			return err
		}
		p.importedFuncs++
	case KindTable:
		if imp.Table, err = p.tableType(r); err != nil {
			return err
		}
	case KindMemory:
		if imp.Memory, err = p.memoryType(r); err != nil {
			return err
		}
	case KindGlobal:
		if imp.Global, err = p.globalType(r); err != nil {
			return err
		}
	case 0x04:
		return &FeatureError{Feature: FeatureExceptionHandling, Reason: fmt.Sprintf("imports a tag (offset %d)", off)}
	default:
		return r.errorf(off, "invalid import kind 0x%02x", kind)
	}
	imp.Kind = ExternKind(kind)
	return nil
}

func (p *parser) functionSection(r *reader) error {
	n, err := r.count("function", 1)
	if err != nil {
		return err
	}
	if err := p.addFuncs(uint64(n)); err != nil {
		return err
	}
	fns := make([]uint32, n)
	for i := range fns {
		t, off, err := r.u32At("type index")
		if err != nil {
			return within(err, "function %d", p.importedFuncs+uint64(i))
		}
		if uint64(t) >= uint64(len(p.m.Types)) {
			return r.errorf(off, "function %d: type index %d out of range (%d types)", p.importedFuncs+uint64(i), t, len(p.m.Types))
		}
		fns[i] = t
	}
	p.m.Functions = fns
	return nil
}

func (p *parser) tableSection(r *reader) error {
	n, err := limitedCount(r, "table", 3, "MaxTables", p.lim.MaxTables, p.numTables)
	if err != nil {
		return err
	}
	p.m.Tables, err = vectorItems(r, n, "table", p.numTables, func(r *reader, t *TableType) (err error) {
		*t, err = p.tableType(r)
		return err
	})
	return err
}

func (p *parser) memorySection(r *reader) error {
	off := r.pos
	n, err := r.count("memory", 2)
	if err != nil {
		return err
	}
	if p.numMemories+uint64(n) > p.lim.MaxMemories {
		return &FeatureError{Feature: FeatureMultiMemory,
			Reason: fmt.Sprintf("%d imported and %d defined memories (memory section at offset %d); at most %d supported",
				p.numMemories, n, off, p.lim.MaxMemories)}
	}
	p.m.Memories, err = vectorItems(r, n, "memory", p.numMemories, func(r *reader, m *MemoryType) (err error) {
		*m, err = p.memoryType(r)
		return err
	})
	return err
}

func (p *parser) globalSection(r *reader) error {
	n, err := limitedCount(r, "global", 4, "MaxGlobals", p.lim.MaxGlobals, p.numGlobals)
	if err != nil {
		return err
	}
	globals := make([]Global, n)
	for i := range globals {
		idx := p.numGlobals
		g := &globals[i]
		if g.Type, err = p.globalType(r); err != nil {
			return within(err, "global %d", idx)
		}
		// global.get may name any global before this one: imported ones
		// (WebAssembly 2.0) or earlier defined ones (extended constant
		// expressions, GC). wazero checks the finer rules when compiling.
		if g.Init, err = p.constExpr(r, g.Type.Type, idx); err != nil {
			return within(err, "global %d initialiser", idx)
		}
	}
	p.m.Globals = globals
	return nil
}

// constExpr reads a constant expression: one constant instruction, then end.
// want is the type the expression must produce (0: any); global.get may name
// only globals below maxGlobal.
func (p *parser) constExpr(r *reader, want ValueType, maxGlobal uint64) (ConstExpr, error) {
	op, start, err := r.readByteAt("constant expression")
	if err != nil {
		return ConstExpr{}, err
	}
	e := ConstExpr{Op: op}
	var got ValueType
	switch op {
	case OpI32Const:
		v, err := r.s32("i32.const")
		if err != nil {
			return ConstExpr{}, err
		}
		e.Value, got = uint64(uint32(v)), I32
	case OpI64Const:
		v, err := r.s64("i64.const")
		if err != nil {
			return ConstExpr{}, err
		}
		e.Value, got = uint64(v), I64
	case OpF32Const:
		b, err := r.readBytes(4, "f32.const")
		if err != nil {
			return ConstExpr{}, err
		}
		e.Value, got = uint64(b[0])|uint64(b[1])<<8|uint64(b[2])<<16|uint64(b[3])<<24, F32
	case OpF64Const:
		b, err := r.readBytes(8, "f64.const")
		if err != nil {
			return ConstExpr{}, err
		}
		for i := 7; i >= 0; i-- {
			e.Value = e.Value<<8 | uint64(b[i])
		}
		got = F64
	case OpGlobalGet:
		g, off, err := r.u32At("global.get index")
		if err != nil {
			return ConstExpr{}, err
		}
		visible := min(maxGlobal, uint64(len(p.globalTypes)))
		if uint64(g) >= visible {
			return ConstExpr{}, r.errorf(off, "global.get %d out of range (%d globals visible)", g, visible)
		}
		e.Value, got = uint64(g), p.globalTypes[g].Type
	case OpRefNull:
		t, err := p.refType(r, "ref.null type")
		if err != nil {
			return ConstExpr{}, err
		}
		e.RefType, got = t, t
	case OpRefFunc:
		f, off, err := r.u32At("ref.func index")
		if err != nil {
			return ConstExpr{}, err
		}
		if uint64(f) >= p.numFuncs {
			return ConstExpr{}, r.errorf(off, "ref.func %d out of range (%d functions)", f, p.numFuncs)
		}
		e.Value, got = uint64(f), FuncRef
	case OpV128Const:
		sub, off, err := r.u32At("0xfd sub-opcode")
		if err != nil {
			return ConstExpr{}, err
		}
		if sub != 12 {
			return ConstExpr{}, r.errorf(off, "instruction 0xfd %d is not constant", sub)
		}
		if !p.lim.AllowSIMD {
			return ConstExpr{}, &FeatureError{Feature: FeatureSIMD, Reason: fmt.Sprintf("v128.const (offset %d)", start)}
		}
		if _, err := r.readBytes(16, "v128.const"); err != nil {
			return ConstExpr{}, err
		}
		got = V128
	case OpEnd:
		return ConstExpr{}, r.errorf(start, "empty constant expression (want one constant instruction before end)")
	case 0xFB:
		return ConstExpr{}, &FeatureError{Feature: FeatureGC, Reason: fmt.Sprintf("GC instruction in a constant expression (offset %d)", start)}
	default:
		return ConstExpr{}, r.errorf(start, "opcode 0x%02x is not a constant instruction", op)
	}
	end, off, err := r.readByteAt("end of constant expression")
	if err != nil {
		return ConstExpr{}, err
	}
	if end != OpEnd {
		switch end {
		case OpI32Const, OpI64Const, OpGlobalGet, 0x6A, 0x6B, 0x6C, 0x7C, 0x7D, 0x7E: // and i32/i64 add, sub, mul
			return ConstExpr{}, &FeatureError{Feature: FeatureExtendedConst,
				Reason: fmt.Sprintf("constant expression of more than one instruction (opcode 0x%02x at offset %d)", end, off)}
		}
		return ConstExpr{}, r.errorf(off, "want end (0x0b) after one constant instruction, got 0x%02x", end)
	}
	if want != 0 && got != want {
		return ConstExpr{}, r.errorf(start, "constant expression has type %s, want %s", got, want)
	}
	e.Raw = r.b[start:r.pos:r.pos]
	return e, nil
}

func (p *parser) exportSection(r *reader) error {
	n, err := limitedCount(r, "export", 3, "MaxExports", p.lim.MaxExports, 0)
	if err != nil {
		return err
	}
	exports := make([]Export, n)
	names := make(map[string]struct{}, n)
	for i := range exports {
		e := &exports[i]
		off := r.pos
		if e.Name, err = r.name("export name", p.lim.MaxNameBytes); err != nil {
			return within(err, "export %d", i)
		}
		if _, dup := names[e.Name]; dup {
			return r.errorf(off, "export %d: duplicate export name %q", i, e.Name)
		}
		names[e.Name] = struct{}{}
		if err := p.exportDesc(r, e); err != nil {
			return within(err, "export %d %q", i, e.Name)
		}
	}
	p.m.Exports = exports
	return nil
}

func (p *parser) exportDesc(r *reader, e *Export) error {
	kind, off, err := r.readByteAt("kind")
	if err != nil {
		return err
	}
	iOff := r.pos
	if e.Index, err = r.u32("index"); err != nil {
		return err
	}
	var space uint64
	switch ExternKind(kind) {
	case KindFunc:
		space = p.numFuncs
	case KindTable:
		space = p.numTables
	case KindMemory:
		space = p.numMemories
	case KindGlobal:
		space = p.numGlobals
	case 0x04:
		return &FeatureError{Feature: FeatureExceptionHandling, Reason: fmt.Sprintf("exports a tag (offset %d)", off)}
	default:
		return r.errorf(off, "invalid export kind 0x%02x", kind)
	}
	e.Kind = ExternKind(kind)
	if uint64(e.Index) >= space {
		return r.errorf(iOff, "%s index %d out of range (%d)", e.Kind, e.Index, space)
	}
	return nil
}

func (p *parser) startSection(r *reader) error {
	f, off, err := r.u32At("start function index")
	if err != nil {
		return err
	}
	if uint64(f) >= p.numFuncs {
		return r.errorf(off, "start function %d out of range (%d functions)", f, p.numFuncs)
	}
	if ft, ok := p.m.FuncType(f); !ok || len(ft.Params) != 0 || len(ft.Results) != 0 {
		return r.errorf(off, "start function %d has type %s, want () -> ()", f, ft)
	}
	p.m.Start = &f
	return nil
}

func (p *parser) elementSection(r *reader) (err error) {
	p.m.Elements, err = vector(r, "element segment", 3, "MaxElementSegments", p.lim.MaxElementSegments, p.elementSegment)
	return err
}

func (p *parser) elementSegment(r *reader, s *ElementSegment) error {
	flags, off, err := r.u32At("flags")
	if err != nil {
		return err
	}
	if flags > 7 {
		return r.errorf(off, "invalid flags %d (want 0..7)", flags)
	}
	s.Flags, s.Type, s.Exprs = flags, FuncRef, flags&0x04 != 0
	switch {
	case flags&0x01 == 0:
		s.Mode = SegmentActive
	case flags&0x02 == 0:
		s.Mode = SegmentPassive
	default:
		s.Mode = SegmentDeclarative
	}
	if s.Mode == SegmentActive {
		if s.Table, s.Offset, err = p.activeSegment(r, off, flags&0x02 != 0, "table", "tables", p.numTables); err != nil {
			return err
		}
	}
	// Flags 1, 2 and 3 carry an element kind (0x00, funcref); 5, 6 and 7 a
	// reference type; 0 and 4 neither (funcref).
	if flags&0x03 != 0 {
		if s.Exprs {
			if s.Type, err = p.refType(r, "element type"); err != nil {
				return err
			}
		} else {
			kind, kOff, err := r.readByteAt("element kind")
			if err != nil {
				return err
			}
			if kind != 0x00 {
				return r.errorf(kOff, "invalid element kind 0x%02x (want 0x00, funcref)", kind)
			}
		}
	}
	if s.Count, err = r.count("item", 1); err != nil {
		return err
	}
	p.elemItems += uint64(s.Count)
	if p.elemItems > p.lim.MaxElementItems {
		return &LimitError{Limit: "MaxElementItems", Max: p.lim.MaxElementItems, Got: p.elemItems}
	}
	itemsStart := r.pos
	for j := uint32(0); j < s.Count; j++ {
		if s.Exprs {
			if _, err := p.constExpr(r, s.Type, p.numGlobals); err != nil {
				return within(err, "item %d", j)
			}
			continue
		}
		f, fOff, err := r.u32At("function index")
		if err != nil {
			return within(err, "item %d", j)
		}
		if uint64(f) >= p.numFuncs {
			return r.errorf(fOff, "item %d: function %d out of range (%d functions)", j, f, p.numFuncs)
		}
	}
	s.Items = r.b[itemsStart:r.pos:r.pos]
	return nil
}

func (p *parser) dataCountSection(r *reader) error {
	n, err := r.u32("data count")
	if err != nil {
		return err
	}
	if uint64(n) > p.lim.MaxDataSegments {
		return &LimitError{Limit: "MaxDataSegments", Max: p.lim.MaxDataSegments, Got: uint64(n)}
	}
	p.m.DataCount = &n
	return nil
}

func (p *parser) codeSection(r *reader) error {
	p.haveCodeSection = true
	if uint64(r.remaining()) > p.lim.MaxCodeBytes {
		return &LimitError{Limit: "MaxCodeBytes", Max: p.lim.MaxCodeBytes, Got: uint64(r.remaining())}
	}
	off := r.pos
	n, err := r.count("function body", 2)
	if err != nil {
		return err
	}
	if uint64(n) != uint64(len(p.m.Functions)) {
		return r.errorf(off, "%d function bodies but the function section declares %d functions", n, len(p.m.Functions))
	}
	code := make([]Code, n)
	for i := range code {
		fidx := p.importedFuncs + uint64(i)
		if err := p.body(r, &code[i], p.m.Types[p.m.Functions[i]]); err != nil {
			return within(err, "function %d", fidx)
		}
	}
	p.m.Code = code
	return nil
}

// body reads one function body into c.
func (p *parser) body(r *reader, c *Code, ft FuncType) error {
	size, sOff, err := r.u32At("body size")
	if err != nil {
		return err
	}
	if uint64(size) > p.lim.MaxFunctionBodyBytes {
		return &LimitError{Limit: "MaxFunctionBodyBytes", Max: p.lim.MaxFunctionBodyBytes, Got: uint64(size)}
	}
	if uint64(size) > uint64(r.remaining()) {
		return r.errorf(sOff, "body size %d exceeds the %d bytes left", size, r.remaining())
	}
	c.Offset, c.Size = r.pos, int(size)
	br := &reader{b: r.b, pos: r.pos, end: r.pos + int(size), section: r.section}
	r.pos = br.end

	nd, err := br.count("local declaration", 2)
	if err != nil {
		return err
	}
	params := uint64(len(ft.Params))
	if params > p.lim.MaxLocals {
		return &LimitError{Limit: "MaxLocals", Max: p.lim.MaxLocals, Got: params}
	}
	for j := uint32(0); j < nd; j++ {
		cnt, err := br.u32("local count")
		if err != nil {
			return err
		}
		if _, err := p.valueType(br, "local"); err != nil {
			return err
		}
		// Checked after every declaration, so the sum stays below
		// MaxLocals + 2^32 and cannot wrap.
		c.NumLocals += uint64(cnt)
		if c.NumLocals > p.lim.MaxLocals-params {
			return &LimitError{Limit: "MaxLocals", Max: p.lim.MaxLocals, Got: params + c.NumLocals}
		}
	}
	p.localsTotal += params + c.NumLocals
	if p.localsTotal > p.lim.MaxLocalsTotal {
		return &LimitError{Limit: "MaxLocalsTotal", Max: p.lim.MaxLocalsTotal, Got: p.localsTotal}
	}
	if br.eof() {
		return br.errorf(br.pos, "body has no instructions (want at least end)")
	}
	if br.b[br.end-1] != OpEnd {
		return br.errorf(br.end-1, "body does not end with the end opcode (0x0b)")
	}
	c.Locals = br.b[c.Offset:br.pos:br.pos]
	c.BodyOffset = br.pos
	c.Body = br.b[br.pos:br.end:br.end]
	return nil
}

func (p *parser) dataSection(r *reader) error {
	p.haveDataSection = true
	off := r.pos
	n, err := limitedCount(r, "data segment", 2, "MaxDataSegments", p.lim.MaxDataSegments, 0)
	if err != nil {
		return err
	}
	if p.m.DataCount != nil && *p.m.DataCount != n {
		return r.errorf(off, "%d data segments but the datacount section declares %d", n, *p.m.DataCount)
	}
	p.m.Data, err = vectorItems(r, n, "data segment", 0, p.dataSegment)
	return err
}

func (p *parser) dataSegment(r *reader, s *DataSegment) error {
	flags, off, err := r.u32At("flags")
	if err != nil {
		return err
	}
	switch flags {
	case 0, 2:
		s.Mode = SegmentActive
		if s.Memory, s.Offset, err = p.activeSegment(r, off, flags == 2, "memory", "memories", p.numMemories); err != nil {
			return err
		}
	case 1:
		s.Mode = SegmentPassive
	default:
		return r.errorf(off, "invalid flags %d (want 0, 1 or 2)", flags)
	}
	ln, err := r.u32("size")
	if err != nil {
		return err
	}
	s.InitOffset = r.pos
	if s.Init, err = r.readBytes(uint64(ln), "contents"); err != nil {
		return err
	}
	p.dataBytes += uint64(ln)
	if p.dataBytes > p.lim.MaxDataBytes {
		return &LimitError{Limit: "MaxDataBytes", Max: p.lim.MaxDataBytes, Got: p.dataBytes}
	}
	return nil
}

// activeSegment reads what an active element or data segment (at off) has
// besides its items: the index of its table or memory (kind), explicit or
// else 0, checked against the have there are, and its offset expression.
func (p *parser) activeSegment(r *reader, off int, explicit bool, kind, kinds string, have uint64) (idx uint32, offset ConstExpr, err error) {
	if explicit {
		iOff := r.pos
		if idx, err = r.u32(kind + " index"); err != nil {
			return 0, ConstExpr{}, err
		}
		if uint64(idx) >= have {
			return 0, ConstExpr{}, r.errorf(iOff, "%s %d out of range (%d %s)", kind, idx, have, kinds)
		}
	} else if have == 0 {
		return 0, ConstExpr{}, r.errorf(off, "active segment but the module has no %s", kind)
	}
	if offset, err = p.constExpr(r, I32, p.numGlobals); err != nil {
		return 0, ConstExpr{}, within(err, "offset")
	}
	return idx, offset, nil
}
