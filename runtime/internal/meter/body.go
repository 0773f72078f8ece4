package meter

import (
	"fmt"
	"io"

	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// funcCtx rewrites one function body.
type funcCtx struct {
	mod  *modCtx
	typ  wasmbin.FuncType
	code *wasmbin.Code
}

// frame is one entry of the control stack while walking a body.
type frame struct {
	op          byte // OpBlock, OpLoop, OpIf, or 0 for the function
	base        int  // operand height below the frame's parameters
	params      int
	results     int
	targeted    bool // a branch targets the frame's label
	unreachable bool // the rest of the frame's code cannot run
	dead        bool // none of the frame's code can run: it starts in unreachable code
}

// analysis is what the first pass over a body finds.
type analysis struct {
	segs      []int64 // the cost of each segment, in the order they start
	maxHeight int     // the maximum operand-stack height
	calls     bool    // the body calls a function
	loops     bool    // the body has a loop
	loopFirst bool    // the first leader is a loop header, before any call
	bulk      bool    // the body has a bulk operation charged by length
}

// walker walks a body once. The first pass (out == nil) fills an analysis;
// the second writes the instrumented body using it. Both passes make the
// same decisions at the same instructions, so segment i of the first is
// segment i of the second.
type walker struct {
	f      *funcCtx
	a      *analysis
	out    []byte // nil in the first pass
	emit   bool
	ctrl   []frame
	h      int
	seg    int    // index of the current segment
	frame  int64  // the frame cost (second pass)
	acc    uint32 // the accumulator local
	tmp    uint32 // the scratch local
	checks int    // fuel checks written (second pass)
	in     wasmbin.Instr
}

// analyze is the first pass over the body.
func (f *funcCtx) analyze() (*analysis, error) {
	a := &analysis{segs: make([]int64, 1, 16)}
	w := &walker{f: f, a: a}
	if err := w.walk(); err != nil {
		return nil, err
	}
	return a, nil
}

// mayCheck reports whether the function can check the fuel (and so must
// see the fuel its callers used): it has loops, bulk operations or calls.
func (a *analysis) mayCheck() bool { return a.calls || a.loops || a.bulk }

// rewrite is the second pass: it appends the instrumented body (locals
// and code) to out.
func (f *funcCtx) rewrite(out []byte, a *analysis, st *Stats) ([]byte, error) {
	w := &walker{f: f, a: a}
	nLocals := uint64(len(f.typ.Params)) + f.code.NumLocals
	if a.calls {
		cost := int64(FrameOverhead) + int64(SlotBytes)*(int64(nLocals)+int64(a.maxHeight))
		if cost > MaxFrameCost {
			return nil, &Error{Reason: fmt.Sprintf("frame cost %d bytes is over the limit of %d", cost, MaxFrameCost)}
		}
		w.frame = cost
		st.StackFunctions++
		if cost > st.MaxFrameCost {
			st.MaxFrameCost = cost
		}
	}
	st.Segments += len(a.segs)

	// Locals: the original declarations, then the i64 accumulator of the
	// fuel used since the last flush, and an i32 scratch local for the
	// lengths of bulk operations.
	decls := f.code.LocalDecls()
	n := len(decls) + 1
	w.acc = uint32(nLocals)
	if a.bulk {
		n++
		w.tmp = uint32(nLocals) + 1
	}
	out = wasmbin.AppendULEB128(out, uint64(n))
	for _, d := range decls {
		out = wasmbin.AppendULEB128(out, uint64(d.Count))
		out = append(out, byte(d.Type))
	}
	out = append(out, 1, byte(wasmbin.I64))
	if a.bulk {
		out = append(out, 1, byte(wasmbin.I32))
	}
	w.out, w.emit = out, true
	w.ctrl, w.h, w.seg = w.ctrl[:0], 0, 0
	if err := w.walk(); err != nil {
		return nil, err
	}
	st.Checks += w.checks
	return w.out, nil
}

func (w *walker) errorf(format string, args ...any) error {
	return &wasmbin.FormatError{Offset: w.f.code.BodyOffset + w.in.Start, Section: "code", Reason: fmt.Sprintf(format, args...)}
}

func (w *walker) blockArity(bt wasmbin.BlockType) (params, results int, err error) {
	switch {
	case bt.Empty:
		return 0, 0, nil
	case bt.Value != 0:
		return 0, 1, nil
	}
	types := w.f.mod.m.Types
	if uint64(bt.Index) >= uint64(len(types)) {
		return 0, 0, w.errorf("block type %d out of range (%d types)", bt.Index, len(types))
	}
	t := types[bt.Index]
	return len(t.Params), len(t.Results), nil
}

func (w *walker) push(n int) {
	w.h += n
	if w.h > w.a.maxHeight {
		w.a.maxHeight = w.h
	}
}

// pop removes n operands; in unreachable code (or invalid code, which the
// compiler refuses later) the height never goes below the frame's base.
func (w *walker) pop(n int) {
	w.h -= n
	if base := w.ctrl[len(w.ctrl)-1].base; w.h < base {
		w.h = base
	}
}

func (w *walker) setUnreachable() {
	top := &w.ctrl[len(w.ctrl)-1]
	top.unreachable = true
	w.h = top.base
}

func (w *walker) label(l uint32) (*frame, error) {
	if uint64(l) >= uint64(len(w.ctrl)) {
		return nil, w.errorf("branch to label %d, only %d enclosing blocks", l, len(w.ctrl))
	}
	fr := &w.ctrl[len(w.ctrl)-1-int(l)]
	fr.targeted = true
	return fr, nil
}

// leader starts a new segment. In the second pass it adds the segment's
// cost to the accumulator, and checks the fuel when check is set.
func (w *walker) leader(check bool) {
	if !w.emit {
		w.a.segs = append(w.a.segs, 0)
		w.seg = len(w.a.segs) - 1
		return
	}
	w.seg++
	w.accumulate(w.a.segs[w.seg])
	if check {
		w.check()
	}
}

// accumulate writes acc += cost.
func (w *walker) accumulate(cost int64) {
	if cost == 0 {
		return
	}
	w.local(wasmbin.OpLocalGet, w.acc)
	w.out = append(w.out, wasmbin.OpI64Const)
	w.out = wasmbin.AppendSLEB128(w.out, cost)
	w.out = append(w.out, 0x7C) // i64.add
	w.local(wasmbin.OpLocalSet, w.acc)
}

// flush writes fuel -= acc, and acc = 0 when reset is set.
func (w *walker) flush(reset bool) {
	w.global(wasmbin.OpGlobalGet, w.f.mod.fuel)
	w.local(wasmbin.OpLocalGet, w.acc)
	w.out = append(w.out, 0x7D) // i64.sub
	w.global(wasmbin.OpGlobalSet, w.f.mod.fuel)
	if reset {
		w.out = append(w.out, wasmbin.OpI64Const, 0x00)
		w.local(wasmbin.OpLocalSet, w.acc)
	}
}

// check writes the fuel check. The fuel left is fuel - acc; when it is
// below zero the slow path flushes (leaving the global exact), calls the
// host's yield, which may refill the global, and traps if the global is
// still below zero, which is how the host recognises the trap:
//
//	if fuel < acc {
//		fuel -= acc; acc = 0
//		call yield
//		if fuel < 0 { unreachable }
//	}
//
// Either way fuel - acc stays the fuel left, so the code that follows
// need not know which path ran. The check's blocks have no parameters:
// whatever the code being metered has on the operand stack stays below
// them, out of their reach, as validation requires.
func (w *walker) check() {
	fuel := w.f.mod.fuel
	w.global(wasmbin.OpGlobalGet, fuel)
	w.local(wasmbin.OpLocalGet, w.acc)
	w.out = append(w.out, 0x53, wasmbin.OpIf, 0x40) // i64.lt_s; if
	w.flush(true)
	w.out = append(w.out, wasmbin.OpCall)
	w.out = wasmbin.AppendULEB128(w.out, uint64(w.f.mod.yield))
	w.global(wasmbin.OpGlobalGet, fuel)
	// i64.const 0; i64.lt_s; if; unreachable; end; end
	w.out = append(w.out, wasmbin.OpI64Const, 0x00, 0x53, wasmbin.OpIf, 0x40, wasmbin.OpUnreachable, wasmbin.OpEnd, wasmbin.OpEnd)
	w.checks++
}

// chargeLength writes the charge of a bulk operation whose length (an i32)
// is on top of the stack: acc += length >> shift; then a check.
func (w *walker) chargeLength(shift int64) {
	w.local(wasmbin.OpLocalTee, w.tmp)
	w.local(wasmbin.OpLocalGet, w.acc)
	w.local(wasmbin.OpLocalGet, w.tmp)
	w.out = append(w.out, 0xAD, wasmbin.OpI64Const, byte(shift), 0x88, 0x7C) // i64.extend_i32_u; i64.const; i64.shr_u; i64.add
	w.local(wasmbin.OpLocalSet, w.acc)
	w.check()
}

func (w *walker) local(op byte, idx uint32) {
	w.out = append(w.out, op)
	w.out = wasmbin.AppendULEB128(w.out, uint64(idx))
}

func (w *walker) global(op byte, idx uint32) {
	w.out = append(w.out, op)
	w.out = wasmbin.AppendULEB128(w.out, uint64(idx))
}

// tableGrow writes table.grow (its operands, the initial reference and
// the count, on the stack, the count also in the scratch local) so that a
// grow past MaxTableElements returns -1 without running:
//
//	if (size + n > max) (param ref i32) (result i32) { drop; drop; -1 } else { table.grow }
func (w *walker) tableGrow() error {
	elem, ok := w.f.mod.tableElem(w.in.Index)
	if !ok {
		return w.errorf("table.grow of table %d, out of range", w.in.Index)
	}
	w.local(wasmbin.OpLocalGet, w.tmp)
	w.out = append(w.out, 0xAD, wasmbin.OpPrefixFC, byte(wasmbin.SubTableSize)) // i64.extend_i32_u; table.size
	w.out = wasmbin.AppendULEB128(w.out, uint64(w.in.Index))
	w.out = append(w.out, 0xAD, 0x7C, wasmbin.OpI64Const) // i64.extend_i32_u; i64.add; i64.const
	w.out = wasmbin.AppendSLEB128(w.out, MaxTableElements)
	w.out = append(w.out, 0x56, wasmbin.OpIf) // i64.gt_u; if
	bt := w.f.mod.typeIndex([]wasmbin.ValueType{elem, wasmbin.I32}, []wasmbin.ValueType{wasmbin.I32})
	w.out = wasmbin.AppendSLEB128(w.out, int64(bt))
	w.out = append(w.out, wasmbin.OpDrop, wasmbin.OpDrop, wasmbin.OpI32Const, 0x7F, wasmbin.OpElse) // drop; drop; i32.const -1; else
	w.copyInstr()
	w.out = append(w.out, wasmbin.OpEnd)
	return nil
}

// stackAdjust writes: stack += delta (a negative delta also checks
// stack < 0 and traps).
func (w *walker) stackAdjust(delta int64) {
	stack := uint64(w.f.mod.stack)
	w.out = append(w.out, wasmbin.OpGlobalGet)
	w.out = wasmbin.AppendULEB128(w.out, stack)
	w.out = append(w.out, wasmbin.OpI32Const)
	if delta < 0 {
		w.out = wasmbin.AppendSLEB128(w.out, -delta)
		w.out = append(w.out, 0x6B) // i32.sub
	} else {
		w.out = wasmbin.AppendSLEB128(w.out, delta)
		w.out = append(w.out, 0x6A) // i32.add
	}
	w.out = append(w.out, wasmbin.OpGlobalSet)
	w.out = wasmbin.AppendULEB128(w.out, stack)
	if delta < 0 {
		w.out = append(w.out, wasmbin.OpGlobalGet)
		w.out = wasmbin.AppendULEB128(w.out, stack)
		// i32.const 0; i32.lt_s; if; unreachable; end
		w.out = append(w.out, wasmbin.OpI32Const, 0x00, 0x48, wasmbin.OpIf, 0x40, wasmbin.OpUnreachable, wasmbin.OpEnd)
	}
}

// cost is the fuel of one instruction: structure markers are free,
// everything else costs one unit.
func cost(op byte) int64 {
	switch op {
	case wasmbin.OpNop, wasmbin.OpBlock, wasmbin.OpLoop, wasmbin.OpElse, wasmbin.OpEnd:
		return 0
	}
	return 1
}

func (w *walker) copyInstr() {
	if w.emit {
		w.out = append(w.out, w.f.code.Body[w.in.Start:w.in.End]...)
	}
}

// funcInstr writes the current instruction, call or ref.func, with its
// function index shifted (see funcIndex).
func (w *walker) funcInstr() {
	if w.emit {
		w.out = append(w.out, w.in.Op)
		w.out = wasmbin.AppendULEB128(w.out, uint64(w.f.mod.funcIndex(w.in.Index)))
	}
}

// walk makes one pass over the body.
func (w *walker) walk() error {
	f := w.f
	body := f.code.Body
	d := wasmbin.NewInstrReader(body, f.code.BodyOffset)
	w.ctrl = append(w.ctrl[:0], frame{results: len(f.typ.Results)})
	// Every function is wrapped in a block whose end is its only exit,
	// where the accumulator is flushed and the frame cost given back.
	if w.emit {
		if c := w.a.segs[0]; c > 0 {
			w.out = append(w.out, wasmbin.OpI64Const)
			w.out = wasmbin.AppendSLEB128(w.out, c)
			w.local(wasmbin.OpLocalSet, w.acc)
		}
		if w.a.calls {
			if !w.a.loopFirst {
				w.check()
			}
			w.stackAdjust(-w.frame)
		}
		w.out = append(w.out, wasmbin.OpBlock)
		switch len(f.typ.Results) {
		case 0:
			w.out = append(w.out, 0x40)
		case 1:
			w.out = append(w.out, byte(f.typ.Results[0]))
		default:
			w.out = wasmbin.AppendSLEB128(w.out, int64(f.mod.resultsType(f.typ.Results)))
		}
	}
	in := &w.in
	for {
		err := d.Next(in)
		if err == io.EOF {
			return w.errorf("the body ends before the end of the function")
		}
		if err != nil {
			return err
		}
		top := &w.ctrl[len(w.ctrl)-1]
		if !w.emit && !top.unreachable {
			w.a.segs[w.seg] += cost(in.Op)
		}
		switch op := in.Op; op {
		case wasmbin.OpBlock, wasmbin.OpLoop, wasmbin.OpIf:
			np, nr, err := w.blockArity(in.Block)
			if err != nil {
				return err
			}
			if op == wasmbin.OpIf {
				w.pop(1)
			}
			w.pop(np)
			dead := top.unreachable
			w.ctrl = append(w.ctrl, frame{op: op, base: w.h, params: np, results: nr, dead: dead, unreachable: dead})
			w.push(np)
			w.copyInstr()
			switch op {
			case wasmbin.OpLoop:
				if !w.emit && w.seg == 0 && !w.a.calls && !dead {
					// The first leader is a loop header that every path
					// from the entry reaches (straight-line code, no call
					// before it): its check makes an entry check
					// redundant. (A loop in dead code does not count.)
					w.a.loopFirst = true
				}
				w.a.loops = true
				w.leader(true)
			case wasmbin.OpIf:
				w.leader(false)
			}
		case wasmbin.OpElse:
			if top.op != wasmbin.OpIf {
				return w.errorf("else outside an if")
			}
			top.unreachable = top.dead
			w.h = top.base
			w.push(top.params)
			w.copyInstr()
			w.leader(false)
		case wasmbin.OpEnd:
			if len(w.ctrl) == 1 {
				if d.Pos() != len(body) {
					return w.errorf("instructions after the end of the function")
				}
				if w.emit {
					w.out = append(w.out, wasmbin.OpEnd) // the wrapping block
					w.flush(false)
					if w.a.calls {
						w.stackAdjust(w.frame)
					}
					w.out = append(w.out, wasmbin.OpEnd)
				}
				return nil
			}
			fr := *top
			w.ctrl = w.ctrl[:len(w.ctrl)-1]
			w.h = fr.base
			w.push(fr.results)
			w.copyInstr()
			if fr.op == wasmbin.OpIf || (fr.op == wasmbin.OpBlock && fr.targeted) {
				w.leader(false)
			} else if fr.unreachable {
				// Reached only by falling through, which cannot happen:
				// the code that follows is dead until the next leader.
				w.setUnreachable()
			}
		case wasmbin.OpBr:
			if _, err := w.label(in.Index); err != nil {
				return err
			}
			w.copyInstr()
			w.setUnreachable()
		case wasmbin.OpBrIf:
			if _, err := w.label(in.Index); err != nil {
				return err
			}
			w.pop(1)
			w.copyInstr()
			w.leader(false)
		case wasmbin.OpBrTable:
			for _, l := range in.Targets {
				if _, err := w.label(l); err != nil {
					return err
				}
			}
			if _, err := w.label(in.Index); err != nil {
				return err
			}
			w.copyInstr()
			w.setUnreachable()
		case wasmbin.OpReturn:
			if w.emit {
				// A branch to the wrapping block, whose end is the only exit.
				w.out = append(w.out, wasmbin.OpBr)
				w.out = wasmbin.AppendULEB128(w.out, uint64(len(w.ctrl)-1))
			}
			w.setUnreachable()
		case wasmbin.OpUnreachable:
			w.copyInstr()
			w.setUnreachable()
		case wasmbin.OpCall, wasmbin.OpCallIndirect:
			var t wasmbin.FuncType
			pops := 0
			if op == wasmbin.OpCall {
				if uint64(in.Index) >= uint64(len(f.mod.funcTypes)) {
					return w.errorf("call of function %d, out of range (%d functions)", in.Index, len(f.mod.funcTypes))
				}
				t = f.mod.funcTypes[in.Index]
			} else {
				types := f.mod.m.Types
				if uint64(in.Index) >= uint64(len(types)) {
					return w.errorf("call_indirect of type %d, out of range (%d types)", in.Index, len(types))
				}
				t = types[in.Index]
				pops = 1
			}
			w.a.calls = true
			if w.emit {
				imported := op == wasmbin.OpCall && in.Index < f.mod.yield
				switch {
				case imported:
					// The host sees the fuel exactly, and never runs a
					// host function once it is below zero.
					w.flush(true)
					w.check()
				case op == wasmbin.OpCallIndirect || f.mod.mayCheck(in.Index):
					// The callee's checks see the fuel this frame used. A
					// callee that never checks (a leaf without loops)
					// needs no flush: it flushes its own use on return.
					w.flush(true)
				}
			}
			w.pop(pops + len(t.Params))
			w.push(len(t.Results))
			if op == wasmbin.OpCall {
				w.funcInstr()
			} else {
				w.copyInstr()
			}
		default:
			pops, pushes, ok := wasmbin.StackEffect(in)
			if !ok {
				return w.errorf("opcode 0x%02x has no stack effect", op)
			}
			// The rewrite adds locals and globals after the module's own:
			// an index past them, which the compiler would refuse in the
			// original, would name the meter's own state in the rewritten
			// module (a guest resetting its fuel). Refuse it here.
			switch op {
			case wasmbin.OpLocalGet, wasmbin.OpLocalSet, wasmbin.OpLocalTee:
				if n := uint64(len(f.typ.Params)) + f.code.NumLocals; uint64(in.Index) >= n {
					return w.errorf("local %d out of range (%d locals)", in.Index, n)
				}
			case wasmbin.OpGlobalGet, wasmbin.OpGlobalSet:
				if n := f.mod.m.NumGlobals(); uint64(in.Index) >= uint64(n) {
					return w.errorf("global %d out of range (%d globals)", in.Index, n)
				}
			}
			if op == wasmbin.OpPrefixFC {
				switch in.Sub {
				case wasmbin.SubMemoryCopy, wasmbin.SubMemoryFill, wasmbin.SubMemoryInit:
					w.a.bulk = true
					if w.emit {
						w.chargeLength(memoryShift)
					}
				case wasmbin.SubTableCopy, wasmbin.SubTableFill, wasmbin.SubTableInit:
					w.a.bulk = true
					if w.emit {
						w.chargeLength(tableShift)
					}
				case wasmbin.SubTableGrow:
					w.a.bulk = true
					if w.emit {
						w.chargeLength(tableShift)
						if err := w.tableGrow(); err != nil {
							return err
						}
						w.pop(pops)
						w.push(pushes)
						continue
					}
				}
			}
			w.pop(pops)
			w.push(pushes)
			if op == wasmbin.OpRefFunc {
				w.funcInstr()
			} else {
				w.copyInstr()
			}
		}
	}
}
