package bench

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

// Module names (see Env.Wasm).
const (
	GoRedact        = "go:bench/hooks/redact"
	GoEmpty         = "go:bench/hooks/empty"
	GoRedactSecrets = "go:hooks-examples/redact-secrets"
	GoGuard         = "go:bench/hooks/guard"
	WATRedact       = "wat:redact"
	WATEmpty        = "wat:empty"
	WATHostCalls0   = "wat:hostcalls#0"
	WATHostCalls16  = "wat:hostcalls#16"
)

// hostCallsPerRun is the number of host calls of WATHostCalls16.
const hostCallsPerRun = 16

// Target is what a figure must reach.
type Target struct {
	// AtLeast is true for a lower bound (≥), false for an upper bound (≤).
	AtLeast bool
	// Value is the bound, in Unit.
	Value float64
	// Unit is one of "µs", "ms", "x", "MiB", "allocs".
	Unit string
}

// Case is one row of the table.
type Case struct {
	// Name identifies the case (and the sub-benchmark).
	Name string
	// What says what one operation is.
	What string
	// Run is the benchmark; nil for a row derived from other rows.
	Run func(b *testing.B)
	// Figure, if set, returns the row's figure in Target.Unit (or in the
	// unit of What); otherwise the figure is ns/op in µs.
	Figure Figure
	// Target, if set, is what the figure must reach.
	Target *Target
	// Unit is the unit of the figure when there is no Target; empty
	// means µs.
	Unit string
	// Native marks the redaction rows, whose ratio column is against
	// the native baseline.
	Native bool
}

// Cases returns every case, in table order.
func Cases() []Case {
	return []Case{
		{Name: "redact/native-json", Native: true, Run: benchNativeJSON,
			What: "native Go: encoding/json in, scan, abi.Decision.Encode out (baseline)"},
		{Name: "redact/native-sdk", Native: true, Run: benchNativeSDK,
			What: "native Go: the Go-SDK hook's code (SDK codec) under sdktest"},
		{Name: "redact/go-sdk", Native: true, Run: invokeBench(GoRedact, false, true),
			What:   "Go-SDK hook in wasm, runtime.InvokeInto, warm instance",
			Target: &Target{Value: 12, Unit: "µs"}},
		{Name: "redact/wat", Native: true, Run: invokeBench(WATRedact, false, true),
			What: "WAT hook on our ABI, runtime.InvokeInto, warm instance"},
		{Name: "redact/extism-wat", Native: true, Run: benchExtism("redact", false),
			What: "WAT plugin on Extism's kernel ABI, extism/go-sdk Plugin.Call, warm instance"},
		{Name: "redact/redact-secrets", Native: true, Run: invokeBench(GoRedactSecrets, false, true),
			What: "hooks-examples/redact-secrets (10 regexps) in wasm, for scale"},
		{Name: "host/json-codec", Run: benchHostCodec,
			What: "host side of every runtime row: encode the invocation, decode the decision"},

		{Name: "empty/wat", Run: invokeBench(WATEmpty, true, false),
			What:   "empty WAT hook (takes its input, continues), runtime.InvokeInto",
			Target: &Target{Value: 2, Unit: "µs"}},
		{Name: "empty/host-allocs", Target: &Target{Value: 0, Unit: "allocs"},
			What: "host allocations per warm invocation (empty/wat: InvokeInto with a reused Result)",
			Figure: func(_ testing.BenchmarkResult, r map[string]testing.BenchmarkResult) (float64, bool) {
				res, ok := r["empty/wat"]
				return float64(res.AllocsPerOp()), ok && res.N > 0
			}},
		{Name: "empty/go-sdk", Run: invokeBench(GoEmpty, true, false),
			What: "empty Go-SDK hook, runtime.InvokeInto"},
		{Name: "empty/extism-wat", Run: benchExtism("noop", true),
			What: "empty Extism plugin (noop export), Plugin.Call"},

		{Name: "hostcall/runner-noop", Run: benchHostCalls(true),
			What:   "one host_call round trip through capability.Runner to a registered no-op capability (16 calls - 0 calls, / 16)",
			Figure: extra("ns/hostcall", 1e-3), Target: &Target{Value: 1, Unit: "µs"}},
		{Name: "hostcall/runtime-only", Run: benchHostCalls(false),
			What:   "the runtime's share: the same round trip to a HostCaller that answers {} at once",
			Figure: extra("ns/hostcall", 1e-3)},

		{Name: "load/go-cold", Run: benchLoad(loadCold),
			What: "Load of the Go redact hook: validate + compile, no cache", Figure: nsIn(1e-6), Unit: "ms"},
		{Name: "load/go-disk-cache", Run: benchLoad(loadDisk),
			What:   "Load of the Go redact hook in a new Runtime from wazero's disk cache",
			Figure: nsIn(1e-6), Target: &Target{Value: 50, Unit: "ms"}},
		{Name: "load/go-memory-cache", Run: benchLoad(loadMemory),
			What: "Load of the Go redact hook already compiled in this Runtime (sha256 + LRU)", Figure: nsIn(1e-6), Unit: "ms"},

		{Name: "instance/go-sdk", Run: benchInstance(GoRedact),
			What:   "new instance of the Go redact hook: instantiate + _initialize + close (cold - warm invoke)",
			Figure: extra("ns/instance", 1e-3)},
		{Name: "instance/wat", Run: benchInstance(WATRedact),
			What:   "new instance of the WAT redact hook (cold - warm invoke)",
			Figure: extra("ns/instance", 1e-3)},
		{Name: "instance/extism-wat", Run: benchExtismInstance,
			What: "CompiledPlugin.Instance + Close of the Extism plugin"},

		{Name: "chain/3-hooks", Run: benchChain,
			What:   "chain.Run of 3 Go-SDK hooks at message.outbound: observer (empty), transformer (redact), guard (phrase check), audit + no-op spans",
			Target: &Target{Value: 40, Unit: "µs"}},
		{Name: "chain/3-invokes", Run: benchSequence,
			What: "the same 3 hooks as 3 runtime.Invoke calls in a row, without package chain"},

		{Name: "parallel/go-sdk-2-callers", Run: benchParallel,
			What:   "Go redact hook, 2 goroutines invoking at once; figure = throughput vs 1 caller",
			Figure: extra("speedup", 1), Target: &Target{AtLeast: true, Value: 1.8, Unit: "x"}},
		{Name: "parallel/native-2-callers", Run: benchParallelNative, Unit: "x",
			What:   "control: the native baseline the same way, what the machine gave two goroutines then",
			Figure: extra("speedup", 1)},

		{Name: "unmetered/redact/go-sdk", Native: true, Run: invokeBenchIn(GoRedact, false, true, true),
			What: "redact/go-sdk on a Runtime with DisableMetering and NoDeadlineInterrupt (internal/benchmode): the bare engine, nothing stops the guest (for scale only)"},
		{Name: "unmetered/redact/wat", Native: true, Run: invokeBenchIn(WATRedact, false, true, true),
			What: "redact/wat, unmetered"},
		{Name: "unmetered/empty/wat", Run: invokeBenchIn(WATEmpty, true, false, true),
			What: "empty/wat, unmetered"},
		{Name: "unmetered/chain/3-hooks", Run: func(b *testing.B) { chainIn(b, true) },
			What: "chain/3-hooks, unmetered"},

		{Name: "memory/go-sdk", Run: benchMemory(GoRedact),
			What:   "Go heap per warm instance of the Go redact hook (linear memory included)",
			Figure: extra("MiB/instance", 1), Target: &Target{Value: 10, Unit: "MiB"}},
		{Name: "memory/wat", Run: benchMemory(WATRedact),
			What: "Go heap per warm instance of the WAT redact hook", Figure: extra("MiB/instance", 1), Unit: "MiB"},
	}
}

// Figure computes a row's figure from its own result and those of every
// case (for derived rows).
type Figure func(self testing.BenchmarkResult, all map[string]testing.BenchmarkResult) (float64, bool)

// extra returns a Figure reading the case's own metric unit, scaled.
func extra(unit string, scale float64) Figure {
	return func(self testing.BenchmarkResult, _ map[string]testing.BenchmarkResult) (float64, bool) {
		v, ok := self.Extra[unit]
		return v * scale, ok
	}
}

// nsIn returns a Figure that is ns/op scaled (1e-3 for µs, 1e-6 for ms).
func nsIn(scale float64) Figure {
	return func(self testing.BenchmarkResult, _ map[string]testing.BenchmarkResult) (float64, bool) {
		if self.N == 0 {
			return 0, false
		}
		return float64(self.T.Nanoseconds()) / float64(self.N) * scale, true
	}
}

// lastFailure keeps the message of the last failed case: testing.Benchmark
// discards a benchmark's output, and the table must say why a row is empty.
var lastFailure atomic.Pointer[string]

func fatal(b *testing.B, args ...any) {
	b.Helper()
	msg := fmt.Sprint(args...)
	lastFailure.Store(&msg)
	b.Fatal(msg)
}

func fatalf(b *testing.B, format string, args ...any) {
	b.Helper()
	fatal(b, fmt.Sprintf(format, args...))
}

func setup(b *testing.B) (*Env, context.Context) {
	b.Helper()
	e, err := Setup()
	if err != nil {
		fatal(b, err)
	}
	return e, context.Background()
}

// setupOn is setup and the runtime measured: RTUnmetered when unmetered is
// set, else RT.
func setupOn(b *testing.B, unmetered bool) (*Env, context.Context, *runtime.Runtime) {
	b.Helper()
	e, ctx := setup(b)
	if unmetered {
		return e, ctx, e.RTUnmetered
	}
	return e, ctx, e.RT
}

func benchNativeJSON(b *testing.B) {
	e, _ := setup(b)
	b.ReportAllocs()
	for b.Loop() {
		out, err := NativeJSON(e.Doc)
		if err != nil {
			fatal(b, err)
		}
		_ = out
	}
}

func benchNativeSDK(b *testing.B) {
	e, _ := setup(b)
	h := sdktest.NewHost()
	out, err := h.RunDocument(e.Doc)
	if err != nil {
		fatal(b, err)
	}
	if !bytes.Equal(out, e.Want) {
		fatalf(b, "native SDK decision\n%s\nwant\n%s", out, e.Want)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.RunDocument(e.Doc); err != nil {
			fatal(b, err)
		}
	}
}

func benchHostCodec(b *testing.B) {
	e, _ := setup(b)
	point, _ := abi.LookupPoint("message.outbound")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := document(e.Request); err != nil {
			fatal(b, err)
		}
		if _, err := abi.DecodeDecision(e.Want, point, abi.JSONLimits{}); err != nil {
			fatal(b, err)
		}
	}
}

// check compares a runtime result with the expected redaction decision.
func check(e *Env, res *runtime.Result) error {
	if res.Decision == nil {
		return fmt.Errorf("no decision: %+v", res.Failure)
	}
	got, err := res.Decision.Encode()
	if err != nil {
		return err
	}
	if !bytes.Equal(got, e.Want) {
		return fmt.Errorf("decision\n%s\nwant\n%s", got, e.Want)
	}
	return nil
}

// invokeBench runs runtime.Invoke of module name on a warm instance, with
// the small request when small is set; redaction rows check the decision.
func invokeBench(name string, small, redaction bool) func(b *testing.B) {
	return invokeBenchIn(name, small, redaction, false)
}

// invokeBenchIn is invokeBench on RTUnmetered when unmetered is set. The
// loop calls InvokeInto with one Result, as a caller that counts its
// allocations would.
func invokeBenchIn(name string, small, redaction, unmetered bool) func(b *testing.B) {
	return func(b *testing.B) {
		e, ctx, rt := setupOn(b, unmetered)
		m, err := e.ModuleIn(ctx, rt, name)
		if err != nil {
			fatal(b, err)
		}
		req := e.Request
		if small {
			req = e.SmallRequest
		}
		res, err := rt.Invoke(ctx, m, req) // warm the pool
		if err != nil {
			fatal(b, err)
		}
		if redaction {
			if err := check(e, res); err != nil {
				fatal(b, err)
			}
		}
		b.ReportAllocs()
		var out runtime.Result
		var fuel uint64
		for b.Loop() {
			if err := rt.InvokeInto(ctx, m, req, &out); err != nil {
				fatal(b, err)
			}
			fuel += out.FuelUsed
		}
		// The guest's work in fuel (one unit per wasm instruction, the
		// guest's GC included), which a busy machine does not disturb as
		// it does the time.
		if fuel > 0 {
			b.ReportMetric(float64(fuel)/float64(b.N), "fuel/op")
		}
	}
}

func benchExtism(fn string, small bool) func(b *testing.B) {
	return func(b *testing.B) {
		e, ctx := setup(b)
		c, err := e.Extism(ctx)
		if err != nil {
			fatal(b, err)
		}
		p, err := c.Instance(ctx, extism.PluginInstanceConfig{})
		if err != nil {
			fatal(b, err)
		}
		defer p.Close(ctx)
		doc := e.Doc
		if small {
			doc = e.SmallDoc
		}
		out, err := ExtismCall(p, fn, doc)
		if err != nil {
			fatal(b, err)
		}
		if fn == "redact" && !bytes.Equal(out, e.Want) {
			fatalf(b, "extism decision\n%s\nwant\n%s", out, e.Want)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ExtismCall(p, fn, doc); err != nil {
				fatal(b, err)
			}
		}
	}
}

func benchExtismInstance(b *testing.B) {
	e, ctx := setup(b)
	c, err := e.Extism(ctx)
	if err != nil {
		fatal(b, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.Instance(ctx, extism.PluginInstanceConfig{})
		if err != nil {
			fatal(b, err)
		}
		_ = p.Close(ctx)
	}
}

// noopHost answers every host call with {} and does nothing else.
type noopHost struct{}

func (noopHost) HostCall(context.Context, *abi.Call) abi.Reply {
	return abi.Reply{Status: abi.StatusOK, Body: []byte("{}")}
}

var (
	runnerOnce sync.Once
	runnerVal  *capability.Runner
	runnerErr  error
)

// noopRunner is a capability.Runner with one capability, "noop": schema {},
// no gates, free, and an Execute that returns {}.
func noopRunner() (*capability.Runner, error) {
	runnerOnce.Do(func() {
		reg := capability.NewRegistry()
		if runnerErr = reg.Register(capability.Capability{
			Name: "noop", Schema: `{}`,
			Execute: func(context.Context, *capability.Request) (*capability.Result, error) {
				return &capability.Result{Value: map[string]any{}}, nil
			},
		}); runnerErr != nil {
			return
		}
		runnerVal, runnerErr = capability.NewRunner(reg, capability.RunnerOptions{})
	})
	return runnerVal, runnerErr
}

// benchHostCalls alternates invocations of a hook making 0 and 16 host
// calls and reports the difference per call as ns/hostcall.
func benchHostCalls(viaRunner bool) func(b *testing.B) {
	return func(b *testing.B) {
		e, ctx := setup(b)
		m0, err := e.Module(ctx, WATHostCalls0)
		if err != nil {
			fatal(b, err)
		}
		m16, err := e.Module(ctx, WATHostCalls16)
		if err != nil {
			fatal(b, err)
		}
		req := e.SmallRequest
		req.HostCaller = noopHost{}
		if viaRunner {
			r, err := noopRunner()
			if err != nil {
				fatal(b, err)
			}
			req.HostCaller = r
			req.Grants = []string{"noop"}
		}
		for _, m := range []*runtime.Module{m0, m16} {
			res, err := e.RT.Invoke(ctx, m, req)
			if err != nil {
				fatal(b, err)
			}
			if res.Decision == nil || res.Decision.Action != abi.ActionContinue {
				fatalf(b, "unexpected result %+v", res)
			}
		}
		var t0, t16 time.Duration
		b.ReportAllocs()
		for b.Loop() {
			s := time.Now()
			if _, err := e.RT.Invoke(ctx, m0, req); err != nil {
				fatal(b, err)
			}
			mid := time.Now()
			if _, err := e.RT.Invoke(ctx, m16, req); err != nil {
				fatal(b, err)
			}
			t0 += mid.Sub(s)
			t16 += time.Since(mid)
		}
		b.ReportMetric(float64(t16-t0)/float64(b.N)/hostCallsPerRun, "ns/hostcall")
	}
}

type loadMode int

const (
	loadCold loadMode = iota
	loadDisk
	loadMemory
)

// benchLoad measures Runtime.Load of the Go redact hook. Creating and
// closing the Runtime is outside the timer.
func benchLoad(mode loadMode) func(b *testing.B) {
	return func(b *testing.B) {
		e, ctx := setup(b)
		wasm, err := e.Wasm(GoRedact)
		if err != nil {
			fatal(b, err)
		}
		cfg := runtime.Config{}
		if mode == loadDisk {
			cfg.CacheDir = filepath.Join(e.CacheDir, "wazero")
			if _, err := e.Module(ctx, GoRedact); err != nil { // fills the disk cache
				fatal(b, err)
			}
		}
		if mode == loadMemory {
			m, err := e.RT.Load(ctx, wasm)
			if err != nil {
				fatal(b, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				m2, err := e.RT.Load(ctx, wasm)
				if err != nil {
					fatal(b, err)
				}
				_ = m2.Close(ctx)
			}
			_ = m.Close(ctx)
			return
		}
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			rt, err := runtime.New(ctx, cfg)
			if err != nil {
				fatal(b, err)
			}
			b.StartTimer()
			if _, err := rt.Load(ctx, wasm); err != nil {
				fatal(b, err)
			}
			b.StopTimer()
			_ = rt.Close(ctx)
			b.StartTimer()
		}
	}
}

var (
	coldOnce sync.Once
	coldRT   *runtime.Runtime
	coldErr  error
)

// benchInstance alternates an invocation on a Runtime that keeps no idle
// instance (so every invocation creates one and closes it) with a warm one,
// and reports the difference as ns/instance.
func benchInstance(name string) func(b *testing.B) {
	return func(b *testing.B) {
		e, ctx := setup(b)
		coldOnce.Do(func() {
			coldRT, coldErr = runtime.New(ctx, runtime.Config{CacheDir: filepath.Join(e.CacheDir, "wazero"), MaxIdlePerPool: -1})
		})
		if coldErr != nil {
			fatal(b, coldErr)
		}
		wasm, err := e.Wasm(name)
		if err != nil {
			fatal(b, err)
		}
		cold, err := coldRT.Load(ctx, wasm)
		if err != nil {
			fatal(b, err)
		}
		defer cold.Close(ctx)
		warm, err := e.Module(ctx, name)
		if err != nil {
			fatal(b, err)
		}
		if _, err := e.RT.Invoke(ctx, warm, e.Request); err != nil {
			fatal(b, err)
		}
		var tc, tw time.Duration
		b.ReportAllocs()
		for b.Loop() {
			s := time.Now()
			res, err := coldRT.Invoke(ctx, cold, e.Request)
			if err != nil {
				fatal(b, err)
			}
			_ = res
			mid := time.Now()
			if _, err := e.RT.Invoke(ctx, warm, e.Request); err != nil {
				fatal(b, err)
			}
			tc += mid.Sub(s)
			tw += time.Since(mid)
		}
		b.ReportMetric(float64(tc-tw)/float64(b.N), "ns/instance")
	}
}

// chainHooks are the hooks of the chain rows: a transformer that redacts,
// an observer that does nothing, a guard that looks for a phrase; all three
// are Go-SDK hooks.
var chainHooks = []struct {
	name, module string
	phase        chain.Phase
}{
	{"redact", GoRedact, chain.Transformer},
	{"observe", GoEmpty, chain.Observer},
	{"guard", GoGuard, chain.Guard},
}

// benchChain runs the three hooks through package chain: ordering, phases,
// fail policies, one hash-chained audit record per step (into a sink that
// keeps none), spans on the no-op tracer provider.
func benchChain(b *testing.B) { chainIn(b, false) }

func chainIn(b *testing.B, unmetered bool) {
	e, ctx, rt := setupOn(b, unmetered)
	cfg := chain.Config{Modules: map[string][]byte{}}
	for _, h := range chainHooks {
		wasm, err := e.Wasm(h.module)
		if err != nil {
			fatal(b, err)
		}
		cfg.Modules[h.name] = wasm
		cfg.Bindings = append(cfg.Bindings, chain.Binding{Name: h.name, Module: h.name, Point: "message.outbound", Phase: h.phase})
	}
	c, err := chain.New(ctx, cfg, chain.Options{Runtime: rt, Audit: &audittest.LinkingSink{},
		TracerProvider: noop.NewTracerProvider(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fatal(b, err)
	}
	defer c.Close(ctx)
	in := chain.Input{Tenant: e.Request.Tenant, Point: "message.outbound", Context: e.Request.Context, Run: "bench"}
	out, err := c.Run(ctx, in)
	if err != nil {
		fatal(b, err)
	}
	if out.Verdict != chain.Allow || !out.Modified {
		fatalf(b, "chain outcome %+v", out)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Run(ctx, in); err != nil {
			fatal(b, err)
		}
	}
}

// benchSequence runs the chain's three hooks with three runtime.Invoke
// calls, each seeing the context the previous one left: the chain's cost
// without the chain.
func benchSequence(b *testing.B) {
	e, ctx := setup(b)
	var mods []*runtime.Module
	for _, h := range chainHooks {
		m, err := e.Module(ctx, h.module)
		if err != nil {
			fatal(b, err)
		}
		mods = append(mods, m)
	}
	run := func() error {
		req := e.Request
		for _, m := range mods {
			res, err := e.RT.Invoke(ctx, m, req)
			if err != nil {
				return err
			}
			switch res.Decision.Action {
			case abi.ActionModify:
				c := make(map[string]any, len(req.Context))
				for k, v := range req.Context {
					c[k] = v
				}
				for k, v := range res.Decision.Context {
					c[k] = v
				}
				req.Context = c
			case abi.ActionContinue:
			default:
				return fmt.Errorf("unexpected decision %+v", res.Decision)
			}
		}
		return nil
	}
	if err := run(); err != nil {
		fatal(b, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := run(); err != nil {
			fatal(b, err)
		}
	}
}

// benchParallel measures b.N invocations by one caller (timer stopped),
// then b.N invocations by two goroutines sharing them (timed), and reports
// the ratio of the two wall times as the speedup.
func benchParallel(b *testing.B) { parallelIn(b, false) }

func parallelIn(b *testing.B, unmetered bool) {
	e, ctx, rt := setupOn(b, unmetered)
	m, err := e.ModuleIn(ctx, rt, GoRedact)
	if err != nil {
		fatal(b, err)
	}
	parallel(b, func() error {
		_, err := rt.Invoke(ctx, m, e.Request)
		return err
	})
}

// benchParallelNative is benchParallel for the native baseline: what the
// machine gives two goroutines at that moment, the control of the row above.
func benchParallelNative(b *testing.B) {
	e, _ := setup(b)
	parallel(b, func() error {
		_, err := NativeJSON(e.Doc)
		return err
	})
}

func parallel(b *testing.B, op func() error) {
	var failed atomic.Pointer[error]
	run := func(n int) {
		for range n {
			if err := op(); err != nil {
				failed.Store(&err)
				return
			}
		}
	}
	both := func(n int) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); run(n / 2) }()
		go func() { defer wg.Done(); run(n - n/2) }()
		wg.Wait()
	}
	both(2) // two warm instances
	b.StopTimer()
	b.ResetTimer()
	s := time.Now()
	run(b.N)
	one := time.Since(s)
	b.StartTimer()
	s = time.Now()
	both(b.N)
	two := time.Since(s)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		fatal(b, *err)
	}
	b.ReportMetric(float64(one)/float64(two), "speedup")
}

// benchMemory creates warmInstances warm instances (one per tenant, each
// left idle in its pool) in a fresh Runtime and reports the growth of the
// live Go heap per instance. A Runtime's linear memories are Go slices (its
// memory allocator), so they are included; the compiled code is not (it is
// shared by all instances).
func benchMemory(name string) func(b *testing.B) {
	const warmInstances = 4
	return func(b *testing.B) {
		e, ctx := setup(b)
		wasm, err := e.Wasm(name)
		if err != nil {
			fatal(b, err)
		}
		if _, err := e.Module(ctx, name); err != nil { // fills the disk cache
			fatal(b, err)
		}
		var total, linear float64
		for b.Loop() {
			rt, err := runtime.New(ctx, runtime.Config{CacheDir: filepath.Join(e.CacheDir, "wazero")})
			if err != nil {
				fatal(b, err)
			}
			m, err := rt.Load(ctx, wasm)
			if err != nil {
				fatal(b, err)
			}
			if _, err := rt.Invoke(ctx, m, e.Request); err != nil { // one-time module set-up
				fatal(b, err)
			}
			before := liveHeap()
			for i := range warmInstances {
				req := e.Request
				req.Tenant = fmt.Sprintf("tenant-%d", i)
				res, err := rt.Invoke(ctx, m, req)
				if err != nil {
					fatal(b, err)
				}
				linear += float64(res.MemoryPages) * 65536
			}
			total += float64(liveHeap() - before)
			_ = rt.Close(ctx)
		}
		n := float64(b.N * warmInstances)
		b.ReportMetric(total/n/(1<<20), "MiB/instance")
		b.ReportMetric(linear/n/(1<<20), "linear-MiB/instance")
	}
}

func liveHeap() int64 {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
