package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func TestHostCallStatuses(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	longName := strings.Repeat("n", abi.MaxNameBytes+1)
	tests := []struct {
		name   string
		lim    runtime.Limits
		script string
		want   []callResult
	}{
		{
			name:   "ok, body written",
			script: opHostCall("echo", `{"a":1}`, 64),
			want:   []callResult{{abi.StatusOK, 7, `{"a":1}`}},
		},
		{
			name:   "ok, body parked then taken",
			script: opHostCall("big", `{}`, 8) + opTake(200),
			want:   []callResult{{abi.StatusOK, 102, ""}, {abi.StatusOK, 102, `"` + strings.Repeat("x", 100) + `"`}},
		},
		{
			name:   "buffer too small twice, then a take that fits",
			script: opHostCall("big", `{}`, 8) + opTake(10) + opTake(101) + opTake(102),
			want: []callResult{{abi.StatusOK, 102, ""}, {abi.StatusBufferTooSmall, 102, ""},
				{abi.StatusBufferTooSmall, 102, ""}, {abi.StatusOK, 102, `"` + strings.Repeat("x", 100) + `"`}},
		},
		{
			name:   "no pending: nothing parked",
			script: opTake(64),
			want:   []callResult{{abi.StatusNoPending, 0, ""}},
		},
		{
			name:   "no pending: a taken body is gone",
			script: opHostCall("big", `{}`, 8) + opTake(200) + opTake(200),
			want:   []callResult{{abi.StatusOK, 102, ""}, {abi.StatusOK, 102, `"` + strings.Repeat("x", 100) + `"`}, {abi.StatusNoPending, 0, ""}},
		},
		{
			name:   "no pending: the next call drops the parked body",
			script: opHostCall("big", `{}`, 8) + opHostCall("echo", `1`, 64) + opTake(200),
			want:   []callResult{{abi.StatusOK, 102, ""}, {abi.StatusOK, 1, "1"}, {abi.StatusNoPending, 0, ""}},
		},
		{
			name:   "unknown capability",
			script: opHostCall("nope", `{}`, 256),
			want:   []callResult{{abi.StatusUnknownCapability, 0, ""}},
		},
		{
			name:   "request too large: payload",
			lim:    runtime.Limits{MaxRequestBytes: 4},
			script: opHostCall("echo", `"hello"`, 256),
			want:   []callResult{{abi.StatusRequestTooLarge, 0, ""}},
		},
		{
			name:   "request too large: name",
			script: opHostCall(longName, `{}`, 256),
			want:   []callResult{{abi.StatusRequestTooLarge, 0, ""}},
		},
		{
			name:   "result too large",
			lim:    runtime.Limits{MaxResultBytes: 50},
			script: opHostCall("big", `{}`, 256),
			want:   []callResult{{abi.StatusResultTooLarge, 0, ""}},
		},
		{
			name:   "quota exceeded: host calls",
			lim:    runtime.Limits{MaxHostCalls: 2},
			script: opHostCall("echo", `1`, 64) + opHostCall("echo", `2`, 64) + opHostCall("echo", `3`, 256),
			want:   []callResult{{abi.StatusOK, 1, "1"}, {abi.StatusOK, 1, "2"}, {abi.StatusQuotaExceeded, 0, ""}},
		},
		{
			name:   "quota exceeded: bytes",
			lim:    runtime.Limits{MaxHostCallBytes: 20},
			script: opHostCall("echo", `"12345"`, 64) + opHostCall("echo", `"12345"`, 256),
			want:   []callResult{{abi.StatusOK, 7, `"12345"`}, {abi.StatusQuotaExceeded, 0, ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := runScript(t, r, m, echoHost(), tt.lim, tt.script)
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			got := parseLog(t, res.Decision.Reason)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d results %+v, want %d %+v", len(got), got, len(tt.want), tt.want)
			}
			for i := range got {
				w := tt.want[i]
				if got[i].status != w.status {
					t.Errorf("call %d: status %v, want %v", i, got[i].status, w.status)
				}
				if w.status == abi.StatusOK || w.status == abi.StatusBufferTooSmall {
					if got[i].length != w.length {
						t.Errorf("call %d: length %d, want %d", i, got[i].length, w.length)
					}
				}
				if w.status == abi.StatusOK && got[i].body != w.body {
					t.Errorf("call %d: body %q, want %q", i, got[i].body, w.body)
				}
				if w.status != abi.StatusOK && w.status != abi.StatusBufferTooSmall && w.status != abi.StatusNoPending {
					// The error body is written and names the code.
					if !strings.Contains(got[i].body, `"code":"`+w.status.Code()+`"`) {
						t.Errorf("call %d: error body %q does not carry code %q", i, got[i].body, w.status.Code())
					}
				}
			}
		})
	}
}

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

func TestABIViolations(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	const memSize = 4 * 65536
	tests := []struct {
		name   string
		script string
	}{
		{"name past the end", opCall(memSize-2, 4, inPtr, 0, outPtr, 16)},
		{"name wraps 32 bits", opCall(0xFFFFFFF0, 0x20, inPtr, 0, outPtr, 16)},
		{"payload past the end", opCall(namePtr, 4, memSize, 1, outPtr, 16)},
		{"payload wraps 32 bits", opCall(namePtr, 4, 0x10, 0xFFFFFFFF, outPtr, 16)},
		{"output past the end", opCall(namePtr, 4, inPtr, 2, memSize-4, 8)},
		{"output wraps 32 bits", opCall(namePtr, 4, inPtr, 2, 0xFFFFFFFF, 2)},
		{"take with output past the end", opCall(0, 0, 0, 0, memSize, 1)},
		{"output pointer of the decision out of bounds", "O" + "00040000" + "00000010"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := echoHost()
			res, err := runScript(t, r, m, host, runtime.Limits{MaxOutputBytes: 1 << 30}, tt.script)
			var f *abi.Failure
			if !errors.As(err, &f) || f.Code != abi.FailABIViolation {
				t.Fatalf("err = %v, want an abi_violation failure", err)
			}
			if res == nil || res.Failure == nil || res.Decision != nil || res.Reused {
				t.Fatalf("result %+v: want a failure, no decision, instance discarded", res)
			}
			if n := len(host.Calls()); n != 0 {
				t.Errorf("the capability ran %d times; an ABI violation must stop before it", n)
			}
		})
	}
}

func TestFailures(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	tests := []struct {
		name   string
		lim    runtime.Limits
		script string
		want   abi.FailureCode
	}{
		{"trap", runtime.Limits{}, "U", abi.FailTrap},
		{"out of bounds store", runtime.Limits{}, "S" + "00040000", abi.FailTrap},
		{"timeout", runtime.Limits{Timeout: 100 * time.Millisecond, Fuel: runtime.MaxFuel}, "L", abi.FailTimeout}, // fuel that outlasts the deadline: a fast machine spends the default in under 100 ms
		{"returns 0", runtime.Limits{}, "Z", abi.FailInvalidOutput},
		{"output not JSON", runtime.Limits{}, "O" + "00037f00" + "00000010", abi.FailInvalidOutput},
		{"output too large", runtime.Limits{MaxOutputBytes: 8}, "", abi.FailOutputTooLarge},
		{"output of 2 GiB claimed length", runtime.Limits{}, "O" + "00000000" + "80000000", abi.FailOutputTooLarge},
		{"grow past the limit then write", runtime.Limits{MemoryPages: 8}, "G" + "00000100" + "S" + "00100000", abi.FailMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := runScript(t, r, m, echoHost(), tt.lim, tt.script)
			f, ok := abi.AsFailure(err)
			if !ok || f.Code != tt.want {
				t.Fatalf("err = %v, want failure %s", err, tt.want)
			}
			if strings.Contains(f.Message, "goroutine") || strings.Contains(f.Message, "wasm stack trace") {
				t.Errorf("failure message leaks a stack trace: %q", f.Message)
			}
			if res.Reused {
				t.Error("a failed instance went back to the pool")
			}
		})
	}
}

func TestGrowPastLimitReturnsMinusOne(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	res, err := runScript(t, r, m, echoHost(), runtime.Limits{MemoryPages: 8}, "G00000004"+"G00000001"+"G00010000")
	if err != nil {
		t.Fatal(err)
	}
	got := parseLog(t, res.Decision.Reason)
	// grow logs the i32 result sign-extended to 64 bits: the old size, or -1.
	want := []uint64{4, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF}
	for i, g := range got {
		v := uint64(g.status)<<32 | uint64(g.length)
		if v != want[i] {
			t.Errorf("grow %d returned %#x, want %#x", i, v, want[i])
		}
	}
}

func TestCreditReported(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	res, err := runScript(t, r, m, echoHost(), runtime.Limits{}, opHostCall("paid", `{}`, 64)+opHostCall("paid", `{}`, 64))
	if err != nil {
		t.Fatal(err)
	}
	if res.CreditCharged != 14 || res.HostCalls != 2 {
		t.Errorf("charged %d in %d calls, want 14 in 2", res.CreditCharged, res.HostCalls)
	}
}

func TestCallerIdentity(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	host := echoHost()
	_, err := r.Invoke(context.Background(), m, runtime.Request{
		Tenant: "acme", Hook: "h1", Point: "tool.before", Grants: []string{"echo"},
		InvocationID: "inv-1", HostCaller: host,
		Context: map[string]any{"tool": "x", "arguments": "@@" + opHostCall("echo", `{}`, 64)},
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := host.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	c := calls[0].Caller
	if c.Tenant != "acme" || c.Hook != "h1" || c.Invocation != "inv-1" || c.Point != "tool.before" ||
		c.Module != m.Digest() || len(c.Granted) != 1 || c.HasManifest || calls[0].Seq != 1 {
		t.Errorf("caller = %+v seq %d", c, calls[0].Seq)
	}
}

func TestDecisionShapes(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.ReadFile(t, "testdata/guests/shapes.wasm"))
	tests := []struct {
		shape string
		want  abi.Decision
	}{
		{"", abi.Decision{Action: abi.ActionContinue, Shape: abi.ShapeCanonical}},
		{"canonical", abi.Decision{Action: abi.ActionModify, Context: map[string]any{"outgoing": "[canonical]"}, Reason: "wat", Shape: abi.ShapeCanonical}},
		{"top-level", abi.Decision{Action: abi.ActionModify, Context: map[string]any{"outgoing": "[top-level]"}, Shape: abi.ShapeTopLevel}},
		{"outcome", abi.Decision{Action: abi.ActionModify, Context: map[string]any{"outgoing": "[outcome]"}, Reason: "wat", Shape: abi.ShapeOutcome}},
		{"legacy", abi.Decision{Action: abi.ActionBlock, Reason: "legacy block", Shape: abi.ShapeLegacy}},
	}
	for _, tt := range tests {
		t.Run("shape="+tt.shape, func(t *testing.T) {
			settings := map[string]any{}
			if tt.shape != "" {
				settings["shape"] = tt.shape
			}
			res := mustInvoke(t, r, m, runtime.Request{Tenant: "t", Context: map[string]any{"outgoing": "hi"}, Settings: settings})
			got, _ := res.Decision.Encode()
			want, _ := tt.want.Encode()
			if string(got) != string(want) || res.Decision.Shape != tt.want.Shape {
				t.Errorf("decision %s (%s), want %s (%s)", got, res.Decision.Shape, want, tt.want.Shape)
			}
		})
	}
}

// TestUnwritableCacheDir: the compilation cache only saves time. A
// directory the runtime cannot write to (here a file where its
// subdirectory would be, which stops root too) is left out with a warning;
// New and Load still work.
func TestUnwritableCacheDir(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"nointerrupt", "modules"} {
		if err := os.WriteFile(filepath.Join(dir, sub), []byte("in the way"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	r, m := loaded(t, runtime.Config{CacheDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, scripted(t))
	if _, err := runScript(t, r, m, echoHost(), runtime.Limits{}, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "compilation cache off") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
}
