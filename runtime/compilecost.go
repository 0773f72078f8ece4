package runtime

import (
	"errors"
	"fmt"
	"io"

	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// Bounds on what a module may ask of wazero's compiler. Its time grows with
// the square of the blocks, loops and ifs in a function (20,000 loops in one
// 58 KB function take about 10 s to compile), and no size limit catches
// that. Metered, a loop costs far more than a block (its header holds a
// fuel check and a call: 2,999 loops in one function took 7 s, 3 x 2,999
// blocks 0.2 s), so a loop counts for loopWeight. Branches to one label
// grow it the same way (25,000 br_if to one block took 10 s, 100,000 over
// 2 minutes), at about a sixth of a loop's cost: a br or br_if counts for
// half a unit; a bulk memory or table instruction for bulkWeight. The
// example Go hooks have at most 1,320 units in one function and a sum of
// squares of 1.7e7 (2.2e7 for a Go program that links net/http; a Haskell
// program 1,706 and 7.3e6), so the bounds leave them 1.4 to 2 times room.
// At the bounds the worst modules measured (3 functions of 6,000 br_if to
// one label; of 300 loops; of 3,000 blocks) load in 0.1 to 1.2 s on a
// 2-core machine: bounded, once per module, off the request path, where
// without them it took minutes to hours.
//
// br_table targets cost less each but add up the same way: one br_table of
// 100,000 targets naming one label took 1.8 s and 227 MiB, 400,000 30 s and
// 900 MB, and every target costs about 1 µs and 2 KiB of transient heap.
// They have bounds of their own, at which the worst modules load in 0.3 to
// 1 s with at most 76 MiB at their peak: Go emits a br_table in every
// function (at most 1,145 targets in one function of the example hooks,
// 130,000 in a module that links net/http, a sum of squares of 1.5e7); a
// Haskell program has 3,126 in one function, and a WebAssembly spec test
// 24,616.
// See RATIONALE.md#why-bound-control-flow-at-load.
const (
	// MaxControlPerFunction bounds the block and if instructions of one
	// function, plus loopWeight for each loop, bulkWeight for each bulk
	// memory or table instruction (see isBulk), and half a unit for each
	// br and br_if.
	MaxControlPerFunction = 3_000
	// MaxControlSquares bounds the sum over all functions of the square of
	// that count.
	MaxControlSquares = 30_000_000
	// loopWeight is what a loop counts for: metered, a loop header holds a
	// fuel check and a call, and 2,999 loops in one function took 7 s to
	// compile where 3 x 2,999 blocks took 0.2 s.
	loopWeight = 10
	// bulkWeight is what a bulk memory or table instruction counts for
	// (see isBulk): 10,000 memory.fill or table.grow in one function took
	// 23 to 24 s, about a third of what as many loops take.
	bulkWeight = 6
	// MaxBrTableTargetsPerFunction bounds the br_table targets (defaults
	// included) of one function: 75 MiB and 0.3 s of compiling at most.
	MaxBrTableTargetsPerFunction = 32_768
	// MaxBrTableTargetsSquares bounds the sum over all functions of the
	// square of their br_table targets.
	MaxBrTableTargetsSquares = 1_500_000_000
	// MaxBrTableTargets bounds the br_table targets of the whole module.
	MaxBrTableTargets = 250_000
	// MaxControlCarried bounds the sum over functions of the largest
	// control count of any function up to it, and MaxBrTableTargetsCarried
	// the same for br_table targets. wazero's compiler keeps per-function
	// state sized by the largest function it has compiled and pays for it
	// in every function after: one function of 6,000 br_if to one label
	// then 100,000 empty ones took 3.3 to 6.1 s, the other way round 1 s.
	// A Go hook stays under 5.2e6 and 4.5e6 (3,928 functions of at most
	// 1,320 units and 1,145 targets), a Haskell program under 7.8e6 and
	// 1.4e7.
	MaxControlCarried        = 30_000_000
	MaxBrTableTargetsCarried = 150_000_000
	// MaxDeclarationsByFunctions bounds the product of the module's types
	// and globals by its defined functions: wazero's compiler declares
	// every type and global again in every function it compiles, so
	// 10,000 types and 100,000 empty functions took 7.5 s, 10,000 globals
	// and 100,000 functions 5.4 s (about 5 to 8 ns a pair). A Go hook has
	// (15 + 8) x 3,928 = 90,000, and AssemblyScript, which defines a
	// global per module-level variable, stays near a million. At the limit
	// it costs about 0.2 s of CPU.
	MaxDeclarationsByFunctions = 25_000_000
	// MaxCompileHeapPerFunction bounds the transient heap, in bytes, that
	// compiling one function takes by instructionHeap's weights and
	// accessHeap's: 96 MiB, 6,406 call_indirect (a Haskell program has
	// 1,705 in one function, Go 16), 41,943 calls in a module of no mutable
	// globals (Go has at most 654 calls in a function) or 21,845 memory
	// accesses (Go 3,865, a Haskell program 13,885). Without it one
	// function of 100,000 call_indirect took 5.2 s and 1.5 GiB, and 16,384
	// calls in a module of 473 mutable globals 3.8 s and 1.3 GiB.
	MaxCompileHeapPerFunction = 96 << 20
	// MaxCompileHeap bounds the same over the whole module, in bytes: the
	// time of compiling grows with it (about 3 µs a KiB at worst). A Go
	// hook weighs 89 MB, one that links net/http 140 MB.
	MaxCompileHeap = 256 << 20
)

// instructionHeap returns what compiling one instruction costs wazero in
// transient heap, in bytes, where it is much more than the few hundred
// bytes of most: measured on wazero v1.12 (amd64), 10,000 of each in one
// function, rounded up. An instruction that calls out (call,
// call_indirect, memory.grow, the bulk operations) also costs 176 bytes
// for each mutable global of the module, which wazero saves and reloads
// around the call; mutable is their number, the instrumentation's
// included.
func instructionHeap(in *wasmbin.Instr, mutable uint64) uint64 {
	switch in.Op {
	case 0x11: // call_indirect
		return 15_360 + 176*mutable
	case 0x10, 0x40: // call, memory.grow
		return 2_048 + 176*mutable
	case 0x6D, 0x6E, 0x6F, 0x70, 0x7F, 0x80, 0x81, 0x82: // i32/i64 div and rem
		return 5_632
	case 0x25, 0x26: // table.get, table.set
		return 4_096
	case 0xFC:
		if isBulk(in) {
			return 176 * mutable
		}
	}
	return 0
}

// accessHeap returns what compiling one memory access (a load or a store)
// or one trapping float-to-integer conversion costs wazero in transient
// heap, in bytes: each may trap, and a live one gets its own bounds or
// range check (50,000 loads of addresses read from memory in one function:
// 225 MiB). Unlike instructionHeap's, this weight counts only per
// function: wazero elides most of the checks of real code (a Go hook has
// 145,000 accesses and compiles in about a second), so a total by this
// weight would refuse it.
func accessHeap(in *wasmbin.Instr) uint64 {
	switch {
	case in.Op >= 0x28 && in.Op <= 0x3E: // loads and stores
		return 4_608
	case in.Op >= 0xA8 && in.Op <= 0xB1: // i32/i64.trunc_f32/f64_s/u
		return 7_680
	}
	return 0
}

// meterGlobals is the number of mutable globals the instrumentation adds
// (the fuel and the stack budget).
const meterGlobals = 2

// isBulk reports the bulk memory and table instructions (memory.init,
// memory.copy, memory.fill, table.init, table.copy, table.grow,
// table.fill): wazero lowers several into loops, and the instrumentation
// charges their length in fuel with a branch of its own, so each costs the
// compiler a good part of what a loop does (10,000 memory.fill in one
// function took 24 s and 552 MiB, 10,000 table.grow 23 s, 10,000
// memory.copy 5.8 s).
func isBulk(in *wasmbin.Instr) bool {
	if in.Op != 0xFC {
		return false
	}
	switch in.Sub {
	case wasmbin.SubMemoryInit, wasmbin.SubMemoryCopy, wasmbin.SubMemoryFill, wasmbin.SubTableInit,
		wasmbin.SubTableCopy, wasmbin.SubTableGrow, wasmbin.SubTableFill:
		return true
	}
	return false
}

// checkCompileCost refuses a module whose control flow would make compiling
// it take unbounded time. It decodes every instruction, so it also refuses
// bodies that are not valid instructions before the compiler sees them.
func checkCompileCost(m *wasmbin.Module) error {
	decls := uint64(len(m.Types)+len(m.Globals)+m.NumImportedGlobals()) * uint64(len(m.Code))
	if decls > MaxDeclarationsByFunctions {
		return &LimitError{Limit: "declarations_by_functions ((types + globals) x functions)", Max: MaxDeclarationsByFunctions, Got: decls}
	}
	mutable := uint64(meterGlobals)
	for i := range m.Globals {
		if m.Globals[i].Type.Mutable {
			mutable++
		}
	}
	var in wasmbin.Instr
	var squares, targetSquares, targetsTotal uint64
	var maxN, maxTargets, carried, targetsCarried, heapTotal uint64
	for i := range m.Code {
		c := &m.Code[i]
		fn := int(m.NumImportedFuncs()) + i
		d := wasmbin.NewInstrReader(c.Body, c.BodyOffset)
		var halves, targets, heap, access uint64 // control units counted in halves; br_table targets; bytes
		for {
			err := d.Next(&in)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return &ValidationError{Reason: fmt.Sprintf("function %d", fn), Err: err}
			}
			switch in.Op {
			case 0x02, 0x04: // block, if
				halves += 2
			case 0x03: // loop
				halves += 2 * loopWeight
			case 0x0C, 0x0D: // br, br_if
				halves++
			case 0x0E: // br_table
				targets += uint64(len(in.Targets)) + 1
			case 0xFC:
				if isBulk(&in) {
					halves += 2 * bulkWeight
				}
			}
			heap += instructionHeap(&in, mutable)
			access += accessHeap(&in)
		}
		n := (halves + 1) / 2
		if n > MaxControlPerFunction {
			return &LimitError{Limit: fmt.Sprintf("control (function %d)", fn), Max: MaxControlPerFunction, Got: n}
		}
		squares += n * n
		if squares > MaxControlSquares {
			return &LimitError{Limit: "control_squared (sum over functions)", Max: MaxControlSquares, Got: squares}
		}
		if targets > MaxBrTableTargetsPerFunction {
			return &LimitError{Limit: fmt.Sprintf("br_table_targets (function %d)", fn), Max: MaxBrTableTargetsPerFunction, Got: targets}
		}
		targetSquares += targets * targets
		if targetSquares > MaxBrTableTargetsSquares {
			return &LimitError{Limit: "br_table_targets_squared (sum over functions)", Max: MaxBrTableTargetsSquares, Got: targetSquares}
		}
		targetsTotal += targets
		if targetsTotal > MaxBrTableTargets {
			return &LimitError{Limit: "br_table_targets (sum over functions)", Max: MaxBrTableTargets, Got: targetsTotal}
		}
		if heap+access > MaxCompileHeapPerFunction {
			return &LimitError{Limit: fmt.Sprintf("compile_heap_bytes (function %d)", fn), Max: MaxCompileHeapPerFunction, Got: heap + access}
		}
		heapTotal += heap
		if heapTotal > MaxCompileHeap {
			return &LimitError{Limit: "compile_heap_bytes (sum over functions)", Max: MaxCompileHeap, Got: heapTotal}
		}
		maxN, maxTargets = max(maxN, n), max(maxTargets, targets)
		carried += maxN
		if carried > MaxControlCarried {
			return &LimitError{Limit: "control_carried (sum over functions of the largest so far)", Max: MaxControlCarried, Got: carried}
		}
		targetsCarried += maxTargets
		if targetsCarried > MaxBrTableTargetsCarried {
			return &LimitError{Limit: "br_table_targets_carried (sum over functions of the largest so far)", Max: MaxBrTableTargetsCarried, Got: targetsCarried}
		}
	}
	return nil
}

// forCompiler returns what wazero is given to compile: bin without its
// custom sections, and an estimate of the host memory the compiled module
// will hold. Custom sections are debug information (names, DWARF,
// producers) or ours (the manifest, already read): wazero keeps the name
// section's maps for the module's life, about 11 times its size in heap,
// and reports the names only in stack traces, which classify cuts off. See
// RATIONALE.md#why-strip-custom-sections-before-compiling.
func forCompiler(bin []byte) ([]byte, int64, error) {
	stripped, err := wasmbin.StripCustomSections(bin)
	if err != nil {
		return nil, 0, &ValidationError{Reason: "not a valid WebAssembly module", Err: err}
	}
	// bin was validated (or instrumented from a validated module, which
	// adds globals, functions, locals and bytes): it is read again only to
	// count what it declares, under no limit but the format's.
	const none = 1 << 40
	m, err := wasmbin.Parse(stripped, wasmbin.Limits{MaxModuleBytes: none, MaxCodeBytes: none, MaxFunctionBodyBytes: none,
		MaxFunctions: none, MaxLocals: none, MaxLocalsTotal: none, MaxParams: none, MaxResults: none, MaxTypes: none,
		MaxTypeValues: none, MaxImports: none, MaxExports: none, MaxGlobals: none, MaxTables: none, MaxTableElements: none,
		MaxMemoryPages: none, MaxDataSegments: none, MaxDataBytes: none, MaxElementSegments: none, MaxElementItems: none,
		MaxCustomSections: none, MaxNameBytes: none})
	if err != nil {
		return nil, 0, &ValidationError{Reason: "not a valid WebAssembly module", Err: err}
	}
	return stripped, compiledHostBytes(m, len(stripped)), nil
}

// compiledHostBytes estimates the host memory (Go heap and compiled code)
// that wazero holds for a compiled module of m, size bytes. The weights are
// measured on wazero v1.12 (amd64), rounded up: the module's bytes (kept),
// 4 times its code (the machine code and its metadata), 512 bytes a
// function, 16 a local, 48 an element item, 64 a data segment, 16 a type
// value, 64 a global, import or export.
func compiledHostBytes(m *wasmbin.Module, size int) int64 {
	est := int64(size)
	for i := range m.Code {
		est += 4*int64(m.Code[i].Size) + 512 + 16*int64(m.Code[i].NumLocals)
	}
	for i := range m.Types {
		est += 16 * int64(len(m.Types[i].Params)+len(m.Types[i].Results))
	}
	for i := range m.Elements {
		est += 48 * int64(m.Elements[i].Count)
	}
	est += 64 * int64(len(m.Data)+len(m.Globals)+len(m.Imports)+len(m.Exports))
	return est
}
