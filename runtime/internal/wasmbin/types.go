package wasmbin

import (
	"fmt"
	"iter"
	"slices"
	"strings"
)

// ValueType is a WebAssembly value type, as encoded in the binary format.
type ValueType byte

// The value types the reader accepts. V128 is refused with a *FeatureError
// unless Limits.AllowSIMD is set.
const (
	I32       ValueType = 0x7F // 32-bit integer
	I64       ValueType = 0x7E // 64-bit integer
	F32       ValueType = 0x7D // 32-bit float
	F64       ValueType = 0x7C // 64-bit float
	V128      ValueType = 0x7B // 128-bit vector (SIMD)
	FuncRef   ValueType = 0x70 // nullable function reference
	ExternRef ValueType = 0x6F // nullable host reference
)

// String returns the WebAssembly text name of the type ("i32", "funcref", ...)
// or "0xNN" for a byte that is not a known value type.
func (v ValueType) String() string { return enumName(valueTypeNames[:], v, "0x%02x") }

var valueTypeNames = [...]string{
	I32: "i32", I64: "i64", F32: "f32", F64: "f64", V128: "v128",
	FuncRef: "funcref", ExternRef: "externref",
}

// enumName returns names[v], or fallback formatted with v's byte when v has
// no name: the String method of the package's byte enumerations.
func enumName[T ~byte](names []string, v T, fallback string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf(fallback, byte(v))
}

// FuncType is a function signature. The slices are shared with the Module
// they came from and must not be modified.
type FuncType struct {
	Params  []ValueType // parameter types, in order
	Results []ValueType // result types, in order
}

// String returns FormatFuncType(f).
func (f FuncType) String() string { return FormatFuncType(f) }

// Equal reports whether f and g have the same parameter and result types.
func (f FuncType) Equal(g FuncType) bool {
	return slices.Equal(f.Params, g.Params) && slices.Equal(f.Results, g.Results)
}

// FormatFuncType renders a signature in the form used by the ABI documents
// and by the loader's error messages: "(i32, i32) -> i64", "(i32) -> i64",
// "() -> i32", "(i32) -> ()". An empty parameter or result list is written
// "()", a single result without parentheses, several results as a
// parenthesised list: "(i32) -> (i32, i64)".
func FormatFuncType(f FuncType) string {
	var sb strings.Builder
	writeTypeList(&sb, f.Params, true)
	sb.WriteString(" -> ")
	writeTypeList(&sb, f.Results, false)
	return sb.String()
}

func writeTypeList(sb *strings.Builder, ts []ValueType, alwaysParens bool) {
	if len(ts) == 1 && !alwaysParens {
		sb.WriteString(ts[0].String())
		return
	}
	sb.WriteByte('(')
	for i, t := range ts {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(t.String())
	}
	sb.WriteByte(')')
}

// ExternKind is the kind of an import or export.
type ExternKind byte

// The import and export kinds of WebAssembly 2.0.
const (
	KindFunc   ExternKind = 0x00 // a function
	KindTable  ExternKind = 0x01 // a table
	KindMemory ExternKind = 0x02 // a linear memory
	KindGlobal ExternKind = 0x03 // a global
)

// String returns "func", "table", "memory" or "global" (or "kind(N)").
func (k ExternKind) String() string { return enumName(externKindNames[:], k, "kind(%d)") }

var externKindNames = [...]string{KindFunc: "func", KindTable: "table", KindMemory: "memory", KindGlobal: "global"}

// SectionID is the id byte of a section.
type SectionID byte

// Section ids. SectionTag (exception handling) is recognised only to refuse it.
const (
	SectionCustom    SectionID = 0
	SectionType      SectionID = 1
	SectionImport    SectionID = 2
	SectionFunction  SectionID = 3
	SectionTable     SectionID = 4
	SectionMemory    SectionID = 5
	SectionGlobal    SectionID = 6
	SectionExport    SectionID = 7
	SectionStart     SectionID = 8
	SectionElement   SectionID = 9
	SectionCode      SectionID = 10
	SectionData      SectionID = 11
	SectionDataCount SectionID = 12
	SectionTag       SectionID = 13
)

var sectionNames = [...]string{
	SectionCustom:    "custom",
	SectionType:      "type",
	SectionImport:    "import",
	SectionFunction:  "function",
	SectionTable:     "table",
	SectionMemory:    "memory",
	SectionGlobal:    "global",
	SectionExport:    "export",
	SectionStart:     "start",
	SectionElement:   "element",
	SectionCode:      "code",
	SectionData:      "data",
	SectionDataCount: "datacount",
	SectionTag:       "tag",
}

// String returns the section's name as used in error messages ("type",
// "code", "datacount", ...), or "unknown(N)" for an unknown id.
func (id SectionID) String() string { return enumName(sectionNames[:], id, "unknown(%d)") }

// MemoryType is the type of a linear memory, in 64 KiB pages.
type MemoryType struct {
	Min    uint32 // initial size in pages, at most 65536
	Max    uint32 // maximum size in pages if HasMax, at least Min
	HasMax bool   // whether a maximum was declared
}

// TableType is the type of a table.
type TableType struct {
	Elem   ValueType // FuncRef or ExternRef
	Min    uint32    // initial number of elements
	Max    uint32    // maximum number of elements if HasMax, at least Min
	HasMax bool      // whether a maximum was declared
}

// GlobalType is the type of a global.
type GlobalType struct {
	Type    ValueType // the value type
	Mutable bool      // whether global.set may change it
}

// Opcodes that may appear in a constant expression (ConstExpr.Op).
const (
	OpI32Const  byte = 0x41 // i32.const, Value holds the uint32 bits
	OpI64Const  byte = 0x42 // i64.const, Value holds the uint64 bits
	OpF32Const  byte = 0x43 // f32.const, Value holds the IEEE 754 bits
	OpF64Const  byte = 0x44 // f64.const, Value holds the IEEE 754 bits
	OpGlobalGet byte = 0x23 // global.get, Value is the global index
	OpRefNull   byte = 0xD0 // ref.null, RefType is the reference type
	OpRefFunc   byte = 0xD2 // ref.func, Value is the function index
	OpV128Const byte = 0xFD // v128.const (only with Limits.AllowSIMD); Raw holds the bytes
	OpEnd       byte = 0x0B // end of an expression or function body
)

// ConstExpr is a decoded constant expression: exactly one instruction
// followed by end.
type ConstExpr struct {
	Op      byte      // one of the Op* constants
	Value   uint64    // immediate: constant bits or index, per Op
	RefType ValueType // for OpRefNull: FuncRef or ExternRef
	Raw     []byte    // the encoded expression, including the final end
}

// Type returns the type of the value the expression produces, given the
// module's global types (for global.get). It returns 0 if unknown.
func (c ConstExpr) Type(m *Module) ValueType {
	switch c.Op {
	case OpI32Const:
		return I32
	case OpI64Const:
		return I64
	case OpF32Const:
		return F32
	case OpF64Const:
		return F64
	case OpV128Const:
		return V128
	case OpRefNull:
		return c.RefType
	case OpRefFunc:
		return FuncRef
	case OpGlobalGet:
		if m != nil {
			if g, ok := m.GlobalType(uint32(c.Value)); ok {
				return g.Type
			}
		}
	}
	return 0
}

// Import is one entry of the import section. Exactly one of the kind-specific
// fields is meaningful, according to Kind.
type Import struct {
	Module string     // module name, valid UTF-8
	Name   string     // field name, valid UTF-8
	Kind   ExternKind // what is imported
	Offset int        // offset of the entry in the module

	TypeIndex uint32     // KindFunc: index into Module.Types
	Func      FuncType   // KindFunc: Module.Types[TypeIndex]
	Table     TableType  // KindTable
	Memory    MemoryType // KindMemory
	Global    GlobalType // KindGlobal
}

// Export is one entry of the export section.
type Export struct {
	Name  string     // export name, valid UTF-8, unique in the module
	Kind  ExternKind // what is exported
	Index uint32     // index in the kind's index space (imports first)
}

// Global is a global defined by the module.
type Global struct {
	Type GlobalType // the global's type
	Init ConstExpr  // its initialiser
}

// SegmentMode says how an element or data segment is used.
type SegmentMode byte

// Segment modes.
const (
	SegmentActive      SegmentMode = iota // copied into a table or memory at instantiation
	SegmentPassive                        // used by table.init / memory.init
	SegmentDeclarative                    // element segments only: declares ref.func targets
)

// String returns "active", "passive" or "declarative".
func (s SegmentMode) String() string { return enumName(segmentModeNames[:], s, "mode(%d)") }

var segmentModeNames = [...]string{SegmentActive: "active", SegmentPassive: "passive", SegmentDeclarative: "declarative"}

// ElementSegment is an element segment. Its items are not kept decoded (a
// segment may list millions); they were checked (function indices in range,
// expressions constant and of the segment's type) and are available raw.
type ElementSegment struct {
	Flags  uint32      // the encoding form, 0..7
	Mode   SegmentMode // active, passive or declarative
	Table  uint32      // active: the table index
	Offset ConstExpr   // active: the offset expression
	Type   ValueType   // FuncRef or ExternRef
	Count  uint32      // number of items
	Exprs  bool        // items are constant expressions (flags 4..7), not function indices
	Items  []byte      // the encoded items, after the count
}

// ItemExprs returns an iterator over the items of s, in order, each as a
// constant expression. An item of a segment of function indices (flags
// 0..3) is given as the ref.func it stands for: Op OpRefFunc, Value the
// index, Raw nil. An item of a segment of expressions (flags 4..7) is
// given as decoded (ref.func, ref.null or global.get), Raw included. For a
// segment that Parse returned the items cannot be malformed; on bytes it
// did not check, the iteration stops before the first malformed item (a
// caller that must know counts the items against Count).
func (s *ElementSegment) ItemExprs() iter.Seq[ConstExpr] {
	return func(yield func(ConstExpr) bool) {
		r := &reader{b: s.Items, end: len(s.Items), section: "element"}
		for range s.Count {
			var e ConstExpr
			if s.Exprs {
				var ok bool
				if e, ok = itemExpr(r); !ok {
					return
				}
			} else {
				f, err := r.u32("function index")
				if err != nil {
					return
				}
				e = ConstExpr{Op: OpRefFunc, Value: uint64(f)}
			}
			if !yield(e) {
				return
			}
		}
	}
}

// itemExpr decodes one expression item of an element segment: the forms
// Parse accepts there, without checking the indices against a module.
func itemExpr(r *reader) (ConstExpr, bool) {
	start := r.pos
	op, err := r.readByte("element item")
	if err != nil {
		return ConstExpr{}, false
	}
	e := ConstExpr{Op: op}
	switch op {
	case OpRefNull:
		t, err := r.readByte("ref.null type")
		if err != nil || (ValueType(t) != FuncRef && ValueType(t) != ExternRef) {
			return ConstExpr{}, false
		}
		e.RefType = ValueType(t)
	case OpRefFunc, OpGlobalGet:
		v, err := r.u32("index")
		if err != nil {
			return ConstExpr{}, false
		}
		e.Value = uint64(v)
	default:
		return ConstExpr{}, false
	}
	if end, err := r.readByte("end"); err != nil || end != OpEnd {
		return ConstExpr{}, false
	}
	e.Raw = r.b[start:r.pos:r.pos]
	return e, true
}

// DataSegment is a data segment.
type DataSegment struct {
	Mode       SegmentMode // active or passive
	Memory     uint32      // active: the memory index
	Offset     ConstExpr   // active: the offset expression
	Init       []byte      // the bytes to copy
	InitOffset int         // offset of Init[0] in the module
}

// LocalDecl is one run of locals declared by a function body.
type LocalDecl struct {
	Count uint32    // number of locals in the run
	Type  ValueType // their type
}

// Code is one function body of the code section. The local declarations are
// kept encoded (a body may hold millions of them, and decoding them all
// would multiply the memory a parse takes); LocalDecls decodes them.
type Code struct {
	Offset     int    // offset of the body (its locals vector), after the size field
	Size       int    // body size in bytes, as declared by the size field
	Locals     []byte // the encoded locals vector (count, then count and type per run), checked
	NumLocals  uint64 // total declared locals, excluding parameters
	Body       []byte // the instructions, ending with the end opcode
	BodyOffset int    // offset of Body[0] in the module
}

// LocalDecls decodes the local declarations, in order. For a Code that Parse
// returned it cannot fail; on bytes it did not check it returns the
// declarations decoded before the first malformed one.
func (c *Code) LocalDecls() []LocalDecl {
	r := &reader{b: c.Locals, end: len(c.Locals)}
	n, err := r.count("local declaration", 2)
	if err != nil || n == 0 {
		return nil
	}
	decls := make([]LocalDecl, 0, n)
	for i := uint32(0); i < n; i++ {
		cnt, err := r.u32("local count")
		if err != nil {
			break
		}
		t, err := r.readByte("local type")
		if err != nil {
			break
		}
		decls = append(decls, LocalDecl{Count: cnt, Type: ValueType(t)})
	}
	return decls
}

// CustomSection is a custom section.
type CustomSection struct {
	Name   string // the section's name, valid UTF-8
	Data   []byte // the payload after the name
	Offset int    // offset of the section's id byte in the module
}

// Section locates one section of the module, in the order they appear.
type Section struct {
	ID            SectionID // the section id
	Name          string    // custom sections only: the section's name
	Offset        int       // offset of the id byte
	ContentOffset int       // offset of the first content byte, after the size field
	Size          int       // content size in bytes
	Content       []byte    // the raw content (for custom sections, including the name)
}

// End returns the offset just past the section.
func (s Section) End() int { return s.ContentOffset + s.Size }
