package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// This file drives testdata/guests/scripted.wat, a hand-written WAT hook that
// interprets a script carried in its invocation. See that file for the ops.

// Scratch addresses in the scripted guest's memory that its interpreter does
// not use.
const (
	namePtr = testutil.ScriptNamePtr
	inPtr   = testutil.ScriptInPtr
	outPtr  = testutil.ScriptOutPtr
)

func opCall(p1, p2, p3, p4, p5, p6 uint32) string { return testutil.OpCall(p1, p2, p3, p4, p5, p6) }
func opWrite(addr uint32, b []byte) string        { return testutil.OpWrite(addr, b) }

// opHostCall writes name and payload into scratch memory and calls host_call
// with an output buffer of outCap bytes.
func opHostCall(name, payload string, outCap uint32) string {
	return testutil.OpHostCall(name, payload, outCap)
}

func opTake(outCap uint32) string { return testutil.OpTake(outCap) }

// callResult is one logged host_call (or grow) of the scripted guest.
type callResult struct {
	status abi.Status
	length uint32
	body   string // written body, if any
}

func parseLog(t *testing.T, reason string) []callResult {
	t.Helper()
	var out []callResult
	for _, e := range strings.Split(strings.TrimSuffix(reason, "."), ".") {
		if e == "" {
			continue
		}
		v, body := testutil.DecodeLogEntry(t, e)
		s, n := abi.UnpackResult(v)
		out = append(out, callResult{status: s, length: n, body: string(body)})
	}
	return out
}

// fakeHost is a HostCaller for runtime tests: a map of capability functions.
type fakeHost struct {
	mu    sync.Mutex
	caps  map[string]func(*abi.Call) abi.Reply
	calls []abi.Call
}

func (h *fakeHost) HostCall(ctx context.Context, c *abi.Call) abi.Reply {
	h.mu.Lock()
	h.calls = append(h.calls, *c)
	f := h.caps[c.Name]
	h.mu.Unlock()
	if f == nil {
		return abi.ErrorReply(abi.StatusUnknownCapability, "no capability "+c.Name)
	}
	return f(c)
}

func (h *fakeHost) Calls() []abi.Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]abi.Call(nil), h.calls...)
}

func echoHost() *fakeHost {
	return &fakeHost{caps: map[string]func(*abi.Call) abi.Reply{
		"echo": func(c *abi.Call) abi.Reply { return abi.Reply{Status: abi.StatusOK, Body: c.Payload} },
		"big": func(c *abi.Call) abi.Reply {
			return abi.Reply{Status: abi.StatusOK, Body: []byte(`"` + strings.Repeat("x", 100) + `"`)}
		},
		"huge": func(c *abi.Call) abi.Reply {
			return abi.Reply{Status: abi.StatusOK, Body: []byte(`"` + strings.Repeat("x", 2<<20) + `"`)}
		},
		"paid": func(c *abi.Call) abi.Reply { return abi.Reply{Status: abi.StatusOK, Body: []byte(`{}`), Charged: 7} },
	}}
}

// closer is what newRuntime and load close when the test ends.
type closer interface{ Close(context.Context) error }

// keep fails t on err, and closes v when t ends.
func keep[T closer](t testing.TB, v T, err error) T {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close(context.Background()) })
	return v
}

// namedConfig is a runtime configuration a test or benchmark runs under,
// with the name of its subtest.
type namedConfig struct {
	name string
	cfg  runtime.Config
}

func newRuntime(t testing.TB, cfg runtime.Config) *runtime.Runtime {
	t.Helper()
	r, err := runtime.New(context.Background(), cfg)
	return keep(t, r, err)
}

func load(t testing.TB, r *runtime.Runtime, wasm []byte) *runtime.Module {
	t.Helper()
	m, err := r.Load(context.Background(), wasm)
	return keep(t, m, err)
}

// loaded is a runtime of cfg with wasm loaded on it (newRuntime, then load),
// both closed when t ends.
func loaded(t testing.TB, cfg runtime.Config, wasm []byte) (*runtime.Runtime, *runtime.Module) {
	t.Helper()
	r := newRuntime(t, cfg)
	return r, load(t, r, wasm)
}

// mustInvoke is r.Invoke of m for req, and fails t on an error.
func mustInvoke(t testing.TB, r *runtime.Runtime, m *runtime.Module, req runtime.Request) *runtime.Result {
	t.Helper()
	res, err := r.Invoke(context.Background(), m, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func scripted(t testing.TB) []byte { return testutil.ReadFile(t, "testdata/guests/scripted.wasm") }

// runScript runs one invocation of the scripted guest.
func runScript(t *testing.T, r *runtime.Runtime, m *runtime.Module, host runtime.HostCaller, lim runtime.Limits, script string) (*runtime.Result, error) {
	t.Helper()
	return r.Invoke(context.Background(), m, runtime.Request{
		Tenant: "t1", Point: "message.outbound",
		Context:    map[string]any{"s": "@@" + script},
		HostCaller: host, Limits: lim,
	})
}
