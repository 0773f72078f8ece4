// Package meter rewrites a WebAssembly module so that its execution is
// metered deterministically: it injects a fuel counter and a stack-height
// limiter. The runtime instruments every hook at load, after validating the
// original, and compiles the result. See RATIONALE.md#why-fuel-and-how-much.
//
// # Fuel
//
// The instrumented module has a mutable i64 global, the fuel. The body
// of every function is cut into segments of straight-line code at its entry
// and at every point where control can arrive from elsewhere: a loop header,
// the start of each arm of an if, the code after the end of an if or of a
// block that a branch targets, and the code after a br_if. Each segment adds
// its pre-summed cost to an i64 local, the accumulator, which is flushed
// into the global (fuel -= acc) at the function's only exit and before a
// call to a function that can check, so that the fuel used is exactly the
// cost of the instructions executed: one unit per instruction, nothing for
// the structure markers (block, loop, else, end, nop), and no charge for
// code that cannot run (after br, br_table, return or unreachable).
//
// The fuel left is fuel - acc (plus what the host holds back, below). It
// is checked at every loop header and at the entry of every function that
// makes calls (unless its first segment runs into a loop header before any
// call), which are the only ways code can run again without a check:
// between two checks only straight-line code of one function and calls of
// loop-free leaf functions run, a bounded amount. While the fuel left is
// not below zero a check costs a comparison. Otherwise it flushes (fuel -=
// acc; acc = 0, so that the global is exact), calls the imported function
// yield (see Names below), and traps with unreachable if the global is
// still below zero when yield returns. The fuel can end an invocation
// slightly below zero without a trap; the host treats fuel left < 0 after
// an invocation, trapped or not, as fuel exhausted. Calls of imported
// functions are preceded by a flush and a check, so that a host function
// sees the global exact and not below zero (a call through the table has
// no check: the host refuses host calls once the fuel left is negative).
//
// A yield that does nothing leaves the whole budget in the global: the
// guest traps at the first check that finds it below zero. The host may
// instead hand the budget over in slices: it puts a slice in the global and
// keeps the rest in reserve; at yield it pools the global (which the flush
// took below zero) and the reserve, and puts the next slice, or the whole
// pool when that is below zero, in the global. Guest code then calls the
// host at the first check after each slice is used up, a bounded amount of
// work later, which gives the host a place to check a deadline and Go's
// scheduler a safe point in code that is otherwise not preemptible. The
// fuel left is then the global plus the reserve (minus acc), and it is the
// same at every point as with the whole budget in the global: the
// accounting is exact whatever yield does, and a check traps exactly when
// the fuel left is below zero.
//
// The bulk operations are charged by their length before they run, then
// checked: memory.copy, memory.fill and memory.init one unit per 64 bytes,
// table.copy, table.fill, table.init and table.grow one unit per 8 elements.
// A table.grow that would take its table past MaxTableElements fails
// (returns -1) instead of running.
//
// # Stack
//
// A mutable i32 global holds the stack budget left, in bytes. Every
// function that makes calls subtracts its frame cost at entry (trapping
// when the budget goes below zero) and adds it back on every exit: every
// body is wrapped in a block whose end is the only exit (return becomes a
// branch to it). The frame cost models what an engine keeps per frame:
// FrameOverhead + SlotBytes × (parameters + locals + the function's maximum
// operand-stack height). Functions that make no calls are not charged: they
// cannot deepen the stack past their own frame.
//
// # Names and recognisable traps
//
// The globals are exported as FuelExport and StackExport so that the host can
// set the budgets before an invocation and read them after; the guest cannot
// name its own exports, and the runtime refuses modules that use names with
// ReservedPrefix. A start function is not run at instantiation: it is
// exported as StartExport for the host to call under a fuel budget. A trap
// with fuel < 0 is fuel exhaustion, one with stack < 0 a stack overflow.
// After a trap of another kind the fuel global holds what was flushed last.
//
// The instrumented module imports YieldModule.YieldImport, of type
// () -> (), after its own imported functions (a module that imports a
// name with ReservedPrefix is refused), so every function the module
// defines has an index one more than in the original. Everything that
// names one is rewritten to match: call and ref.func in the bodies, the
// exports, the start function, global initialisers, element segments, and
// the function and local names of the "name" section (its label names,
// which the rewrite invalidates, and subsections of unknown kinds are
// dropped, and so is a name section that cannot be decoded). No index of
// the original names the import: the guest cannot call yield. The call of
// yield is not charged to the stack budget; a host function does not call
// back into guest code.
package meter

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// Reserved names of the instrumented module's exports.
const (
	// ReservedPrefix starts every name the instrumentation adds; a module
	// that exports such a name is refused.
	ReservedPrefix = "__wasmhooks"
	// FuelExport is the mutable i64 global holding the fuel left.
	FuelExport = "__wasmhooks_fuel"
	// StackExport is the mutable i32 global holding the stack budget left,
	// in bytes.
	StackExport = "__wasmhooks_stack"
	// StartExport is the module's start function, if it had one.
	StartExport = "__wasmhooks_start"
	// YieldModule and YieldImport name the host function () -> () the
	// instrumented module imports and calls whenever a fuel check finds the
	// fuel left below zero, after flushing, so that the global is exact.
	// The host may refill the global from a reserve it keeps (fuel slices:
	// see the package documentation); if the global is still below zero
	// when the call returns, the guest traps with unreachable.
	YieldModule = "__wasmhooks"
	YieldImport = "yield"
)

// Version identifies the instrumentation's output: the same Version and the
// same input give the same output bytes. It changes whenever the rewrite
// does, so that caches of instrumented modules keyed on it stay correct.
const Version = "meter/3"

// The cost model. See the package documentation.
const (
	// MemoryBytesPerUnit: bulk memory operations cost one unit per this
	// many bytes, on top of their one unit as an instruction.
	MemoryBytesPerUnit = 64
	// TableElemsPerUnit: bulk table operations cost one unit per this many
	// elements.
	TableElemsPerUnit = 8
	// FrameOverhead is the fixed part of a frame's cost, in bytes.
	FrameOverhead = 32
	// SlotBytes is the cost of each parameter, local and operand-stack
	// slot of a frame, in bytes.
	SlotBytes = 8
	// MaxFrameCost caps the cost of one frame; a function whose frame
	// would cost more is refused.
	MaxFrameCost = 1 << 30
	// MaxTableElements caps the size a table.grow may take a table to: a
	// grow past it fails (returns -1), as the specification allows. wazero
	// keeps a table's references on the host's heap (8 bytes each), outside
	// every memory limit, and one table.grow of 100 million elements would
	// otherwise allocate 762 MiB. The cap equals wasmbin's default limit on
	// the declared sizes of all tables.
	MaxTableElements = wasmbin.DefaultMaxTableElements
)

const (
	memoryShift = 6 // log2(MemoryBytesPerUnit)
	tableShift  = 3 // log2(TableElemsPerUnit)
)

// Stats describes an instrumentation.
type Stats struct {
	// Functions counts the function bodies rewritten.
	Functions int
	// Segments counts the metered segments (charge points).
	Segments int
	// Checks counts the fuel checks inserted (loop headers, function
	// entries, bulk operations, calls of imports).
	Checks int
	// StackFunctions counts the functions charged a frame cost.
	StackFunctions int
	// MaxFrameCost is the largest frame cost, in bytes.
	MaxFrameCost int64
	// InBytes and OutBytes are the sizes of the module before and after.
	InBytes, OutBytes int
}

// Instrument returns wasm rewritten as described in the package
// documentation. m must be the result of wasmbin.Parse on wasm. The error
// is a *wasmbin.FormatError or *wasmbin.FeatureError for code that cannot
// be decoded (an unknown opcode, an unsupported proposal), or an *Error.
// It never panics.
func Instrument(wasm []byte, m *wasmbin.Module) (out []byte, st Stats, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &Error{Reason: fmt.Sprintf("internal error: %v", p)}
		}
	}()
	return instrument(wasm, m)
}

// Error reports a module the instrumentation refuses.
type Error struct {
	Reason string
}

func (e *Error) Error() string { return "meter: " + e.Reason }

func instrument(wasm []byte, m *wasmbin.Module) ([]byte, Stats, error) {
	st := Stats{InBytes: len(wasm)}
	for _, e := range m.Exports {
		if strings.HasPrefix(e.Name, ReservedPrefix) {
			return nil, st, &Error{Reason: fmt.Sprintf("export %q uses the reserved prefix %q", e.Name, ReservedPrefix)}
		}
	}
	for _, imp := range m.Imports {
		if strings.HasPrefix(imp.Module, ReservedPrefix) || strings.HasPrefix(imp.Name, ReservedPrefix) {
			return nil, st, &Error{Reason: fmt.Sprintf("import %q.%q uses the reserved prefix %q", imp.Module, imp.Name, ReservedPrefix)}
		}
	}
	nImported := m.NumImportedFuncs()
	mc := &modCtx{m: m, fuel: uint32(m.NumGlobals()), stack: uint32(m.NumGlobals()) + 1, yield: uint32(nImported)}
	mc.yieldType = mc.typeIndex(nil, nil)
	for i := range m.Imports {
		if m.Imports[i].Kind == wasmbin.KindFunc {
			mc.funcTypes = append(mc.funcTypes, m.Imports[i].Func)
		}
	}
	for _, t := range m.Functions {
		mc.funcTypes = append(mc.funcTypes, m.Types[t])
	}

	// First pass: every body analysed, so that a call site knows whether
	// its callee can check the fuel.
	mc.analyses = make([]*analysis, len(m.Code))
	for i := range m.Code {
		f := &funcCtx{mod: mc, typ: mc.funcTypes[nImported+i], code: &m.Code[i]}
		a, err := f.analyze()
		if err != nil {
			return nil, st, withFunc(err, nImported+i)
		}
		mc.analyses[i] = a
	}
	// Second pass: the code section, every body rewritten.
	code := make([]byte, 0, len(wasm)+len(wasm)/4)
	code = wasmbin.AppendULEB128(code, uint64(len(m.Code)))
	var body []byte
	for i := range m.Code {
		f := &funcCtx{mod: mc, typ: mc.funcTypes[nImported+i], code: &m.Code[i]}
		var err error
		body, err = f.rewrite(body[:0], mc.analyses[i], &st)
		if err != nil {
			return nil, st, withFunc(err, nImported+i)
		}
		code = wasmbin.AppendULEB128(code, uint64(len(body)))
		code = append(code, body...)
	}
	st.Functions = len(m.Code)

	out, err := mc.assemble(wasm, code)
	if err != nil {
		return nil, st, err
	}
	st.OutBytes = len(out)
	return out, st, nil
}

func withFunc(err error, fidx int) error {
	switch e := err.(type) {
	case *wasmbin.FormatError:
		e.Reason = fmt.Sprintf("function %d: %s", fidx, e.Reason)
	case *wasmbin.FeatureError:
		e.Reason = fmt.Sprintf("function %d: %s", fidx, e.Reason)
	case *Error:
		e.Reason = fmt.Sprintf("function %d: %s", fidx, e.Reason)
	}
	return err
}

// modCtx is what the rewriting of bodies needs from the module. Function
// indices are the original module's (see funcIndex) except yield.
type modCtx struct {
	m           *wasmbin.Module
	funcTypes   []wasmbin.FuncType // imports first
	fuel, stack uint32             // indices of the injected globals
	yield       uint32             // index of the yield import: the number of imported functions
	yieldType   uint32             // its type, () -> ()
	extraTypes  []wasmbin.FuncType // types appended to the type section
	analyses    []*analysis        // first pass of each defined function
}

// mayCheck reports whether the function at fidx (an original index) can
// check the fuel; imported functions are handled by the caller.
func (mc *modCtx) mayCheck(fidx uint32) bool {
	i := int(fidx) - int(mc.yield)
	return i < 0 || i >= len(mc.analyses) || mc.analyses[i].mayCheck()
}

// resultsType returns the index of a type () -> results, appending one to
// the type section if the module has none.
func (mc *modCtx) resultsType(results []wasmbin.ValueType) uint32 {
	return mc.typeIndex(nil, results)
}

// typeIndex returns the index of the type params -> results, appending one
// to the type section if the module has none.
func (mc *modCtx) typeIndex(params, results []wasmbin.ValueType) uint32 {
	want := wasmbin.FuncType{Params: params, Results: results}
	for i, t := range mc.m.Types {
		if t.Equal(want) {
			return uint32(i)
		}
	}
	for i, t := range mc.extraTypes {
		if t.Equal(want) {
			return uint32(len(mc.m.Types) + i)
		}
	}
	mc.extraTypes = append(mc.extraTypes, wasmbin.FuncType{
		Params:  append([]wasmbin.ValueType(nil), params...),
		Results: append([]wasmbin.ValueType(nil), results...),
	})
	return uint32(len(mc.m.Types) + len(mc.extraTypes) - 1)
}

// tableElem returns the element type of table idx (imports first).
func (mc *modCtx) tableElem(idx uint32) (wasmbin.ValueType, bool) {
	n := uint32(0)
	for i := range mc.m.Imports {
		if mc.m.Imports[i].Kind == wasmbin.KindTable {
			if n == idx {
				return mc.m.Imports[i].Table.Elem, true
			}
			n++
		}
	}
	if d := uint64(idx) - uint64(n); d < uint64(len(mc.m.Tables)) {
		return mc.m.Tables[d].Elem, true
	}
	return 0, false
}

// rank orders the non-custom sections as the binary format requires.
var rank = map[wasmbin.SectionID]int{
	wasmbin.SectionType: 1, wasmbin.SectionImport: 2, wasmbin.SectionFunction: 3,
	wasmbin.SectionTable: 4, wasmbin.SectionMemory: 5, wasmbin.SectionTag: 6,
	wasmbin.SectionGlobal: 7, wasmbin.SectionExport: 8, wasmbin.SectionStart: 9,
	wasmbin.SectionElement: 10, wasmbin.SectionDataCount: 11, wasmbin.SectionCode: 12,
	wasmbin.SectionData: 13,
}

// assemble writes the instrumented module: the original sections in order,
// with the yield import and the types, globals and exports appended, every
// function index shifted (funcIndex), the start section removed, the code
// section replaced, the name section rewritten and DWARF sections (whose
// offsets the rewrite invalidates) dropped.
func (mc *modCtx) assemble(wasm []byte, code []byte) ([]byte, error) {
	m := mc.m
	// The new content of each section the rewrite changes (nil: copied).
	var repl [wasmbin.SectionTag + 1][]byte
	var err error
	if len(mc.extraTypes) > 0 {
		if repl[wasmbin.SectionType], err = mc.typeSection(); err != nil {
			return nil, err
		}
	}
	if repl[wasmbin.SectionImport], err = mc.importSection(); err != nil {
		return nil, err
	}
	repl[wasmbin.SectionGlobal] = mc.globalSection()
	repl[wasmbin.SectionExport] = mc.exportSection()
	if len(m.Elements) > 0 {
		if repl[wasmbin.SectionElement], err = mc.elementSection(); err != nil {
			return nil, err
		}
	}
	repl[wasmbin.SectionCode] = code
	repl[wasmbin.SectionData] = mergeData(m)

	out := make([]byte, 0, len(wasm)+len(code)-sectionSize(m, wasmbin.SectionCode)+256)
	out = append(out, wasm[:wasmbin.HeaderSize]...)
	// The sections the rewrite adds when the module has none, in order.
	added := []wasmbin.SectionID{wasmbin.SectionType, wasmbin.SectionImport, wasmbin.SectionGlobal, wasmbin.SectionExport}
	var written [wasmbin.SectionTag + 1]bool
	// flush writes the added sections that must come before a section of
	// rank r and were not written in place of their original.
	flush := func(r int) {
		for _, id := range added {
			if !written[id] && repl[id] != nil && rank[id] < r {
				out = wasmbin.AppendSection(out, id, repl[id])
				written[id] = true
			}
		}
	}
	for _, s := range m.Sections {
		raw := wasm[s.Offset:s.End()]
		switch {
		case s.ID == wasmbin.SectionCustom && strings.HasPrefix(s.Name, ".debug_"):
		case s.ID == wasmbin.SectionCustom && s.Name == "name":
			if names, ok := mc.names(customData(m, s.Offset)); ok {
				out = append(out, byte(wasmbin.SectionCustom))
				out = wasmbin.AppendULEB128(out, uint64(len(appendName(nil, s.Name))+len(names)))
				out = appendName(out, s.Name)
				out = append(out, names...)
			}
		case s.ID == wasmbin.SectionCustom:
			out = append(out, raw...)
		case s.ID == wasmbin.SectionStart:
			// Exported as StartExport instead; the host runs it.
		case int(s.ID) < len(repl) && repl[s.ID] != nil:
			flush(rank[s.ID])
			out = wasmbin.AppendSection(out, s.ID, repl[s.ID])
			written[s.ID] = true
		default:
			flush(rank[s.ID])
			out = append(out, raw...)
		}
	}
	flush(1 << 30)
	return out, nil
}

// customData returns the payload of the custom section at offset.
func customData(m *wasmbin.Module, offset int) []byte {
	for _, c := range m.Customs {
		if c.Offset == offset {
			return c.Data
		}
	}
	return nil
}

func sectionSize(m *wasmbin.Module, id wasmbin.SectionID) int {
	for _, s := range m.Sections {
		if s.ID == id {
			return s.End() - s.Offset
		}
	}
	return 0
}

// splitCount splits a vector section's content into its count and the rest.
func splitCount(b []byte) (uint64, []byte, error) {
	var v uint64
	for i := 0; i < len(b) && i < 5; i++ {
		v |= uint64(b[i]&0x7F) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, b[i+1:], nil
		}
	}
	return 0, nil, &Error{Reason: "malformed section count"}
}

func appendName(b []byte, s string) []byte {
	b = wasmbin.AppendULEB128(b, uint64(len(s)))
	return append(b, s...)
}

func appendTypes(b []byte, ts []wasmbin.ValueType) []byte {
	b = wasmbin.AppendULEB128(b, uint64(len(ts)))
	for _, t := range ts {
		b = append(b, byte(t))
	}
	return b
}

// MaxDataGap is the most zero bytes mergeData writes between two data
// segments to make them one. Go's linker ends a segment at a run of more
// than 8 zeros; most of its gaps are under 32 bytes: merging them takes a
// Go hook from 40,000 segments to 200, for 0.7 MB more data in the module
// (kept once, however many instances) and 0.9 MiB less in every instance.
const MaxDataGap = 32

// mergeData returns a data section in which active data segments that lie
// at most MaxDataGap bytes apart are merged into one, the gap filled with
// zeros (what memory holds there anyway), or nil to keep the section as
// it is. wazero keeps a slice header per segment in every instance: Go's
// linker emits some 37,000 segments, 0.9 MiB per instance, which merging
// brings to a few hundred. It merges only when nothing can tell: no
// datacount section (so no memory.init or data.drop names a segment), and
// every segment active in memory 0 at a constant offset, not empty, none
// overlapping another. The merged segments cover no more than the
// originals' extent, so instantiation fails on exactly the modules whose
// segments did not fit. The zeros it adds are at most MaxDataGap per
// segment of the input (3.2 MB for the reader's 100,000 segments).
func mergeData(m *wasmbin.Module) []byte {
	if m.DataCount != nil || len(m.Data) < 2 {
		return nil
	}
	type seg struct {
		off  uint64
		init []byte
	}
	segs := make([]seg, len(m.Data))
	for i, d := range m.Data {
		if d.Mode != wasmbin.SegmentActive || d.Memory != 0 || d.Offset.Op != wasmbin.OpI32Const || len(d.Init) == 0 {
			return nil
		}
		segs[i] = seg{off: uint64(uint32(d.Offset.Value)), init: d.Init}
	}
	slices.SortStableFunc(segs, func(a, b seg) int { return cmp.Compare(a.off, b.off) })
	runs := 1
	for i := 1; i < len(segs); i++ {
		end := segs[i-1].off + uint64(len(segs[i-1].init))
		if segs[i].off < end {
			return nil // overlapping: the order of application matters
		}
		if segs[i].off-end > MaxDataGap {
			runs++
		}
	}
	if runs == len(segs) {
		return nil
	}
	out := wasmbin.AppendULEB128(nil, uint64(runs))
	for i := 0; i < len(segs); {
		j, end := i+1, segs[i].off+uint64(len(segs[i].init))
		for j < len(segs) && segs[j].off-end <= MaxDataGap {
			end = segs[j].off + uint64(len(segs[j].init))
			j++
		}
		out = append(out, 0x00, wasmbin.OpI32Const) // active, memory 0
		out = wasmbin.AppendSLEB128(out, int64(int32(uint32(segs[i].off))))
		out = append(out, 0x0B) // end
		out = wasmbin.AppendULEB128(out, end-segs[i].off)
		for k := i; k < j; k++ {
			if k > i {
				prev := segs[k-1].off + uint64(len(segs[k-1].init))
				out = append(out, make([]byte, segs[k].off-prev)...)
			}
			out = append(out, segs[k].init...)
		}
		i = j
	}
	return out
}
