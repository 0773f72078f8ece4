package chain

import (
	"context"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestStepHostCallsFromResult checks that a step's trace and audit record
// report the host calls as the runtime answered them (runtime.Result.Calls):
// a result over the binding's limit is result_too_large, not the runner's ok,
// and a call the runtime refused without asking the runner is there too.
func TestStepHostCallsFromResult(t *testing.T) {
	cfg := policyConfig(t,
		Binding{Name: "caller", Module: "scripted", Point: outbound, Phase: Transformer, Fail: FailOpen,
			Grants: []string{"t.echo"}, Limits: runtime.Limits{MaxResultBytes: 4, MaxHostCalls: 3},
			Settings: script(hostCallScript("t.echo") + hostCallScript("zz.made-up") + hostCallScript("t.echo") + hostCallScript("t.echo"))},
	)
	e := newEnv(t, cfg, func(o *Options) { o.HostCaller = echoCaller{} })
	out := e.run(t, outbound, map[string]any{"outgoing": "x"})
	want := []struct {
		name, status string
		charged      int64
	}{
		{"t.echo", "result_too_large", 7},
		{"zz.made-up", "result_too_large", 0}, // its error object is over 4 bytes too,
		{"t.echo", "result_too_large", 7},
		// the fourth call is past MaxHostCalls: refused, not counted
	}
	for what, calls := range map[string][]audit.HostCall{"trace": out.Trace[0].HostCalls, "audit": out.Records()[0].HostCalls} {
		if len(calls) != len(want) {
			t.Fatalf("%s: host calls %+v, want %d", what, calls, len(want))
		}
		for i, w := range want {
			if c := calls[i]; c.Capability != w.name || c.Status != w.status || c.Charged != w.charged || c.LatencyUS < 0 {
				t.Errorf("%s: call %d = %+v, want %+v", what, i, c, w)
			}
		}
	}
	if out.Trace[0].CreditCharged != 14 || out.Records()[0].CreditCharged != 14 {
		t.Errorf("credit charged %d (trace), %d (audit), want 14", out.Trace[0].CreditCharged, out.Records()[0].CreditCharged)
	}
}

// slowCaller answers t.echo after sleeping for d.
type slowCaller struct{ d time.Duration }

func (s slowCaller) HostCall(ctx context.Context, call *abi.Call) abi.Reply {
	time.Sleep(s.d)
	return echoCaller{}.HostCall(ctx, call)
}

// TestStepLatencyIsTheHooks checks that a step's latency, in the trace and
// the audit record, is the hook's invocation as the runtime timed it
// (Result.Duration, host calls included): a hook whose host call takes
// 3 ms took at least 3 ms, and no more than the whole run.
func TestStepLatencyIsTheHooks(t *testing.T) {
	const sleep = 3 * time.Millisecond
	cfg := policyConfig(t,
		Binding{Name: "caller", Module: "scripted", Point: outbound, Phase: Transformer, Fail: FailOpen,
			Grants: []string{"t.echo"}, Settings: script(hostCallScript("t.echo"))},
	)
	e := newEnv(t, cfg, func(o *Options) { o.HostCaller = slowCaller{sleep} })
	start := time.Now()
	out := e.run(t, outbound, map[string]any{"outgoing": "x"})
	whole := time.Since(start).Microseconds()
	if got := out.Trace[0].LatencyUS; got < sleep.Microseconds() || got > whole {
		t.Errorf("trace latency %d µs, want at least %d and at most the run's %d", got, sleep.Microseconds(), whole)
	}
	if got := out.Records()[0].LatencyUS; got != out.Trace[0].LatencyUS {
		t.Errorf("audit latency %d µs, trace %d", got, out.Trace[0].LatencyUS)
	}
}
