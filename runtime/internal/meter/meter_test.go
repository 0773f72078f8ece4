package meter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// huge is a fuel or stack budget that generated code never reaches.
const (
	hugeFuel  = int64(1) << 60
	hugeStack = int32(1) << 30
)

func mustInstrument(t testing.TB, wasm []byte) []byte {
	t.Helper()
	m, err := wasmbin.Parse(wasm, wasmbin.Limits{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	out, _, err := Instrument(wasm, m)
	if err != nil {
		t.Fatalf("instrument: %v", err)
	}
	if _, err := wasmbin.Parse(out, wasmbin.Limits{MaxModuleBytes: 64 << 20, MaxFunctionBodyBytes: 16 << 20}); err != nil {
		t.Fatalf("the instrumented module does not parse: %v", err)
	}
	return out
}

// engines holds one wazero runtime per engine, shared by a test.
type engines struct {
	compiler, interpreter wazero.Runtime
}

// The host functions the modules of the tests may import (see genModule).
const (
	hostModule = "env"
	hostFunc   = "host"
	hostFunc2  = "host2"
)

// newEngines returns the two runtimes, each with the host modules the
// modules of the tests import: the meter's yield (see yielder), env.host,
// which returns 7a + b, and env.host2, which returns 11a + b (both note
// whether they ran with the fuel global below zero, which the check before
// every call of an import prevents).
func newEngines(t testing.TB) *engines {
	ctx := context.Background()
	e := &engines{
		compiler:    wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(true).WithCoreFeatures(api.CoreFeaturesV2)),
		interpreter: wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCloseOnContextDone(true).WithCoreFeatures(api.CoreFeaturesV2)),
	}
	t.Cleanup(func() {
		_ = e.compiler.Close(ctx)
		_ = e.interpreter.Close(ctx)
	})
	i32 := api.ValueTypeI32
	for _, rt := range []wazero.Runtime{e.compiler, e.interpreter} {
		_, err := rt.NewHostModuleBuilder(YieldModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(yieldHost), nil, nil).Export(YieldImport).
			Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		env := rt.NewHostModuleBuilder(hostModule)
		for name, k := range map[string]uint32{hostFunc: 7, hostFunc2: 11} {
			env.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
				if g := mod.ExportedGlobal(FuelExport); g != nil && int64(g.Get()) < 0 {
					ctx.Value(yielderKey{}).(*yielder).negativeAtHost = true
				}
				stack[0] = uint64(k*uint32(stack[0]) + uint32(stack[1]))
			}), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export(name)
		}
		_, err = env.Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// yielder is the host's side of the fuel of one call: the reserve it
// keeps outside the fuel global, the slice it hands over at a time, and
// the calls of yield. With slice 0 yield does nothing (the global holds
// the whole budget).
type yielder struct {
	slice, reserve int64
	calls          int
	negativeAtHost bool // env.host ran with the fuel global below zero
}

type yielderKey struct{}

// yieldHost is the yield host function. With slices it pools the fuel
// left (the global, which a flush may have taken below zero, and the
// reserve) and puts up to a slice of it in the global; when the pool is
// below zero it puts all of it there, and the guest traps.
func yieldHost(ctx context.Context, mod api.Module, _ []uint64) {
	y, _ := ctx.Value(yielderKey{}).(*yielder)
	if y == nil {
		panic("yield called outside the harness")
	}
	y.calls++
	if y.slice == 0 {
		return
	}
	g := mod.ExportedGlobal(FuelExport).(api.MutableGlobal)
	total := int64(g.Get()) + y.reserve
	take := min(y.slice, total)
	g.Set(uint64(take))
	y.reserve = total - take
}

// outcome is what one call of an exported function did.
type outcome struct {
	results []uint64
	err     string // first line of the error, if any
	mem     []byte
	global  uint64
	fuel    int64 // left (the global and the reserve), instrumented modules only
	stack   int32 // left, instrumented modules only
	yields  int   // calls of yield, instrumented modules only

	negativeAtHost bool // a host function ran with the fuel global below zero
}

// budget is what an instrumented module is given: fuel, of which the fuel
// global holds at most slice at a time (all of it when slice is 0), the
// rest handed over at yield; and the stack budget.
type budget struct {
	fuel, slice int64
	stack       int32
}

// call instantiates code afresh and calls name with args; with metered
// set it first gives the instance the budgets (and runs the start function
// the instrumentation exported).
func call(t testing.TB, rt wazero.Runtime, code wazero.CompiledModule, name string, args []uint64, metered bool, fuel int64, stack int32) outcome {
	t.Helper()
	if !metered {
		return callBudget(t, rt, code, name, args, nil)
	}
	return callBudget(t, rt, code, name, args, &budget{fuel: fuel, stack: stack})
}

// callBudget is call with the budget b, nil for a module not metered.
func callBudget(t testing.TB, rt wazero.Runtime, code wazero.CompiledModule, name string, args []uint64, b *budget) outcome {
	t.Helper()
	y := &yielder{}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), yielderKey{}, y), 20*time.Second)
	defer cancel()
	mod, err := rt.InstantiateModule(ctx, code, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	defer mod.Close(ctx)
	var fg, sg api.MutableGlobal
	if b != nil {
		fg = mod.ExportedGlobal(FuelExport).(api.MutableGlobal)
		sg = mod.ExportedGlobal(StackExport).(api.MutableGlobal)
		global := b.fuel
		if b.slice > 0 {
			global = min(b.slice, b.fuel)
			y.slice, y.reserve = b.slice, b.fuel-global
		}
		fg.Set(uint64(global))
		sg.Set(uint64(uint32(b.stack)))
		if start := mod.ExportedFunction(StartExport); start != nil {
			if _, err := start.Call(ctx); err != nil {
				t.Fatalf("start: %v", err)
			}
		}
	}
	var o outcome
	o.results, err = mod.ExportedFunction(name).Call(ctx, args...)
	if err != nil {
		o.err = strings.SplitN(err.Error(), "\n", 2)[0]
		if ctx.Err() != nil {
			t.Skipf("%s ran for 20 s", name)
		}
	}
	mem, _ := mod.Memory().Read(0, mod.Memory().Size())
	o.mem = bytes.Clone(mem)
	o.global = mod.ExportedGlobal("g").Get()
	if b != nil {
		o.fuel = int64(fg.Get()) + y.reserve
		o.stack = int32(uint32(sg.Get()))
		o.yields = y.calls
		o.negativeAtHost = y.negativeAtHost
	}
	return o
}

func argsFor(ft wasmbin.FuncType) [][]uint64 {
	switch ft.String() {
	case typeA.String():
		return [][]uint64{{3, 77}, {2, 0xFFFFFFFE}}
	case typeB.String():
		return [][]uint64{{123}}
	}
	return [][]uint64{nil}
}

func compile(t testing.TB, rt wazero.Runtime, wasm []byte) wazero.CompiledModule {
	t.Helper()
	code, err := rt.CompileModule(context.Background(), wasm)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	t.Cleanup(func() { _ = code.Close(context.Background()) })
	return code
}

// differential generates the module of seed, instruments it and checks,
// for every exported function and on the given engines, that the
// instrumented module behaves exactly like the original (results, traps,
// memory, globals), that its stack budget is given back in full, that both
// engines count the same fuel, and that the fuel is exact: a budget of
// exactly the fuel used suffices and one unit less runs out.
func differential(t *testing.T, e *engines, seed int64, bothEngines bool) {
	wasm := genModule(seed)
	inst := mustInstrument(t, wasm)
	m, err := wasmbin.Parse(wasm, wasmbin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rts := []wazero.Runtime{e.interpreter}
	if bothEngines {
		rts = append(rts, e.compiler)
	}
	var used []int64 // per function and args, from the first engine
	for ri, rt := range rts {
		orig := compile(t, rt, wasm)
		metered := compile(t, rt, inst)
		k := 0
		for _, ex := range m.Exports {
			if ex.Kind != wasmbin.KindFunc {
				continue
			}
			ft, _ := m.FuncType(ex.Index)
			for _, args := range argsFor(ft) {
				want := call(t, rt, orig, ex.Name, args, false, 0, 0)
				got := call(t, rt, metered, ex.Name, args, true, hugeFuel, hugeStack)
				where := fmt.Sprintf("seed %d, engine %d, %s%v", seed, ri, ex.Name, args)
				if got.err != want.err {
					t.Fatalf("%s: error %q, want %q", where, got.err, want.err)
				}
				if fmt.Sprint(got.results) != fmt.Sprint(want.results) {
					t.Fatalf("%s: results %v, want %v", where, got.results, want.results)
				}
				if !bytes.Equal(got.mem, want.mem) {
					t.Fatalf("%s: memory differs", where)
				}
				if got.global != want.global {
					t.Fatalf("%s: global %d, want %d", where, got.global, want.global)
				}
				u := hugeFuel - got.fuel
				if ri == 0 {
					used = append(used, u)
				} else if used[k] != u {
					t.Fatalf("%s: the compiler counts %d fuel, the interpreter %d", where, u, used[k])
				}
				k++
				if want.err != "" {
					continue
				}
				if got.stack != hugeStack {
					t.Fatalf("%s: stack budget %d after return, want %d back", where, got.stack, hugeStack)
				}
				if ri > 0 {
					continue
				}
				exact := call(t, rt, metered, ex.Name, args, true, u, hugeStack)
				if exact.err != "" || exact.fuel != 0 {
					t.Fatalf("%s: with a budget of exactly %d: error %q, fuel left %d", where, u, exact.err, exact.fuel)
				}
				short := call(t, rt, metered, ex.Name, args, true, u-1, hugeStack)
				if short.fuel >= 0 {
					t.Fatalf("%s: with a budget of %d, one under what it uses, fuel left %d (error %q)", where, u-1, short.fuel, short.err)
				}
				if got.negativeAtHost || exact.negativeAtHost || short.negativeAtHost {
					t.Fatalf("%s: a host function ran with the fuel global below zero", where)
				}
			}
		}
	}
}

func TestDifferentialGenerated(t *testing.T) {
	e := newEngines(t)
	n := 120
	if testing.Short() {
		n = 20
	}
	for seed := int64(1); seed <= int64(n); seed++ {
		differential(t, e, seed, seed%8 == 0)
	}
}

// FuzzDifferential runs the differential test on generated modules:
// go test -fuzz FuzzDifferential ./runtime/internal/meter
func FuzzDifferential(f *testing.F) {
	for _, s := range []int64{0, 7, 42, 1 << 40} {
		f.Add(s)
	}
	e := newEngines(f)
	f.Fuzz(func(t *testing.T, seed int64) {
		differential(t, e, seed, true)
	})
}

// TestInstrumentedModulesValidate runs wabt's validator, an implementation
// independent of wazero, on instrumented modules.
func TestInstrumentedModulesValidate(t *testing.T) {
	validator, err := exec.LookPath("wasm-validate")
	if err != nil {
		t.Fatal("wasm-validate not found; install wabt (make deps)")
	}
	dir := t.TempDir()
	var files []string
	for seed := int64(1); seed <= 20; seed++ {
		for i, b := range [][]byte{genModule(seed), mustInstrument(t, genModule(seed))} {
			p := filepath.Join(dir, fmt.Sprintf("m%d-%d.wasm", seed, i))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, p)
		}
	}
	for _, p := range files {
		if out, err := exec.Command(validator, "--enable-all", p).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", filepath.Base(p), err, out)
		}
	}
}

// loopWAT counts to its parameter: the fuel of f(n) is 9n + 5 (see
// TestFuelIsExact).
const loopWAT = `(module
  (memory (export "memory") 1)
  (global (export "g") (mut i32) (i32.const 0))
  (func (export "f") (param i32) (result i32)
    (local i32)
    (block
      (loop
        (br_if 1 (i32.ge_u (local.get 1) (local.get 0)))
        (local.set 1 (i32.add (local.get 1) (i32.const 1)))
        (br 0)))
    (local.get 1))
  (func (export "fill") (param i32)
    (memory.fill (i32.const 0) (i32.const 7) (local.get 0)))
  (func (export "dead") (param i32) (result i32)
    block
      br 0
      block
        i32.const 1
        drop
        i32.const 0
        if
          nop
        else
          i32.const 3
          drop
        end
        loop
        end
      end
    end
    local.get 0))`

// TestFuelIsExact checks the cost model on code whose count is known: the
// loop header segment (local.get, local.get, i32.ge_u, br_if) runs n+1
// times, the body after br_if (local.get, i32.const, i32.add, local.set,
// br) n times, the code after the block (local.get) once: 9n + 5. The
// structure markers are free. memory.fill of n bytes costs its 4
// instructions plus n/64. Dead code is free.
func TestFuelIsExact(t *testing.T) {
	e := newEngines(t)
	inst := mustInstrument(t, testutil.WAT(t, loopWAT))
	for _, rt := range []wazero.Runtime{e.compiler, e.interpreter} {
		code := compile(t, rt, inst)
		for _, n := range []uint64{0, 1, 10, 1000} {
			o := call(t, rt, code, "f", []uint64{n}, true, hugeFuel, hugeStack)
			if used := hugeFuel - o.fuel; used != int64(9*n+5) || o.err != "" {
				t.Errorf("f(%d) used %d fuel (error %q), want %d", n, used, o.err, 9*n+5)
			}
		}
		for _, n := range []uint64{0, 63, 64, 6400} {
			o := call(t, rt, code, "fill", []uint64{n}, true, hugeFuel, hugeStack)
			if used := hugeFuel - o.fuel; used != int64(4+n/64) || o.err != "" {
				t.Errorf("fill(%d) used %d fuel (error %q), want %d", n, used, o.err, 4+n/64)
			}
		}
		// Code that cannot run costs nothing, nested blocks and else arms
		// included: br, then local.get.
		if o := call(t, rt, code, "dead", []uint64{5}, true, hugeFuel, hugeStack); hugeFuel-o.fuel != 2 || o.err != "" {
			t.Errorf("dead used %d fuel (error %q), want 2", hugeFuel-o.fuel, o.err)
		}
		// The fill is refused before it runs when its length is over the
		// budget: nothing is written.
		o := call(t, rt, code, "fill", []uint64{6400}, true, 50, hugeStack)
		if o.fuel >= 0 || o.err == "" || o.mem[0] != 0 {
			t.Errorf("fill(6400) with 50 fuel: error %q, fuel %d, mem[0] %d; want a trap before the fill", o.err, o.fuel, o.mem[0])
		}
	}
}

// runawayWAT has the three shapes a deadline does not stop cheaply: a loop,
// unbounded recursion, and a loop-free call tree of 2^41 - 1 calls (f0
// calls f1 twice, ..., f40 is a leaf).
func runawayWAT() string {
	var sb strings.Builder
	sb.WriteString(`(module
  (memory (export "memory") 1)
  (global (export "g") (mut i32) (i32.const 0))
  (func (export "spin") (loop (br 0)))
  (func $rec (export "recurse") (call $rec))
  (func (export "tree") (call $f0))
`)
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&sb, "  (func $f%d (call $f%d) (call $f%d))\n", i, i+1, i+1)
	}
	sb.WriteString("  (func $f40)\n")
	// The same tree whose functions start with a loop in dead code, which
	// must not stand for the entry check.
	sb.WriteString(`  (func (export "deadtree") (call $d0))` + "\n")
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&sb, "  (func $d%d (block (br 0) (block (loop))) (call $d%d) (call $d%d))\n", i, i+1, i+1)
	}
	sb.WriteString("  (func $d40))")
	return sb.String()
}

// TestRunawayStopped checks that each shape is stopped with the right trap,
// deterministically, on both engines.
func TestRunawayStopped(t *testing.T) {
	e := newEngines(t)
	inst := mustInstrument(t, testutil.WAT(t, runawayWAT()))
	for _, rt := range []wazero.Runtime{e.compiler, e.interpreter} {
		code := compile(t, rt, inst)
		for _, name := range []string{"spin", "tree", "deadtree", "recurse"} {
			var first outcome
			for i := 0; i < 2; i++ {
				o := call(t, rt, code, name, nil, true, 100_000, 16<<10)
				if o.err == "" {
					t.Fatalf("%s returned", name)
				}
				fuelOut, stackOut := o.fuel < 0, o.stack < 0
				if name == "recurse" && (!stackOut || fuelOut) {
					t.Fatalf("%s: fuel %d stack %d, want the stack exhausted", name, o.fuel, o.stack)
				}
				if name != "recurse" && (!fuelOut || stackOut) {
					t.Fatalf("%s: fuel %d stack %d, want the fuel exhausted", name, o.fuel, o.stack)
				}
				if i == 0 {
					first = o
				} else if o.fuel != first.fuel || o.stack != first.stack {
					t.Fatalf("%s: not deterministic: fuel %d then %d, stack %d then %d", name, first.fuel, o.fuel, first.stack, o.stack)
				}
			}
		}
	}
}

func TestRefusals(t *testing.T) {
	build := func(f func(b *wasmbin.Builder)) []byte {
		var b wasmbin.Builder
		f(&b)
		return b.Bytes()
	}
	void := wasmbin.FuncType{}
	tests := []struct {
		name    string
		wasm    []byte
		feature string
		msg     string
	}{
		{"reserved export", build(func(b *wasmbin.Builder) {
			b.Export("__wasmhooks_fuel", wasmbin.KindFunc, b.Func(void, nil, nil))
		}), "", "reserved prefix"},
		{"unknown opcode", build(func(b *wasmbin.Builder) { b.Func(void, nil, []byte{0x27}) }), "", "unknown opcode"},
		{"simd", build(func(b *wasmbin.Builder) {
			b.Func(void, nil, append([]byte{0xFD, 0x0C}, make([]byte, 17)...))
		}), wasmbin.FeatureSIMD, ""},
		{"tail call", build(func(b *wasmbin.Builder) { b.Func(void, nil, []byte{0x12, 0x00}) }), wasmbin.FeatureTailCall, ""},
		{"branch out of range", build(func(b *wasmbin.Builder) { b.Func(void, nil, []byte{0x0C, 0x05}) }), "", "label 5"},
		{"call out of range", build(func(b *wasmbin.Builder) { b.Func(void, nil, []byte{0x10, 0x09}) }), "", "function 9"},
		{"end too early", build(func(b *wasmbin.Builder) { b.Func(void, nil, []byte{0x0B, 0x01}) }), "", "after the end"},
		{"else outside if", build(func(b *wasmbin.Builder) { b.Func(void, nil, []byte{0x05}) }), "", "else outside"},
		// Indices one past the module's own would name the meter's
		// locals and globals in the rewritten module.
		{"local past the function's", build(func(b *wasmbin.Builder) {
			b.Func(void, []wasmbin.LocalDecl{{Count: 1, Type: wasmbin.I64}}, []byte{0x42, 0x7F, 0x21, 0x01}) // local.set 1
		}), "", "local 1 out of range"},
		{"global past the module's", build(func(b *wasmbin.Builder) {
			b.Global(wasmbin.GlobalType{Type: wasmbin.I32, Mutable: true}, wasmbin.I32Const(0))
			b.Func(void, nil, []byte{0x42, 0x7F, 0x24, 0x01}) // global.set 1: the fuel
		}), "", "global 1 out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := wasmbin.Parse(tt.wasm, wasmbin.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = Instrument(tt.wasm, m)
			if err == nil {
				t.Fatal("instrumented")
			}
			var xe *wasmbin.FeatureError
			if tt.feature != "" {
				if !errors.As(err, &xe) || xe.Feature != tt.feature {
					t.Fatalf("got %v, want feature %s", err, tt.feature)
				}
				return
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want %q", err, tt.msg)
			}
		})
	}
}

// TestInstrumentGoHook instruments a 3.8 MB Go-SDK hook and checks the time
// it takes, that wabt accepts the result, and what it adds.
func TestInstrumentGoHook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go hook for wasip1")
	}
	wasm := testutil.BuildHook(t, "hooks-examples/redact-secrets")
	start := time.Now()
	m, err := wasmbin.Parse(wasm, wasmbin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out, st, err := Instrument(wasm, m)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%d bytes -> %d bytes (+%.1f%%) in %v: %+v", len(wasm), len(out), 100*float64(len(out)-len(wasm))/float64(len(wasm)), took, st)
	if !raceEnabled && took > time.Second {
		t.Errorf("instrumenting took %v, want well under a second", took)
	}
	// wazero compiles it in the runtime's tests; wabt validates it here.
	p := filepath.Join(t.TempDir(), "hook.wasm")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command("wasm-validate", "--enable-all", p).CombinedOutput(); err != nil {
		t.Fatalf("wasm-validate: %v\n%s", err, msg)
	}
}

func BenchmarkInstrumentGoHook(b *testing.B) {
	wasm := testutil.BuildHook(b, "hooks-examples/redact-secrets")
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		m, err := wasmbin.Parse(wasm, wasmbin.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := Instrument(wasm, m); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzInstrument feeds arbitrary and mutated modules to the rewriter
// without Instrument's recover: it must never panic, and every refusal is
// typed. What it accepts parses again, and its name section, if it kept
// one, is well-formed.
func FuzzInstrument(f *testing.F) {
	for _, s := range []int64{1, 2, 3, 4, 5} {
		f.Add(genModule(s))
	}
	f.Add(shiftModule(shiftNames()))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		m, err := wasmbin.Parse(wasm, wasmbin.Limits{})
		if err != nil {
			return
		}
		out, _, err := instrument(wasm, m)
		if err != nil {
			var fe *wasmbin.FormatError
			var xe *wasmbin.FeatureError
			var me *Error
			if !errors.As(err, &fe) && !errors.As(err, &xe) && !errors.As(err, &me) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		m2, err := wasmbin.Parse(out, wasmbin.Limits{MaxModuleBytes: 64 << 20, MaxFunctionBodyBytes: 16 << 20})
		if err != nil {
			t.Fatalf("the instrumented module does not parse: %v", err)
		}
		for _, c := range m2.Customs {
			if c.Name == "name" {
				decodeNames(t, c.Data)
			}
		}
	})
}

// TestTableGrowCapped: a table.grow past MaxTableElements fails (-1), as
// the specification allows, instead of allocating on the host's heap; up to
// the cap it works as before.
func TestTableGrowCapped(t *testing.T) {
	wat := `(module
  (memory (export "memory") 1)
  (global (export "g") (mut i32) (i32.const 0))
  (table $f 1 funcref)
  (table $e 1 externref)
  (func (export "growf") (param i32) (result i32) (table.grow $f (ref.null func) (local.get 0)))
  (func (export "growe") (param i32) (result i32) (table.grow $e (ref.null extern) (local.get 0))))`
	e := newEngines(t)
	for _, rt := range []wazero.Runtime{e.compiler, e.interpreter} {
		code := compile(t, rt, mustInstrument(t, testutil.WAT(t, wat)))
		for _, fn := range []string{"growf", "growe"} {
			for _, tt := range []struct {
				n    uint64
				want int32
			}{{5, 1}, {MaxTableElements - 1, 1}, {MaxTableElements, -1}, {100_000_000, -1}, {0xFFFFFFFF, -1}} {
				var before, after goruntime.MemStats
				goruntime.ReadMemStats(&before)
				o := call(t, rt, code, fn, []uint64{tt.n}, true, hugeFuel, hugeStack)
				goruntime.ReadMemStats(&after)
				if o.err != "" || int32(o.results[0]) != tt.want {
					t.Errorf("%s(%d) = %d (error %q), want %d", fn, tt.n, int32(o.results[0]), o.err, tt.want)
				}
				if alloc := after.TotalAlloc - before.TotalAlloc; tt.want < 0 && alloc > 16<<20 {
					t.Errorf("%s(%d) allocated %d MiB", fn, tt.n, alloc>>20)
				}
			}
		}
	}
}
