package wasmbin

import (
	"fmt"
	"io"
)

// This file decodes the instructions of function bodies: the code a later
// pass (runtime/internal/meter) rewrites. Parse itself never decodes them.
// See RATIONALE.md#why-our-own-instruction-decoder-and-encoder.

// More names a FeatureError can report, for instructions.
const (
	FeatureTailCall = "tail-call" // return_call, return_call_indirect
)

// Opcodes of the control and variable instructions the rewriter cares about.
// The numeric instructions are not named; see the WebAssembly specification.
const (
	OpUnreachable  byte = 0x00
	OpNop          byte = 0x01
	OpBlock        byte = 0x02
	OpLoop         byte = 0x03
	OpIf           byte = 0x04
	OpElse         byte = 0x05
	OpBr           byte = 0x0C
	OpBrIf         byte = 0x0D
	OpBrTable      byte = 0x0E
	OpReturn       byte = 0x0F
	OpCall         byte = 0x10
	OpCallIndirect byte = 0x11
	OpDrop         byte = 0x1A
	OpSelect       byte = 0x1B
	OpSelectT      byte = 0x1C
	OpLocalGet     byte = 0x20
	OpLocalSet     byte = 0x21
	OpLocalTee     byte = 0x22
	OpGlobalSet    byte = 0x24
	OpTableGet     byte = 0x25
	OpTableSet     byte = 0x26
	OpMemorySize   byte = 0x3F
	OpMemoryGrow   byte = 0x40
	OpRefIsNull    byte = 0xD1
	OpPrefixFC     byte = 0xFC // saturating truncation, bulk memory, table instructions
)

// Sub-opcodes of the 0xFC prefix (Instr.Sub).
const (
	SubMemoryInit uint32 = 8
	SubDataDrop   uint32 = 9
	SubMemoryCopy uint32 = 10
	SubMemoryFill uint32 = 11
	SubTableInit  uint32 = 12
	SubElemDrop   uint32 = 13
	SubTableCopy  uint32 = 14
	SubTableGrow  uint32 = 15
	SubTableSize  uint32 = 16
	SubTableFill  uint32 = 17
)

// BlockType is the type of a block, loop or if.
type BlockType struct {
	// Empty: no parameters, no results (0x40).
	Empty bool
	// Value is the single result type when the block has one result and
	// no parameters; 0 otherwise.
	Value ValueType
	// Index is the type index of a multi-value block type (when neither
	// Empty nor Value is set).
	Index uint32
}

// Instr is one decoded instruction. Only the fields its opcode uses are set;
// the rest keep whatever the previous instruction left, so read only what
// the opcode defines.
type Instr struct {
	Op  byte   // the opcode, or the prefix (0xFC)
	Sub uint32 // the sub-opcode after a 0xFC prefix

	// Index is the first index immediate: a label (br, br_if, the default
	// of br_table), function (call, ref.func), type (call_indirect),
	// local, global, table (table.get/set/grow/size/fill, destination of
	// table.copy), data segment (memory.init, data.drop) or element segment
	// (table.init, elem.drop).
	Index uint32
	// Index2 is the second index immediate: the table of call_indirect and
	// table.init, the source table of table.copy.
	Index2 uint32
	// Block is the type of block, loop and if.
	Block BlockType
	// Targets are the labels of br_table before its default (Index). The
	// slice is reused by the next call to Next.
	Targets []uint32
	// Align and Offset are the memory argument of loads and stores.
	Align, Offset uint32
	// Const is the value of i32.const and i64.const (sign-extended to 64
	// bits, as two's complement) and the bits of f32.const and f64.const.
	Const uint64

	// Start and End delimit the instruction's bytes in the body.
	Start, End int
}

// InstrReader decodes the instructions of one function body in order.
type InstrReader struct {
	r       reader
	base    int // offset of body[0] in the module, for errors
	targets []uint32
}

// NewInstrReader returns a reader of body (instructions only, ending with
// end, as in Code.Body); offset is the position of body[0] in the module,
// used in error messages.
func NewInstrReader(body []byte, offset int) *InstrReader {
	return &InstrReader{r: reader{b: body, end: len(body), section: "code"}, base: offset}
}

// Pos returns the position of the next instruction in the body.
func (d *InstrReader) Pos() int { return d.r.pos }

// Reset makes d read body again from its start.
func (d *InstrReader) Reset() { d.r.pos = 0 }

// Next decodes the next instruction into in. It returns io.EOF after the
// last instruction, a *FormatError for bytes that are not an instruction
// of WebAssembly 2.0, and a *FeatureError for instructions of proposals
// the runtime does not support (SIMD, threads, tail calls, exception
// handling, GC, multi-memory, memory64). It never panics.
func (d *InstrReader) Next(in *Instr) error {
	if d.r.eof() {
		return io.EOF
	}
	err := d.next(in)
	if err != nil {
		return d.rebase(err)
	}
	in.End = d.r.pos
	return nil
}

// rebase turns body offsets into module offsets.
func (d *InstrReader) rebase(err error) error {
	if fe, ok := err.(*FormatError); ok {
		fe.Offset += d.base
	}
	return err
}

func (d *InstrReader) feature(name string, what string) error {
	return &FeatureError{Feature: name, Reason: fmt.Sprintf("%s at offset %d", what, d.base+d.r.pos)}
}

func (d *InstrReader) next(in *Instr) error {
	r := &d.r
	in.Start = r.pos
	op := r.b[r.pos]
	r.pos++
	in.Op = op
	var err error
	switch {
	case op == OpUnreachable, op == OpNop, op == OpElse, op == OpEnd, op == OpReturn,
		op == OpDrop, op == OpSelect:
		return nil
	case op == OpBlock, op == OpLoop, op == OpIf:
		return d.blockType(in)
	case op == OpBr, op == OpBrIf:
		in.Index, err = r.u32("label")
		return err
	case op == OpBrTable:
		n, err := r.count("br_table target", 1)
		if err != nil {
			return err
		}
		d.targets = d.targets[:0]
		for i := uint32(0); i < n; i++ {
			l, err := r.u32("label")
			if err != nil {
				return err
			}
			d.targets = append(d.targets, l)
		}
		in.Targets = d.targets
		in.Index, err = r.u32("label")
		return err
	case op == OpCall:
		in.Index, err = r.u32("function index")
		return err
	case op == OpCallIndirect:
		if in.Index, err = r.u32("type index"); err != nil {
			return err
		}
		in.Index2, err = r.u32("table index")
		return err
	case op == 0x12 || op == 0x13:
		return d.feature(FeatureTailCall, fmt.Sprintf("instruction 0x%02x (return_call)", op))
	case op == OpSelectT:
		n, err := r.count("select type", 1)
		if err != nil {
			return err
		}
		if n != 1 {
			return r.errorf(in.Start, "select with %d types (want 1)", n)
		}
		p := &parser{lim: Limits{}}
		_, err = p.valueType(r, "select type")
		return err
	case op >= OpLocalGet && op <= OpTableSet: // local.*, global.*, table.get/set
		in.Index, err = r.u32("index")
		return err
	case op >= 0x28 && op <= 0x3E: // loads and stores
		return d.memarg(in)
	case op == OpMemorySize || op == OpMemoryGrow:
		return d.memIndex()
	case op == OpI32Const:
		v, err := r.s32("i32.const")
		in.Const = uint64(int64(v))
		return err
	case op == OpI64Const:
		v, err := r.s64("i64.const")
		in.Const = uint64(v)
		return err
	case op == OpF32Const:
		b, err := r.readBytes(4, "f32.const")
		if err != nil {
			return err
		}
		in.Const = uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24
		return nil
	case op == OpF64Const:
		b, err := r.readBytes(8, "f64.const")
		if err != nil {
			return err
		}
		in.Const = 0
		for i := 7; i >= 0; i-- {
			in.Const = in.Const<<8 | uint64(b[i])
		}
		return nil
	case op >= 0x45 && op <= 0xC4: // numeric instructions, sign extension
		return nil
	case op == OpRefNull:
		p := &parser{}
		_, err := p.refType(r, "ref.null type")
		return err
	case op == OpRefIsNull:
		return nil
	case op == OpRefFunc:
		in.Index, err = r.u32("function index")
		return err
	case op == OpPrefixFC:
		return d.prefixFC(in)
	case op == 0xFD:
		return d.feature(FeatureSIMD, "SIMD instruction (0xfd prefix)")
	case op == 0xFE:
		return d.feature(FeatureThreads, "atomic instruction (0xfe prefix)")
	case op == 0xFB:
		return d.feature(FeatureGC, "GC instruction (0xfb prefix)")
	case op >= 0x06 && op <= 0x0A, op == 0x18, op == 0x19, op == 0x1F:
		return d.feature(FeatureExceptionHandling, fmt.Sprintf("exception-handling instruction 0x%02x", op))
	case op == 0x14 || op == 0x15 || op == 0xD3 || op == 0xD4 || op == 0xD5 || op == 0xD6:
		return d.feature(FeatureGC, fmt.Sprintf("typed function reference instruction 0x%02x", op))
	}
	return r.errorf(in.Start, "unknown opcode 0x%02x", op)
}

func (d *InstrReader) blockType(in *Instr) error {
	r := &d.r
	in.Block = BlockType{}
	if r.eof() {
		return r.errorf(r.pos, "unexpected end of body reading a block type")
	}
	c := r.b[r.pos]
	switch {
	case c == 0x40:
		r.pos++
		in.Block.Empty = true
		return nil
	case c&0x80 == 0 && c&0x40 != 0: // a negative one-byte s33: a value type
		off := r.pos
		p := &parser{}
		v, err := p.valueType(r, "block type")
		if err != nil {
			if _, ok := err.(*FeatureError); ok {
				return err
			}
			return r.errorf(off, "invalid block type 0x%02x", c)
		}
		in.Block.Value = v
		return nil
	}
	// A non-negative s33: a type index.
	off := r.pos
	v, err := r.s64("block type")
	if err != nil {
		return err
	}
	if r.pos-off > 5 || v < 0 || v > 0xFFFFFFFF {
		return r.errorf(off, "invalid block type index")
	}
	in.Block.Index = uint32(v)
	return nil
}

func (d *InstrReader) memarg(in *Instr) error {
	r := &d.r
	a, off, err := r.u32At("alignment")
	if err != nil {
		return err
	}
	if a >= 64 {
		// Bit 6 of the alignment flags a memory index (multi-memory).
		return &FeatureError{Feature: FeatureMultiMemory, Reason: fmt.Sprintf("memory index in a memory argument at offset %d", d.base+off)}
	}
	in.Align = a
	in.Offset, err = r.u32("offset")
	return err
}

// memIndex reads the memory index of memory.size, memory.grow, memory.fill
// and memory.init (a byte 0x00 in WebAssembly 2.0).
func (d *InstrReader) memIndex() error {
	r := &d.r
	m, off, err := r.u32At("memory index")
	if err != nil {
		return err
	}
	if m != 0 {
		return &FeatureError{Feature: FeatureMultiMemory, Reason: fmt.Sprintf("memory index %d at offset %d", m, d.base+off)}
	}
	return nil
}

func (d *InstrReader) prefixFC(in *Instr) error {
	r := &d.r
	sub, err := r.u32("0xfc sub-opcode")
	if err != nil {
		return err
	}
	in.Sub = sub
	switch sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // saturating truncation
		return nil
	case SubMemoryInit:
		if in.Index, err = r.u32("data index"); err != nil {
			return err
		}
		return d.memIndex()
	case SubDataDrop:
		in.Index, err = r.u32("data index")
		return err
	case SubMemoryCopy:
		if err := d.memIndex(); err != nil {
			return err
		}
		return d.memIndex()
	case SubMemoryFill:
		return d.memIndex()
	case SubTableInit:
		if in.Index, err = r.u32("element index"); err != nil {
			return err
		}
		in.Index2, err = r.u32("table index")
		return err
	case SubElemDrop:
		in.Index, err = r.u32("element index")
		return err
	case SubTableCopy:
		if in.Index, err = r.u32("table index"); err != nil {
			return err
		}
		in.Index2, err = r.u32("table index")
		return err
	case SubTableGrow, SubTableSize, SubTableFill:
		in.Index, err = r.u32("table index")
		return err
	}
	return r.errorf(in.Start, "unknown instruction 0xfc %d", sub)
}

// StackEffect returns how many operands in pops and how many results it
// pushes, for every instruction whose effect does not depend on a type:
// everything except block, loop, if, else, end, br, br_table, return,
// unreachable, call and call_indirect (ok is false for those).
func StackEffect(in *Instr) (pops, pushes int, ok bool) {
	op := in.Op
	switch {
	case op == OpNop:
		return 0, 0, true
	case op == OpBrIf, op == OpDrop, op == OpLocalSet, op == OpGlobalSet:
		return 1, 0, true
	case op == OpTableSet,
		op >= 0x36 && op <= 0x3E: // stores
		return 2, 0, true
	case op == OpSelect, op == OpSelectT:
		return 3, 1, true
	case op == OpLocalGet, op == OpGlobalGet, op == OpMemorySize, op == OpRefNull, op == OpRefFunc,
		op >= OpI32Const && op <= OpF64Const:
		return 0, 1, true
	// Unary before binary: i64.eqz (0x50) lies among the comparisons.
	case op == OpLocalTee, op == OpTableGet, op == OpMemoryGrow, op == OpRefIsNull,
		op >= 0x28 && op <= 0x35,                           // loads
		op == 0x45 || op == 0x50,                           // i32.eqz, i64.eqz
		op >= 0x67 && op <= 0x69, op >= 0x79 && op <= 0x7B, // clz, ctz, popcnt
		op >= 0x8B && op <= 0x91, op >= 0x99 && op <= 0x9F, // float unary
		op >= 0xA7 && op <= 0xC4: // conversions, reinterpretations, sign extension
		return 1, 1, true
	case op >= 0x46 && op <= 0x66, // comparisons
		op >= 0x6A && op <= 0x78, op >= 0x7C && op <= 0x8A, // integer binary
		op >= 0x92 && op <= 0x98, op >= 0xA0 && op <= 0xA6: // float binary
		return 2, 1, true
	case op == OpPrefixFC:
		switch in.Sub {
		case 0, 1, 2, 3, 4, 5, 6, 7:
			return 1, 1, true
		case SubMemoryInit, SubMemoryCopy, SubMemoryFill, SubTableInit, SubTableCopy, SubTableFill:
			return 3, 0, true
		case SubDataDrop, SubElemDrop:
			return 0, 0, true
		case SubTableGrow:
			return 2, 1, true
		case SubTableSize:
			return 0, 1, true
		}
	}
	return 0, 0, false
}
