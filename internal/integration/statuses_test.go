// Package integration runs real guests through the real runtime and the real
// capability runner, wired as cmd/wasmhooks wires them.
package integration

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// The scripted guest (testdata/guests/scripted.wat) and its script ops
// (internal/testutil's OpHostCall and friends).
func opHostCall(name, payload string) string { return opHostCallCap(name, payload, 4096) }

func opHostCallCap(name, payload string, outCap uint32) string {
	return testutil.OpHostCall(name, payload, outCap)
}

type result struct {
	status abi.Status
	body   string
}

func parse(t *testing.T, reason string) []result {
	t.Helper()
	var out []result
	for _, e := range strings.Split(strings.TrimSuffix(reason, "."), ".") {
		v, b := testutil.DecodeLogEntry(t, e)
		s, _ := abi.UnpackResult(v)
		out = append(out, result{s, string(b)})
	}
	return out
}

// world is a runtime and a runner wired together with a few capabilities.
type world struct {
	rt       *runtime.Runtime
	mod      *runtime.Module
	ledger   *capability.MemoryLedger
	usage    *capability.MemoryUsageSink
	executed atomic.Int64 // executions of "paid"
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{ledger: capability.NewMemoryLedger(), usage: &capability.MemoryUsageSink{}}
	reg := capability.NewRegistry()
	reg.MustRegister(capability.Capability{
		Name: "echo", Description: "returns its payload", Schema: `{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}`,
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			return &capability.Result{Value: req.Payload}, nil
		},
	})
	reg.MustRegister(capability.Capability{
		Name: "paid", Description: "costs 10, uses 6", Schema: `{}`,
		Gates: []capability.Gate{&capability.CreditGate{Ledger: w.ledger}},
		Cost:  func(any) int64 { return 10 },
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			w.executed.Add(1)
			return &capability.Result{Value: map[string]any{"ok": true}, Usage: capability.Usage{Credit: 6}}, nil
		},
	})
	reg.MustRegister(capability.Capability{
		Name: "panics", Description: "panics with a secret", Schema: `{}`,
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			panic("secret host detail /etc/passwd")
		},
	})
	reg.MustRegister(capability.Capability{
		Name: "limited", Description: "one call per hour", Schema: `{}`,
		Gates: []capability.Gate{capability.NewRateGate(1.0/3600, 1)},
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			return &capability.Result{Value: true}, nil
		},
	})
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{Usage: w.usage})
	if err != nil {
		t.Fatal(err)
	}
	w.rt, err = runtime.New(ctx, runtime.Config{HostCaller: runner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.rt.Close(ctx) })
	w.mod, err = w.rt.Load(ctx, testutil.ReadFile(t, "testdata/guests/scripted.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) run(t *testing.T, tenant string, grants []string, lim runtime.Limits, script string) (*runtime.Result, error) {
	t.Helper()
	return w.rt.Invoke(context.Background(), w.mod, runtime.Request{
		Tenant: tenant, Grants: grants, Context: map[string]any{"outgoing": "@@" + script}, Limits: lim,
	})
}

// TestEveryStatus provokes every host_call status of ABI.md through the real
// runner. Statuses the runtime answers alone are also covered, with a fake
// host, in runtime's tests.
func TestEveryStatus(t *testing.T) {
	all := []string{"echo", "paid", "panics", "limited"}
	tests := []struct {
		status abi.Status
		tenant string
		grants []string
		lim    runtime.Limits
		script string
		check  func(t *testing.T, w *world, body string)
	}{
		{abi.StatusOK, "rich", all, runtime.Limits{}, opHostCall("echo", `{"n":1}`), func(t *testing.T, _ *world, body string) {
			if body != `{"n":1}` {
				t.Errorf("body %s", body)
			}
		}},
		{abi.StatusUnknownCapability, "rich", all, runtime.Limits{}, opHostCall("nope", `{}`), nil},
		{abi.StatusInvalidRequest, "rich", all, runtime.Limits{}, opHostCall("echo", `{"n":"1"}`), nil},
		{abi.StatusInvalidRequest, "rich", all, runtime.Limits{}, opHostCall("echo", `{"n":1,"n":2}`), nil},
		{abi.StatusInvalidRequest, "rich", all, runtime.Limits{}, opHostCall("echo", "{\"n\":\"\xff\"}"), nil},
		{abi.StatusDenied, "rich", []string{"echo"}, runtime.Limits{}, opHostCall("paid", `{}`), func(t *testing.T, w *world, _ string) {
			if w.executed.Load() != 0 {
				t.Error("a denied capability ran")
			}
		}},
		{abi.StatusInsufficientCredit, "poor", all, runtime.Limits{}, opHostCall("paid", `{}`), func(t *testing.T, w *world, _ string) {
			if w.executed.Load() != 0 {
				t.Error("the backend was called with no credit")
			}
		}},
		{abi.StatusCapabilityFailed, "rich", all, runtime.Limits{}, opHostCall("panics", `{}`), func(t *testing.T, _ *world, body string) {
			if strings.Contains(body, "secret") || strings.Contains(body, "passwd") || strings.Contains(body, "goroutine") {
				t.Errorf("the hook saw host details: %s", body)
			}
		}},
		{abi.StatusRateLimited, "rich", all, runtime.Limits{}, opHostCall("limited", `{}`) + opHostCall("limited", `{}`), nil},
		{abi.StatusResultTooLarge, "rich", all, runtime.Limits{MaxResultBytes: 8}, opHostCall("echo", `{"n":123456789}`), nil},
		{abi.StatusRequestTooLarge, "rich", all, runtime.Limits{MaxRequestBytes: 8}, opHostCall("echo", `{"n":    1}`), nil},
		{abi.StatusBufferTooSmall, "rich", all, runtime.Limits{}, opHostCallCap("echo", `{"n":1}`, 2) + testutil.OpTake(3), nil},
		{abi.StatusNoPending, "rich", all, runtime.Limits{}, testutil.OpTake(16), nil},
		{abi.StatusQuotaExceeded, "rich", all, runtime.Limits{}, strings.Repeat(opHostCall("echo", `{}`), runtime.DefaultMaxHostCalls+1), nil},
		// NOT_IN_INVOCATION needs a call from _initialize, which the scripted
		// guest does not make: runtime's TestHostCallFromInitialize provokes it.
	}
	for _, tt := range tests {
		t.Run(tt.status.Code(), func(t *testing.T) {
			w := newWorld(t)
			if err := w.ledger.Credit("rich", 1000); err != nil {
				t.Fatal(err)
			}
			res, err := w.run(t, tt.tenant, tt.grants, tt.lim, tt.script)
			if err != nil {
				t.Fatal(err)
			}
			got := parse(t, res.Decision.Reason)
			last := got[len(got)-1]
			if last.status != tt.status {
				t.Fatalf("status %v (body %s), want %v", last.status, last.body, tt.status)
			}
			if tt.check != nil {
				tt.check(t, w, last.body)
			}
			if n := w.ledger.Outstanding(); n != 0 {
				t.Errorf("%d reservations left unresolved", n)
			}
		})
	}
}
