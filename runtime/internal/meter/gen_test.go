package meter

import (
	"math/rand"

	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// This file generates random valid modules for the differential tests: a
// few functions of three signatures whose bodies mix every kind of control
// flow (blocks and loops with bounded counters, if/else with results,
// br_if and br_table, early returns, multi-value blocks), calls (direct and
// indirect, only to earlier functions, plus self-recursion bounded by a
// parameter), memory and table operations, globals and a few instructions
// that can trap. Half of the modules also import a host function,
// env.host of typeA, and call it (see newEngines). Every module
// terminates.

var (
	i32 = wasmbin.I32
	i64 = wasmbin.I64

	typeA = wasmbin.FuncType{Params: []wasmbin.ValueType{i32, i32}, Results: []wasmbin.ValueType{i32}} // (i32, i32) -> i32
	typeB = wasmbin.FuncType{Params: []wasmbin.ValueType{i64}, Results: []wasmbin.ValueType{i64, i32}} // (i64) -> (i64, i32)
	typeC = wasmbin.FuncType{}                                                                         // () -> ()
	// Block types with parameters and several results.
	typeI32ToI32I32 = wasmbin.FuncType{Params: []wasmbin.ValueType{i32}, Results: []wasmbin.ValueType{i32, i32}}
)

// genFunc is one generated function.
type genFunc struct {
	typ  wasmbin.FuncType
	body []byte
	// locals beyond the parameters: i32 scratch, i64 scratch, loop
	// counters.
	locals []wasmbin.LocalDecl
}

// gen builds one module.
type gen struct {
	r       *rand.Rand
	r2      *rand.Rand // the host import's choices, apart so that modules without it are as they were
	base    uint32     // the number of imported functions: the index of function 0
	kinds   []wasmbin.FuncType
	self    int    // index of the function being generated
	out     []byte // its body
	depth   int    // nesting of generated control, to bound size
	labels  []byte // the result kind of each open label: 'v' none, 'i' i32
	nI32    uint32 // first i32 scratch local
	nI64    uint32 // first i64 scratch local
	ctr     uint32 // next free loop counter local
	ctrMax  uint32
	typeIdx map[string]uint32
	budget  int // instructions left for this function
	calls   int // calls left for this function
	loops   int // open loops
}

const (
	nScratchI32 = 3
	nScratchI64 = 2
	nCounters   = 6
	memMask     = 0xFF8 // addresses stay in the first page, 8-aligned
)

// genModule returns a random valid module that exports its functions as
// "f0", "f1", ..., its memory as "memory" and a mutable global as "g".
func genModule(seed int64) []byte {
	g := &gen{r: rand.New(rand.NewSource(seed)), r2: rand.New(rand.NewSource(seed ^ 0x5eed)), typeIdx: map[string]uint32{}}
	var b wasmbin.Builder
	for _, t := range []wasmbin.FuncType{typeA, typeB, typeC, typeI32ToI32I32} {
		g.typeIdx[t.String()] = b.Type(t)
	}
	if g.r2.Intn(2) == 0 {
		b.ImportFunc(hostModule, hostFunc, typeA)
		g.base = 1
	}
	n := 2 + g.r.Intn(5)
	for i := 0; i < n; i++ {
		kinds := []wasmbin.FuncType{typeA, typeA, typeB, typeC}
		g.kinds = append(g.kinds, kinds[g.r.Intn(len(kinds))])
	}
	mem := b.Memory(wasmbin.MemoryType{Min: 1, Max: 2, HasMax: true})
	b.Table(wasmbin.TableType{Elem: wasmbin.FuncRef, Min: uint32(n) + 4})
	glob := b.Global(wasmbin.GlobalType{Type: i32, Mutable: true}, wasmbin.I32Const(17))
	for i := 0; i < n; i++ {
		g.self = i
		f := g.function(g.kinds[i])
		b.Func(f.typ, f.locals, f.body)
	}
	for i := 0; i < n; i++ {
		b.Export(exportName(i), wasmbin.KindFunc, g.base+uint32(i))
	}
	b.Export("memory", wasmbin.KindMemory, mem)
	b.Export("g", wasmbin.KindGlobal, glob)
	elems := make([]uint32, n)
	for i := range elems {
		elems[i] = g.base + uint32(i)
	}
	b.Elem(0, elems...)
	data := make([]byte, 64)
	g.r.Read(data)
	b.Data(256, data)
	b.PassiveData([]byte("passive segment for memory.init"))
	b.DataCount()
	if g.r.Intn(3) == 0 {
		// A start function: the instrumentation exports it instead.
		start := b.Func(typeC, nil, []byte{0x41, 0x05, 0x24, byte(glob)}) // global.set g 5
		b.Start(start)
	}
	return b.Bytes()
}

func exportName(i int) string { return "f" + string(rune('0'+i)) }

func (g *gen) function(t wasmbin.FuncType) genFunc {
	np := uint32(len(t.Params))
	g.nI32 = np
	g.nI64 = np + nScratchI32
	g.ctr = np + nScratchI32 + nScratchI64
	g.ctrMax = g.ctr + nCounters
	g.out = nil
	g.depth = 0
	g.budget = 60 + g.r.Intn(200)
	g.calls = 3 // with depth 4 recursion and 6 functions: bounded work
	g.labels = []byte{g.resultKind(t)}
	if g.self >= 0 && len(t.Params) == 2 {
		// Parameter 0 bounds the self-recursion: clamp it to 0..3.
		g.emit(0x20, 0x00, 0x41, 0x03, 0x71, 0x21, 0x00) // local.get 0; i32.const 3; i32.and; local.set 0
	}
	for k := 0; k < 2+g.r.Intn(4); k++ {
		g.stmt()
	}
	switch t.String() {
	case typeA.String():
		g.i32()
	case typeB.String():
		g.i64()
		g.i32()
	}
	return genFunc{typ: t, body: g.out, locals: []wasmbin.LocalDecl{
		{Count: nScratchI32, Type: i32}, {Count: nScratchI64, Type: i64}, {Count: nCounters, Type: i32},
	}}
}

func (g *gen) resultKind(t wasmbin.FuncType) byte {
	switch t.String() {
	case typeA.String():
		return 'i'
	case typeB.String():
		return 'b'
	}
	return 'v'
}

func (g *gen) emit(b ...byte) { g.out = append(g.out, b...) }

func (g *gen) uleb(v uint64) { g.out = wasmbin.AppendULEB128(g.out, v) }

func (g *gen) i32const(v int32) { g.out = append(g.out, wasmbin.I32Const(v)...) }

func (g *gen) small() bool {
	g.budget--
	return g.depth > 4 || g.budget <= 0
}

// i32 emits code that leaves one i32.
func (g *gen) i32() {
	if g.small() {
		switch g.r.Intn(3) {
		case 0:
			g.i32const(int32(g.r.Intn(200) - 50))
		case 1:
			g.emit(0x20)
			g.uleb(g.scratchI32())
		default:
			g.emit(0x23, 0x00) // global.get g
		}
		return
	}
	defer g.nest()()
	switch g.r.Intn(20) {
	case 0:
		g.i32const(int32(g.r.Uint32()))
	case 1:
		if len(g.kinds[g.self].Params) == 2 {
			g.emit(0x20, byte(g.r.Intn(2))) // a parameter
		} else {
			g.emit(0x3F, 0x00) // memory.size
		}
	case 2, 3:
		g.i32()
		g.i32()
		ops := []byte{0x6A, 0x6B, 0x6C, 0x71, 0x72, 0x73, 0x74, 0x76, 0x77, 0x46, 0x48, 0x4B, 0x4F}
		g.emit(ops[g.r.Intn(len(ops))])
	case 4:
		// Division, which may trap (rarely: the divisor is made odd
		// unless the dice say otherwise).
		g.i32()
		g.i32()
		if g.r.Intn(6) != 0 {
			g.i32const(1)
			g.emit(0x72) // i32.or
		}
		g.emit([]byte{0x6D, 0x6E, 0x6F, 0x70}[g.r.Intn(4)])
	case 5:
		g.addr()
		g.emit([]byte{0x28, 0x2C, 0x2D, 0x2E, 0x2F}[g.r.Intn(5)], 0x00)
		g.uleb(uint64(g.r.Intn(8)))
	case 6:
		// if/else with a result.
		g.i32()
		g.emit(0x04, 0x7F)
		g.block('i', func() {
			g.stmt()
			g.i32()
			g.emit(0x05)
			g.stmt()
			g.i32()
		})
	case 7:
		// A block whose value may leave early with br_if.
		g.emit(0x02, 0x7F)
		g.block('i', func() {
			g.i32()
			g.i32()
			g.emit(0x0D, 0x00, 0x1A) // br_if 0 (the value); drop the value left on fallthrough
			g.stmt()
			g.i32()
		})
	case 8:
		g.i32()
		g.i32()
		g.i32()
		g.emit(0x1B) // select
	case 9:
		g.call('i')
	case 10:
		// A multi-value block with a parameter: (i32) -> (i32, i32).
		g.i32()
		g.emit(0x02)
		g.uleb(uint64(g.typeIdx[typeI32ToI32I32.String()]))
		g.block('p', func() {
			g.emit(0x22)
			g.uleb(uint64(g.nI32)) // local.tee scratch0
			g.i32()
		})
		g.emit(0x6A) // i32.add
	case 11:
		g.i64()
		g.emit(0xA7) // i32.wrap_i64
	case 12:
		g.i32()
		g.emit([]byte{0x45, 0x67, 0x68, 0x69, 0xC0, 0xC1}[g.r.Intn(6)])
	case 13:
		g.i32()
		g.emit(0x40, 0x00) // memory.grow (of a small or absurd count)
	case 14:
		g.stmt()
		g.i32()
	default:
		g.emit(0x20)
		g.uleb(g.scratchI32())
	}
}

// i64 emits code that leaves one i64.
func (g *gen) i64() {
	if g.small() {
		if g.r.Intn(2) == 0 {
			g.out = append(g.out, wasmbin.I64Const(g.r.Int63()-1<<62)...)
		} else {
			g.emit(0x20)
			g.uleb(g.scratchI64())
		}
		return
	}
	defer g.nest()()
	switch g.r.Intn(6) {
	case 0:
		g.i64()
		g.i64()
		g.emit([]byte{0x7C, 0x7D, 0x7E, 0x83, 0x84, 0x85, 0x89}[g.r.Intn(7)])
	case 1:
		g.i32()
		g.emit([]byte{0xAC, 0xAD}[g.r.Intn(2)])
	case 2:
		g.addr()
		g.emit(0x29, 0x03)
		g.uleb(uint64(8 * g.r.Intn(4)))
	case 3:
		if len(g.kinds[g.self].Params) == 1 {
			g.emit(0x20, 0x00)
		} else {
			g.call('b')
			g.emit(0x1A) // drop the i32 of (i64, i32)
		}
	default:
		g.emit(0x20)
		g.uleb(g.scratchI64())
	}
}

// addr emits an in-bounds, 8-aligned address.
func (g *gen) addr() {
	g.i32()
	g.i32const(memMask)
	g.emit(0x71)
}

// block runs body inside a label of the given kind and closes it.
func (g *gen) block(kind byte, body func()) {
	g.labels = append(g.labels, kind)
	body()
	g.labels = g.labels[:len(g.labels)-1]
	g.emit(0x0B)
}

// scratchI32 picks one of the i32 scratch locals.
func (g *gen) scratchI32() uint64 { return uint64(g.nI32 + uint32(g.r.Intn(nScratchI32))) }

// scratchI64 picks one of the i64 scratch locals.
func (g *gen) scratchI64() uint64 { return uint64(g.nI64 + uint32(g.r.Intn(nScratchI64))) }

// nest enters one more level of nesting; the func it returns leaves it.
func (g *gen) nest() func() {
	g.depth++
	return func() { g.depth-- }
}

// instead emits constants where a call of the given kind cannot be made:
// i32 a for 'i'; i64 b and i32 c for 'b'; nothing for 'v'.
func (g *gen) instead(kind byte, a int32, b int64, c int32) {
	switch kind {
	case 'i':
		g.i32const(a)
	case 'b':
		g.out = append(g.out, wasmbin.I64Const(b)...)
		g.i32const(c)
	}
}

// call emits a call leaving a value of the given kind ('i' i32, 'b' i64
// and i32, 'v' nothing), to an earlier function, to itself (bounded by
// parameter 0) or through the table.
func (g *gen) call(kind byte) {
	var want wasmbin.FuncType
	switch kind {
	case 'i':
		want = typeA
	case 'b':
		want = typeB
	default:
		want = typeC
	}
	args := func() {
		switch kind {
		case 'i':
			g.i32()
			g.i32()
		case 'b':
			g.i64()
		}
	}
	if kind == 'i' && g.base > 0 && g.r2.Intn(3) == 0 {
		args()
		g.emit(0x10, 0x00) // call env.host
		return
	}
	if g.calls <= 0 {
		g.instead(kind, 5, 6, 7)
		return
	}
	g.calls--
	var cands []int
	for i := 0; i < g.self; i++ {
		if g.kinds[i].Equal(want) {
			cands = append(cands, i)
		}
	}
	if kind == 'i' && g.kinds[g.self].Equal(typeA) && g.loops == 0 && g.r.Intn(3) == 0 {
		// Self-recursion, bounded: if p0 > 0 then f(p0-1, x) else x.
		g.emit(0x20, 0x00, 0x04, 0x7F) // local.get 0; if (result i32)
		g.block('i', func() {
			g.emit(0x20, 0x00, 0x41, 0x01, 0x6B) // p0 - 1
			g.i32()
			g.emit(0x10)
			g.uleb(uint64(g.base + uint32(g.self)))
			g.emit(0x05)
			g.i32()
		})
		return
	}
	if len(cands) == 0 {
		g.instead(kind, 3, 9, 4)
		return
	}
	callee := cands[g.r.Intn(len(cands))]
	args()
	if g.r.Intn(2) == 0 {
		g.emit(0x10)
		g.uleb(uint64(g.base + uint32(callee)))
		return
	}
	g.i32const(int32(callee))
	g.emit(0x11)
	g.uleb(uint64(g.typeIdx[want.String()]))
	g.emit(0x00)
}

// stmt emits code that leaves nothing.
func (g *gen) stmt() {
	if g.small() {
		g.i32()
		g.emit(0x21)
		g.uleb(g.scratchI32())
		return
	}
	defer g.nest()()
	switch g.r.Intn(17) {
	case 0, 1:
		g.i32()
		g.emit(0x21)
		g.uleb(g.scratchI32())
	case 2:
		g.i64()
		g.emit(0x21)
		g.uleb(g.scratchI64())
	case 3:
		g.addr()
		g.i32()
		g.emit([]byte{0x36, 0x3A, 0x3B}[g.r.Intn(3)], 0x00)
		g.uleb(uint64(g.r.Intn(8)))
	case 4:
		g.addr()
		g.i64()
		g.emit(0x37, 0x03, 0x00)
	case 5:
		g.i32()
		g.emit(0x24, 0x00) // global.set g
	case 6:
		g.loop()
	case 7:
		// if without else.
		g.i32()
		g.emit(0x04, 0x40)
		g.block('v', func() { g.stmt(); g.stmt() })
	case 8:
		// A block left early with br_if, or with br from an if.
		g.emit(0x02, 0x40)
		g.block('v', func() {
			g.stmt()
			g.i32()
			if g.r.Intn(2) == 0 {
				g.emit(0x0D, 0x00) // br_if 0
			} else {
				g.emit(0x04, 0x40)
				g.block('v', func() {
					g.stmt()
					g.emit(0x0C, 0x01) // br 1
					if g.r.Intn(2) == 0 {
						g.stmt() // dead code
					}
				})
			}
			g.stmt()
		})
	case 9:
		g.brTable()
	case 10:
		g.call('v')
	case 11:
		g.ret()
	case 12:
		// Bulk memory: fill, copy or init of up to 255 bytes.
		switch g.r.Intn(3) {
		case 0:
			g.addr()
			g.i32()
			g.i32()
			g.i32const(0xFF)
			g.emit(0x71, 0xFC, 0x0B, 0x00)
		case 1:
			g.addr()
			g.addr()
			g.i32()
			g.i32const(0xFF)
			g.emit(0x71, 0xFC, 0x0A, 0x00, 0x00)
		default:
			g.addr()
			g.i32const(int32(g.r.Intn(8)))
			g.i32const(int32(g.r.Intn(24)))
			g.emit(0xFC, 0x08, 0x01, 0x00) // memory.init 1 (the passive segment)
		}
	case 13:
		// Table operations: copy, fill with null, grow, size.
		switch g.r.Intn(3) {
		case 0:
			// Among the null slots past the functions, so that no call
			// through the table can reach a later function.
			n := len(g.kinds)
			g.i32const(int32(n + g.r.Intn(3)))
			g.i32const(int32(n + g.r.Intn(3)))
			g.i32const(int32(g.r.Intn(2)))
			g.emit(0xFC, 0x0E, 0x00, 0x00)
		case 1:
			g.emit(0xD0, 0x70) // ref.null func
			g.i32const(int32(g.r.Intn(12)))
			g.emit(0xFC, 0x0F, 0x00, 0x1A) // table.grow; drop
		default:
			g.emit(0xFC, 0x10, 0x00, 0x21) // table.size; local.set
			g.uleb(uint64(g.nI32))
		}
	case 14:
		// A trap, rarely taken.
		g.i32()
		g.i32const(97)
		g.emit(0x46, 0x04, 0x40, 0x00, 0x0B) // i32.eq; if; unreachable; end
	case 15:
		g.emit(0x01) // nop
		g.stmt()
	default:
		g.stmt()
		g.stmt()
	}
}

// loop emits a loop bounded by a counter local: it runs at most 1..5 times.
func (g *gen) loop() {
	if g.ctr >= g.ctrMax {
		g.stmt()
		return
	}
	c := g.ctr
	g.ctr++
	defer func() { g.ctr-- }()
	n := int32(1 + g.r.Intn(5))
	g.loops++
	defer func() { g.loops-- }()
	g.i32const(0)
	g.emit(0x21)
	g.uleb(uint64(c))  // counter = 0
	g.emit(0x02, 0x40) // block $done
	g.block('v', func() {
		g.emit(0x03, 0x40) // loop $again
		g.block('v', func() {
			// if counter >= n, leave
			g.emit(0x20)
			g.uleb(uint64(c))
			g.i32const(n)
			g.emit(0x4E, 0x0D, 0x01) // i32.ge_s; br_if $done
			g.emit(0x20)
			g.uleb(uint64(c))
			g.i32const(1)
			g.emit(0x6A, 0x21)
			g.uleb(uint64(c)) // counter++
			g.stmt()
			if g.r.Intn(3) == 0 {
				g.stmt()
			}
			g.emit(0x0C, 0x00) // br $again
		})
	})
}

// brTable emits three nested blocks left by a br_table.
func (g *gen) brTable() {
	g.emit(0x02, 0x40)
	g.block('v', func() {
		g.emit(0x02, 0x40)
		g.block('v', func() {
			g.emit(0x02, 0x40)
			g.block('v', func() {
				g.i32()
				g.emit(0x0E, 0x03, 0x00, 0x01, 0x02, byte(g.r.Intn(3))) // br_table 0 1 2 default
			})
			g.stmt()
		})
		g.stmt()
		if g.r.Intn(2) == 0 {
			g.i32()
			g.emit(0x0D, 0x00) // br_if 0
			g.stmt()
		}
	})
}

// ret emits an early return, under a condition.
func (g *gen) ret() {
	g.i32()
	g.emit(0x04, 0x40)
	g.block('v', func() {
		switch g.labels[0] {
		case 'i':
			g.i32()
		case 'b':
			g.i64()
			g.i32()
		}
		g.emit(0x0F)
	})
}
