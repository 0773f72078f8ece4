package chain

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// clock is a fake clock for breakers and approvals.
type clock = testutil.Clock

func newClock() *clock { return testutil.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)) }

var (
	rtOnce   sync.Once
	sharedRT *runtime.Runtime
)

// testRuntime returns a runtime shared by the package's tests (WAT guests
// compile in milliseconds; sharing keeps the compile cache warm).
func testRuntime(t *testing.T) *runtime.Runtime {
	t.Helper()
	rtOnce.Do(func() {
		rt, err := runtime.New(context.Background(), runtime.Config{Logger: quiet()})
		if err != nil {
			panic(err)
		}
		sharedRT = rt
	})
	return sharedRT
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func policyWasm(t *testing.T) []byte   { return testutil.ReadFile(t, "testdata/guests/policy.wasm") }
func scriptedWasm(t *testing.T) []byte { return testutil.ReadFile(t, "testdata/guests/scripted.wasm") }

// fakeEngine is the test runtime with its invocations answered by invoke:
// for failures the runtime does not (yet) produce, canned results, or
// counting invocations.
type fakeEngine struct {
	*runtime.Runtime
	invoke func(context.Context, *runtime.Module, runtime.Request) (*runtime.Result, error)
}

// InvokePrepared copies invoke's result into res and returns its error;
// invoke sees the request with p's point and limits.
func (f *fakeEngine) InvokePrepared(ctx context.Context, p *runtime.Prepared, req runtime.Request, res *runtime.Result) error {
	req.Point, req.Limits = p.Point(), p.Limits()
	r, err := f.invoke(ctx, p.Module(), req)
	if r != nil {
		*res = *r
	}
	return err
}

// withInvoke is a newEnv option: the chain's engine answers invocations with
// invoke.
func withInvoke(t *testing.T, invoke func(context.Context, *runtime.Module, runtime.Request) (*runtime.Result, error)) func(*Options) {
	return func(o *Options) { o.Runtime = &fakeEngine{Runtime: testRuntime(t), invoke: invoke} }
}

// env is a chain under test with its collaborators.
type env struct {
	c     *Chain
	clock *clock
	sink  *audit.MemorySink
	store *MemoryApprovals
}

func newEnv(t *testing.T, cfg Config, mods ...func(*Options)) *env {
	t.Helper()
	e := &env{clock: newClock(), sink: audit.NewMemorySink(), store: NewMemoryApprovals()}
	opts := Options{Runtime: testRuntime(t), Audit: e.sink, Approvals: e.store, Logger: quiet(), Now: e.clock.Now}
	for _, m := range mods {
		m(&opts)
	}
	c, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	e.c = c
	return e
}

func (e *env) run(t *testing.T, point string, ctx map[string]any) *Outcome {
	t.Helper()
	out, err := e.c.Run(context.Background(), Input{Tenant: "acme", Point: point, Context: ctx})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out
}

// policyConfig binds the policy guest once per binding, as module "policy".
func policyConfig(t *testing.T, bs ...Binding) Config {
	cfg := Config{Modules: map[string][]byte{"policy": policyWasm(t), "scripted": scriptedWasm(t)}}
	for _, b := range bs {
		if b.Module == "" {
			b.Module = "policy"
		}
		cfg.Bindings = append(cfg.Bindings, b)
	}
	return cfg
}

// decide is settings that make the policy guest return d.
func decide(d string) map[string]any {
	return map[string]any{"decide": mustJSON(d)}
}

// when is decide, only if the context contains s.
func when(s, d string) map[string]any {
	return map[string]any{"when": s, "decide": mustJSON(d)}
}

// appendTo is settings that make the policy guest append s to field.
func appendTo(field, s string) map[string]any {
	return map[string]any{"field": field, "append": s}
}

func mustJSON(s string) any {
	v, err := abi.ParseJSON([]byte(s), abi.JSONLimits{})
	if err != nil {
		panic(err)
	}
	return v
}

// script is settings that make the scripted guest run s (see
// testdata/guests/scripted.wat).
func script(s string) map[string]any { return map[string]any{"script": "@@" + s} }

// hostCallScript writes name at 0x30000 and calls it with an empty payload,
// a 256-byte reply buffer at 0x31000.
func hostCallScript(name string) string {
	return fmt.Sprintf("W%08x%08x%sC%08x%08x%08x%08x%08x%08x",
		0x30000, len(name), hex.EncodeToString([]byte(name)), 0x30000, len(name), 0, 0, 0x31000, 0x100)
}

func names(trace []Step) []string {
	var out []string
	for _, s := range trace {
		out = append(out, s.Binding)
	}
	return out
}

// failures lists the trace's failures as binding: failure, for a message
// that says why a run went another way than expected.
func failures(trace []Step) []string {
	var out []string
	for _, s := range trace {
		if s.Failure != nil {
			out = append(out, fmt.Sprintf("%s: %v (after %d µs, %d fuel)", s.Binding, s.Failure, s.LatencyUS, s.FuelUsed))
		}
	}
	return out
}

// equal reports whether a and b hold the same strings in the same order.
func equal(a, b []string) bool { return slices.Equal(a, b) }

// testKey is an approval key two Chains of one test share.
var testKey = []byte("0123456789abcdef0123456789abcdef")
