package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestResultReportsHostCalls checks Result.Calls: one entry per counted host
// call, in order, with the status the hook saw (the runtime's own refusals
// included), the charge and the duration; none past MaxHostCalls; its array
// reused by InvokeInto.
func TestResultReportsHostCalls(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	host := echoHost()
	host.caps["slow"] = func(*abi.Call) abi.Reply {
		time.Sleep(20 * time.Millisecond)
		return abi.Reply{Status: abi.StatusOK, Body: []byte(`{}`)}
	}
	host.caps["odd"] = func(*abi.Call) abi.Reply { return abi.Reply{Status: 99, Charged: 3} }
	script := opHostCall("paid", `{}`, 64) +
		opHostCall("nope", `{}`, 64) +
		opHostCall(strings.Repeat("n", abi.MaxNameBytes+1), `{}`, 64) +
		opHostCall("huge", `{}`, 64) +
		opHostCall("odd", `{}`, 64) +
		opTake(0) +
		opHostCall("slow", `{}`, 64) +
		opHostCall("paid", `{}`, 64) // past MaxHostCalls: refused, not recorded
	want := []runtime.HostCall{
		{Name: "paid", Status: abi.StatusOK, Charged: 7},
		{Name: "nope", Status: abi.StatusUnknownCapability},
		{Name: "", Status: abi.StatusRequestTooLarge},
		{Name: "huge", Status: abi.StatusResultTooLarge},
		{Name: "odd", Status: abi.StatusCapabilityFailed, Charged: 3},
		{Name: "slow", Status: abi.StatusOK},
	}
	req := runtime.Request{Tenant: "t1", Context: map[string]any{"s": "@@" + script}, HostCaller: host,
		Limits: runtime.Limits{MaxHostCalls: len(want), MaxResultBytes: 1 << 20}}
	var res runtime.Result
	for round := 0; round < 2; round++ {
		var first *runtime.HostCall
		if round == 1 {
			first = &res.Calls[0]
		}
		if err := r.InvokeInto(context.Background(), m, req, &res); err != nil {
			t.Fatal(err)
		}
		if res.HostCalls != len(want) || len(res.Calls) != len(want) {
			t.Fatalf("HostCalls %d, Calls %+v: want %d", res.HostCalls, res.Calls, len(want))
		}
		var charged int64
		for i, c := range res.Calls {
			d := c.Duration
			c.Duration = 0
			if c != want[i] {
				t.Errorf("call %d = %+v, want %+v", i, c, want[i])
			}
			if d < 0 || (c.Name == "slow" && d < 20*time.Millisecond) || d > 10*time.Second {
				t.Errorf("call %d (%s) took %v", i, c.Name, d)
			}
			charged += c.Charged
		}
		if charged != res.CreditCharged {
			t.Errorf("the calls were charged %d, the result says %d", charged, res.CreditCharged)
		}
		if first != nil && first != &res.Calls[0] {
			t.Error("InvokeInto did not reuse the array of Calls")
		}
	}
	// A hook that makes no call reports none, in the same array.
	if err := r.InvokeInto(context.Background(), m, runtime.Request{Tenant: "t1", Context: map[string]any{"s": "@@"}}, &res); err != nil {
		t.Fatal(err)
	}
	if res.HostCalls != 0 || len(res.Calls) != 0 {
		t.Errorf("Calls %+v after a hook that made none", res.Calls)
	}
}
