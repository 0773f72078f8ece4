package adversarial

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/runtime"
)

// Hostile module shapes for the load budget (issue 10, section 2). Each is a
// valid hook (it exports memory and hook_v1_handle, function 0, which
// returns 0: continue) with one part of it grown to n.

var (
	// continueBody returns the decision continueData puts at 0x100:
	// i64.const 0x100<<32 | 21; end. (The constant is positive and bit 6 of
	// its last 7-bit group is clear: its signed LEB128 is its unsigned one.)
	continueBody = cat([]byte{0x00, 0x42}, uleb(0x100<<32|21), []byte{0x0B})
	continueData = cat([]byte{0x00, 0x41, 0x80, 0x02, 0x0B}, name(`{"action":"continue"}`))
)

// hookParts assembles a hook: extra types after the handle's (type 0),
// the bodies of functions 1.. (all of type 0) after the handle's, and
// sections to place after the code section (data, custom) or before it.
type hookParts struct {
	types   [][]byte // more function types, after (i32) -> i64
	bodies  [][]byte // more functions of type 0, after the handle
	table   []byte   // the table section's one table, if any
	elem    [][]byte // element segments
	data    [][]byte // data segments
	globals [][]byte // global section entries
	customs [][]byte // whole custom sections, appended at the end
	memMin  uint64
}

func (h hookParts) bytes() []byte {
	types := append([][]byte{handleType}, h.types...)
	funcs := make([][]byte, 1+len(h.bodies))
	bodies := make([][]byte, 1+len(h.bodies))
	funcs[0], bodies[0] = []byte{0x00}, cat(uleb(uint64(len(continueBody))), continueBody)
	for i, b := range h.bodies {
		funcs[i+1], bodies[i+1] = []byte{0x00}, cat(uleb(uint64(len(b))), b)
	}
	secs := [][]byte{section(1, vector(types...)), section(3, vector(funcs...))}
	if h.table != nil {
		secs = append(secs, section(4, vector(h.table)))
	}
	secs = append(secs, section(5, vector(cat([]byte{0x00}, uleb(max(h.memMin, 1))))))
	if h.globals != nil {
		secs = append(secs, section(6, vector(h.globals...)))
	}
	secs = append(secs, exportSec)
	if h.elem != nil {
		secs = append(secs, section(9, vector(h.elem...)))
	}
	secs = append(secs, section(10, vector(bodies...)))
	secs = append(secs, section(11, vector(append([][]byte{continueData}, h.data...)...)))
	secs = append(secs, h.customs...)
	return wasmModule(secs...)
}

// brTableBody is a function whose one br_table has n targets, all naming
// the enclosing block: the shape that makes wazero's compiler quadratic.
func brTableBody(n int) []byte {
	return cat([]byte{0x00, 0x02, 0x40, 0x41, 0x00, 0x0E}, uleb(uint64(n)), bytes.Repeat([]byte{0x00}, n),
		[]byte{0x00, 0x0B, 0x42, 0x00, 0x0B})
}

// fnsOf is a hook of fns more functions, each of body b.
func fnsOf(fns int, b []byte) []byte {
	h := hookParts{bodies: make([][]byte, fns)}
	for i := range h.bodies {
		h.bodies[i] = b
	}
	return h.bytes()
}

// shapeBrTable: fns functions of one br_table of n targets.
func shapeBrTable(fns, n int) []byte {
	return fnsOf(fns, brTableBody(n))
}

// shapeControl: fns functions of n repetitions of code (instructions).
func shapeControl(fns, n int, code []byte) []byte {
	return fnsOf(fns, cat([]byte{0x00}, bytes.Repeat(code, n), []byte{0x42, 0x00, 0x0B}))
}

// The units of shapeControl.
var (
	unitBlock = []byte{0x02, 0x40, 0x0B} // block end
	unitLoop  = []byte{0x03, 0x40, 0x0B} // loop end
)

// shapeBrIf: fns functions of n br_if that all name the function's own
// label.
func shapeBrIf(fns, n int) []byte {
	// i64.const 0; i32.const 0; br_if 0 leaves the i64 for the next one.
	return fnsOf(fns, brIfBody(n))
}

// shapeLocals: functions declaring total locals in all (the handle's
// parameter included), each at most per, parameters included.
func shapeLocals(total, per int) []byte {
	var h hookParts
	left := total - 1 // the handle's parameter
	for left > 0 {
		n := min(per, left)
		h.bodies = append(h.bodies, cat([]byte{0x01}, uleb(uint64(n-1)), []byte{0x7F, 0x42, 0x00, 0x0B}))
		left -= n
	}
	return h.bytes()
}

// shapeCarried: one function of body, then k empty ones: wazero's compiler
// pays for the largest function in every one after it.
func shapeCarried(body []byte, k int) []byte {
	h := hookParts{bodies: [][]byte{body}}
	for range k {
		h.bodies = append(h.bodies, handleBody)
	}
	return h.bytes()
}

// brIfBody is a function of n br_if naming the function's own label.
func brIfBody(n int) []byte {
	return cat([]byte{0x00, 0x42, 0x00}, bytes.Repeat([]byte{0x41, 0x00, 0x0D, 0x00}, n), []byte{0x0B})
}

// Instructions that cost the compiler more than most, for opsBody; each
// leaves the stack as it found it.
var (
	insCall         = []byte{0x20, 0x00, 0x10, 0x00, 0x1A}                   // local.get 0; call 0; drop
	insCallIndirect = []byte{0x20, 0x00, 0x41, 0x00, 0x11, 0x00, 0x00, 0x1A} // ...; call_indirect (type 0); drop
	insMemoryFill   = []byte{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xFC, 0x0B, 0x00}
	insTableGrow    = []byte{0xD0, 0x70, 0x41, 0x00, 0xFC, 0x0F, 0x00, 0x1A}
	insLoadChain    = []byte{0x20, 0x00, 0x28, 0x02, 0x00, 0x21, 0x00} // local.get 0; i32.load; local.set 0
)

// opsBody is a function body of n times op.
func opsBody(n int, op []byte) []byte {
	return cat([]byte{0x00}, bytes.Repeat(op, n), []byte{0x42, 0x00, 0x0B})
}

// make2 returns n copies of b.
func make2(n int, b []byte) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// shapeFunctions: n functions in all.
func shapeFunctions(n int) []byte {
	h := hookParts{bodies: make([][]byte, n-1)}
	for i := range h.bodies {
		h.bodies[i] = handleBody
	}
	return h.bytes()
}

// shapePassiveElems: segs passive element segments of n items (function
// 0) each.
func shapePassiveElems(segs, n int) []byte {
	seg := cat([]byte{0x01, 0x00}, uleb(uint64(n)), bytes.Repeat([]byte{0x00}, n))
	h := hookParts{elem: make([][]byte, segs)}
	for i := range h.elem {
		h.elem[i] = seg
	}
	return h.bytes()
}

// shapeActiveElems: one table of size entries, n of them filled by one
// active segment.
func shapeActiveElems(size, n int) []byte {
	h := hookParts{
		table: cat([]byte{0x70, 0x00}, uleb(uint64(size))),
		elem:  [][]byte{cat([]byte{0x00, 0x41, 0x00, 0x0B}, uleb(uint64(n)), bytes.Repeat([]byte{0x00}, n))},
	}
	return h.bytes()
}

// shapeTypes: distinct function types of up to params parameters and
// results results each, total values in all (the handle's two included).
func shapeTypes(total, params, results int) []byte {
	return hookParts{types: hookParts{}.typesOf(total-2, params, results)}.bytes()
}

// typesOf returns distinct function types of up to params parameters and
// results results each, total values in all.
func (hookParts) typesOf(total, params, results int) [][]byte {
	var types [][]byte
	left := total
	for i := 0; left > 0; i++ {
		p := min(params, left)
		r := min(results, left-p)
		ps := bytes.Repeat([]byte{0x7F}, p)
		rs := bytes.Repeat([]byte{0x7F}, r)
		// Distinct types: the index written in binary as i32/i64 choices.
		for j := 0; j < 20 && j < p; j++ {
			if i>>j&1 == 1 {
				ps[j] = 0x7E
			}
		}
		types = append(types, cat([]byte{0x60}, uleb(uint64(p)), ps, uleb(uint64(r)), rs))
		left -= p + r
	}
	return types
}

// shapeNames: a name section naming n functions (indices 0..n-1, whether
// or not they exist) with one-byte names.
func shapeNames(n int) []byte {
	m := make([]byte, 0, 6*n)
	m = append(m, uleb(uint64(n))...)
	for i := 0; i < n; i++ {
		m = append(m, uleb(uint64(i))...)
		m = append(m, 0x01, 'f')
	}
	sub := cat([]byte{0x01}, uleb(uint64(len(m))), m)
	return hookParts{customs: [][]byte{section(0, name("name"), sub)}}.bytes()
}

// shapeData: segs passive data segments of size bytes each.
func shapeData(segs, size int) []byte {
	seg := cat([]byte{0x01}, uleb(uint64(size)), make([]byte, size))
	h := hookParts{data: make([][]byte, segs)}
	for i := range h.data {
		h.data[i] = seg
	}
	return h.bytes()
}

// shapeEverything is every shape above in one module, each at its limit
// where they can share one: both compile-cost models, the compile heap,
// 50,000 functions, locals, a full table and element items, type values,
// globals, data segments and bytes, and a name section, within the
// runtime's 32 MiB.
func shapeEverything() []byte {
	var h hookParts
	for range 18 { // 50,000 locals each, the parameter included
		h.bodies = append(h.bodies, cat([]byte{0x01}, uleb(49_999), []byte{0x7F, 0x42, 0x00, 0x0B}))
	}
	// The compile-heap total: calls with 475 mutable globals (the 473
	// below and the instrumentation's 2) weigh 85,648 bytes each.
	h.bodies = append(h.bodies, make2(2, opsBody(1_175, insCall))...)
	h.bodies = append(h.bodies, opsBody(784, insCall))
	// The empty functions first: the large ones last cost no carry.
	for len(h.bodies) < 50_000-1-44 {
		h.bodies = append(h.bodies, handleBody)
	}
	for range 41 {
		h.bodies = append(h.bodies, brTableBody(5_999))
	}
	h.bodies = append(h.bodies, brIfBody(6_000), brIfBody(6_000), brIfBody(6_000))
	h.types = hookParts{}.typesOf(50_000-2, 1_000, 1_000)
	h.table = cat([]byte{0x70, 0x00}, uleb(262_144))
	h.elem = [][]byte{cat([]byte{0x00, 0x41, 0x00, 0x0B}, uleb(131_072), make([]byte, 131_072))}
	// (types + globals) x functions at its bound: 500 x 50,000.
	for range 473 {
		h.globals = append(h.globals, []byte{0x7E, 0x01, 0x42, 0x00, 0x0B})
	}
	for range 99_998 {
		h.data = append(h.data, []byte{0x01, 0x01, 0x00})
	}
	big := 16<<20 - 99_998 - len(`{"action":"continue"}`)
	h.data = append(h.data, cat([]byte{0x01}, uleb(uint64(big)), make([]byte, big)))
	names := shapeNames(2_000_000)
	h.customs = [][]byte{names[len(hookParts{}.bytes()):]} // its name section alone
	return h.bytes()
}

// loadCost is what loading one module cost the host.
type loadCost struct {
	dur      time.Duration // wall time of Load
	cpu      time.Duration // CPU time of the process during Load (all threads)
	peak     uint64        // the highest HeapAlloc sampled during Load, over the baseline
	total    uint64        // bytes allocated during Load (an upper bound of peak)
	retained uint64        // heap held after Load and a GC, over the baseline
	instance uint64        // heap held by one warm instance, over the module's
	first    time.Duration // the first invocation, instantiation included
	err      error
}

func (c loadCost) String() string {
	return fmt.Sprintf("load %v (CPU %v), peak heap %.1f MiB, allocated %.1f MiB, retained %.1f MiB, instance %.1f MiB, first invocation %v",
		c.dur.Round(time.Millisecond), c.cpu.Round(time.Millisecond), mib(c.peak), mib(c.total), mib(c.retained), mib(c.instance), c.first.Round(time.Millisecond))
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func heapNow() (alloc, total uint64) {
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.TotalAlloc
}

// measureLoad loads wasm in a fresh runtime and, if it loads, invokes it
// once, measuring each step's heap.
func measureLoad(t testing.TB, wasm []byte, invoke bool) loadCost {
	return measureLoadWith(t, runtime.Config{}, wasm, invoke)
}

// measureLoadWith is measureLoad in a Runtime of cfg.
func measureLoadWith(t testing.TB, cfg runtime.Config, wasm []byte, invoke bool) loadCost {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	goruntime.GC()
	base, total0 := heapNow()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			a, _ := heapNow()
			if a > peak.Load() {
				peak.Store(a)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start, cpu0 := time.Now(), processCPU()
	m, err := rt.Load(ctx, wasm)
	c := loadCost{dur: time.Since(start), cpu: processCPU() - cpu0, err: err}
	close(stop)
	wg.Wait()
	a, total1 := heapNow()
	c.total = total1 - total0
	c.peak = max(peak.Load(), a) - min(base, max(peak.Load(), a))
	if err != nil {
		return c
	}
	defer m.Close(ctx)
	goruntime.GC()
	after, _ := heapNow()
	if after > base {
		c.retained = after - base
	}
	if invoke {
		start := time.Now()
		res, err := rt.Invoke(ctx, m, runtime.Request{Tenant: "t", Context: map[string]any{"outgoing": "hi"}})
		c.first = time.Since(start)
		if err != nil || res.Failure != nil {
			t.Fatalf("invoke: %v %+v", err, res.Failure)
		}
		goruntime.GC()
		inst, _ := heapNow()
		if inst > after {
			c.instance = inst - after
		}
	}
	return c
}

// The budget of any module the limits accept: it loads in at most
// loadBudgetTime with at most loadBudgetHeap of host heap at its peak, and an
// instance of it costs the host at most its memory plus instanceBudgetHeap.
const (
	loadBudgetTime     = 3 * time.Second
	loadBudgetHeap     = 256 << 20
	instanceBudgetHeap = 16 << 20
)

// worstShapes are the hostile shapes of issue 10 (and their neighbours),
// each at the largest size the limits accept, with the limit that binds.
func worstShapes() []struct {
	name string
	wasm func() []byte
} {
	return []struct {
		name string
		wasm func() []byte
	}{
		// Compile cost (runtime/compilecost.go).
		{"br_table: 32,768 targets naming one label in one function", func() []byte { return shapeBrTable(1, 32_767) }},
		{"br_table: 41 functions of 6,000 targets (the squares and the total)", func() []byte { return shapeBrTable(41, 5_999) }},
		{"br_if: 3 functions of 6,000 naming one label", func() []byte { return shapeBrIf(3, 6_000) }},
		{"br_if: one function of 6,000 naming one label, then 9,999 empty ones", func() []byte { return shapeCarried(brIfBody(6_000), 9_999) }},
		{"br_table: one of 32,768 targets, then 4,576 empty functions", func() []byte { return shapeCarried(brTableBody(32_767), 4_576) }},
		{"loops: 3 functions of 300", func() []byte { return shapeControl(3, 300, unitLoop) }},
		{"blocks: 3 functions of 3,000", func() []byte { return shapeControl(3, 3_000, unitBlock) }},
		{"every limit at once", shapeEverything},
		{"call_indirect: 6,406 in one function (compile heap)", func() []byte {
			return hookParts{table: []byte{0x70, 0x00, 0x01}, bodies: [][]byte{opsBody(6_406, insCallIndirect)}}.bytes()
		}},
		{"calls: 3 functions of 37,282, one of 2 (compile heap in all)", func() []byte {
			return hookParts{bodies: append(make2(3, opsBody(37_282, insCall)), opsBody(2, insCall))}.bytes()
		}},
		{"calls with 473 mutable globals: 2 functions of 1,175, one of 784", func() []byte {
			h := hookParts{bodies: append(make2(2, opsBody(1_175, insCall)), opsBody(784, insCall))}
			h.globals = make2(473, []byte{0x7E, 0x01, 0x42, 0x00, 0x0B})
			return h.bytes()
		}},
		{"loads of addresses read from memory: 21,845 in one function", func() []byte {
			return hookParts{bodies: [][]byte{opsBody(21_845, insLoadChain)}}.bytes()
		}},
		{"memory.fill: 3 functions of 500", func() []byte {
			return hookParts{bodies: make2(3, opsBody(500, insMemoryFill))}.bytes()
		}},
		{"table.grow: 3 functions of 500", func() []byte {
			return hookParts{table: []byte{0x70, 0x00, 0x01}, bodies: make2(3, opsBody(500, insTableGrow))}.bytes()
		}},
		// The binary reader's totals (runtime/internal/wasmbin/limits.go).
		{"locals: 1,000,000 in functions of 50,000", func() []byte { return shapeLocals(1_000_000, 50_000) }},
		{"functions: 50,000", func() []byte { return shapeFunctions(50_000) }},
		{"element items: one passive segment of 131,072", func() []byte { return shapePassiveElems(1, 131_072) }},
		{"table of 262,144 elements, 131,072 set by an active segment", func() []byte { return shapeActiveElems(262_144, 131_072) }},
		{"types: 50,000 params and results, 1,000 + 1,000 a type", func() []byte { return shapeTypes(50_000, 1_000, 1_000) }},
		{"globals: 10,000", func() []byte {
			h := hookParts{globals: make([][]byte, 10_000)}
			for i := range h.globals {
				h.globals[i] = []byte{0x7E, 0x01, 0x42, 0x00, 0x0B} // mut i64 = 0
			}
			return h.bytes()
		}},
		{"types and globals by functions: 9,999 types, 2,500 functions", func() []byte {
			return hookParts{types: hookParts{}.typesOf(9_999, 1, 0), bodies: make2(2_499, handleBody)}.bytes()
		}},
		{"types and globals by functions: 499 globals, 50,000 functions", func() []byte {
			h := hookParts{bodies: make2(49_999, handleBody), globals: make2(499, []byte{0x7E, 0x01, 0x42, 0x00, 0x0B})}
			return h.bytes()
		}},
		{"data: 100,000 segments", func() []byte { return shapeData(99_999, 1) }},
		{"data: 16 MiB in one passive segment", func() []byte { return shapeData(1, 16<<20-len(`{"action":"continue"}`)) }},
		// Not bounded but not compiled: custom sections are stripped.
		{"a name section of 5,000,000 entries (30 MB)", func() []byte { return shapeNames(5_000_000) }},
	}
}

// Threat: a module whose shape, within every size limit, costs the host far
// more than its size at load or per instance: a br_table or br_ifs naming
// one label (wazero's compiler is quadratic in them: 400,000 targets took
// 30 s and 900 MB, 100,000 br_if 2 minutes), functions of 50,000 locals (a
// 64 KB module peaked at 4.8 GiB), a passive element segment of millions of
// items (8 s and 1.1 GiB to load, 229 MiB per instance), 10,000 types of
// 2,000 values (30 s, and 177 MiB wazero keeps for the Runtime's life), a
// name section of millions of entries (11 times its size kept in heap).
// Defence: the binary reader bounds every total that drives host cost, the
// compile-cost check counts branches and br_table targets, and custom
// sections never reach wazero. Budget: each shape at the largest size the
// limits accept loads within loadBudgetTime and loadBudgetHeap, and an
// instance of it costs at most its memory plus instanceBudgetHeap.
func TestLoadWorstAcceptedModules(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a dozen worst-case modules")
	}
	for _, sh := range worstShapes() {
		t.Run(sh.name, func(t *testing.T) {
			wasm := sh.wasm()
			c := measureLoad(t, wasm, true)
			if c.err != nil {
				t.Fatalf("refused, want accepted (at the limit): %v", c.err)
			}
			t.Logf("%d bytes: %v", len(wasm), c)
			if c.peak > loadBudgetHeap {
				t.Errorf("peak heap during Load %.1f MiB, over the budget of %d MiB", mib(c.peak), loadBudgetHeap>>20)
			}
			if c.instance > instanceBudgetHeap {
				t.Errorf("an instance holds %.1f MiB of heap besides its memory, over the budget of %d MiB", mib(c.instance), instanceBudgetHeap>>20)
			}
			// Timing only coarsely, and not under -race (5 to 10 times slower).
			// CPU time, not wall time: on a shared machine the wall clock
			// counts what other processes take.
			if !raceEnabled && c.cpu > loadBudgetTime {
				t.Errorf("Load took %v of CPU (%v of wall time), over the budget of %v", c.cpu, c.dur, loadBudgetTime)
			}
			if !raceEnabled && c.first > loadBudgetTime {
				t.Errorf("the first invocation (instantiation included) took %v, over %v", c.first, loadBudgetTime)
			}
		})
	}
}

// One step over each limit of TestLoadWorstAcceptedModules is refused at
// load, quickly, with a typed *runtime.LimitError naming the limit.
func TestLoadOneStepOverTheLimits(t *testing.T) {
	w := newWorld(t)
	tests := []struct {
		name  string
		wasm  func() []byte
		limit string
	}{
		{"br_table: 32,769 targets in one function", func() []byte { return shapeBrTable(1, 32_768) }, "br_table_targets (function 1)"},
		{"br_table: functions of 32,768 and 21,000 targets", func() []byte {
			return hookParts{bodies: [][]byte{brTableBody(32_767), brTableBody(20_999)}}.bytes()
		}, "br_table_targets_squared"},
		{"br_table: 250 functions of 1,001 targets", func() []byte { return shapeBrTable(250, 1_000) }, "br_table_targets (sum over functions)"},
		{"br_if: 6,002 in one function", func() []byte { return shapeBrIf(1, 6_002) }, "control (function 1)"},
		{"br_if: 4 functions of 6,000", func() []byte { return shapeBrIf(4, 6_000) }, "control_squared"},
		{"br_if: one function of 6,000, then 10,000 empty ones", func() []byte { return shapeCarried(brIfBody(6_000), 10_000) }, "control_carried"},
		{"br_table: one of 32,768 targets, then 4,577 empty functions", func() []byte { return shapeCarried(brTableBody(32_767), 4_577) }, "br_table_targets_carried"},
		{"call_indirect: 6,407 in one function", func() []byte {
			return hookParts{table: []byte{0x70, 0x00, 0x01}, bodies: [][]byte{opsBody(6_407, insCallIndirect)}}.bytes()
		}, "compile_heap_bytes (function 1)"},
		{"calls: 41,944 in one function", func() []byte {
			return hookParts{bodies: [][]byte{opsBody(41_944, insCall)}}.bytes()
		}, "compile_heap_bytes (function 1)"},
		{"calls: 3 functions of 37,282, one of 3", func() []byte {
			return hookParts{bodies: append(make2(3, opsBody(37_282, insCall)), opsBody(3, insCall))}.bytes()
		}, "compile_heap_bytes (sum over functions)"},
		{"calls with 473 mutable globals: 1,176 in one function", func() []byte {
			return hookParts{bodies: [][]byte{opsBody(1_176, insCall)}, globals: make2(473, []byte{0x7E, 0x01, 0x42, 0x00, 0x0B})}.bytes()
		}, "compile_heap_bytes (function 1)"},
		{"loads of addresses read from memory: 21,846 in one function", func() []byte {
			return hookParts{bodies: [][]byte{opsBody(21_846, insLoadChain)}}.bytes()
		}, "compile_heap_bytes (function 1)"},
		{"memory.fill: 501 in one function", func() []byte { return hookParts{bodies: [][]byte{opsBody(501, insMemoryFill)}}.bytes() }, "control (function 1)"},
		{"loops: 301 in one function", func() []byte { return shapeControl(1, 301, unitLoop) }, "control (function 1)"},
		{"blocks: 4 functions of 3,000", func() []byte { return shapeControl(4, 3_000, unitBlock) }, "control_squared"},
		{"locals: 1,000,001", func() []byte { return shapeLocals(1_000_001, 50_000) }, "MaxLocalsTotal"},
		{"locals: 50,001 in one function", func() []byte { return shapeLocals(50_002, 50_001) }, "MaxLocals"},
		{"functions: 50,001", func() []byte { return shapeFunctions(50_001) }, "MaxFunctions"},
		{"element items: one segment of 131,073", func() []byte { return shapePassiveElems(1, 131_073) }, "MaxElementItems"},
		{"element items: 2 segments of 65,537", func() []byte { return shapePassiveElems(2, 65_537) }, "MaxElementItems"},
		{"table of 262,145 elements", func() []byte { return shapeActiveElems(262_145, 1) }, "MaxTableElements"},
		{"types: 50,001 params and results", func() []byte { return shapeTypes(50_001, 1_000, 1_000) }, "MaxTypeValues"},
		{"types and globals by functions: 9,999 types, 2,501 functions", func() []byte {
			return hookParts{types: hookParts{}.typesOf(9_999, 1, 0), bodies: make2(2_500, handleBody)}.bytes()
		}, "declarations_by_functions"},
		{"types and globals by functions: 500 globals, 50,000 functions", func() []byte {
			h := hookParts{bodies: make2(49_999, handleBody), globals: make2(500, []byte{0x7E, 0x01, 0x42, 0x00, 0x0B})}
			return h.bytes()
		}, "declarations_by_functions"},
		{"data: 100,001 segments", func() []byte { return shapeData(100_000, 1) }, "MaxDataSegments"},
		{"data: 16 MiB + 1", func() []byte { return shapeData(1, 16<<20-len(`{"action":"continue"}`)+1) }, "MaxDataBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := tt.wasm()
			var err error
			within(t, 2*time.Second, "refusing it", func() {
				var m *runtime.Module
				if m, err = w.rt.Load(context.Background(), wasm); err == nil {
					_ = m.Close(context.Background())
				}
			})
			var le *runtime.LimitError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want a *runtime.LimitError", err)
			}
			if !strings.HasPrefix(le.Limit, tt.limit) {
				t.Errorf("limit %q, want %q (%v)", le.Limit, tt.limit, err)
			}
			if c := runtime.Code(err); c != "limit_exceeded" {
				t.Errorf("code %q, want limit_exceeded", c)
			}
		})
	}
}
