package adversarial

import (
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threat: host_call arguments that point past the end of linear memory or
// wrap 32 bits, hoping the host reads or writes outside the guest (or panics).
// Defence: every pointer/length pair is checked in 64 bits before anything
// runs; the invocation fails with abi_violation, the capability never runs,
// nothing is reserved, and the instance is discarded.
func TestABIHostCallArgumentsOutOfBounds(t *testing.T) {
	payload := llmPayload("hi", 1)
	n := uint32(len(payload))
	const end = hostileMemory
	// Each case replaces some of the six arguments of an otherwise valid,
	// billable call.
	tests := []struct {
		name string
		args [6]uint32 // name_ptr, name_len, in_ptr, in_len, out_ptr, out_cap
	}{
		{"name_ptr past the end", [6]uint32{end - 3, 7, inPtr, n, outPtr, 4096}},
		{"name_ptr at the very end", [6]uint32{end, 7, inPtr, n, outPtr, 4096}},
		{"name_ptr wraps 32 bits", [6]uint32{0xFFFFFFFF, 7, inPtr, n, outPtr, 4096}},
		{"name_len past the end", [6]uint32{namePtr, end, inPtr, n, outPtr, 4096}},
		{"name_len wraps 32 bits", [6]uint32{namePtr, 0xFFFFFFFF - namePtr + 8, inPtr, n, outPtr, 4096}},
		{"in_ptr past the end", [6]uint32{namePtr, 7, end - 1, n, outPtr, 4096}},
		{"in_ptr wraps 32 bits", [6]uint32{namePtr, 7, 0xFFFFFFF0, n, outPtr, 4096}},
		{"in_len past the end", [6]uint32{namePtr, 7, inPtr, end, outPtr, 4096}},
		{"in_len wraps 32 bits", [6]uint32{namePtr, 7, inPtr, 0xFFFFFFFF, outPtr, 4096}},
		{"out_ptr past the end", [6]uint32{namePtr, 7, inPtr, n, end - 8, 4096}},
		{"out_ptr wraps 32 bits", [6]uint32{namePtr, 7, inPtr, n, 0xFFFFFF00, 4096}},
		{"out_cap past the end", [6]uint32{namePtr, 7, inPtr, n, outPtr, end}},
		{"out_cap wraps 32 bits", [6]uint32{namePtr, 7, inPtr, n, outPtr, 0xFFFFFFFF}},
		{"a take with out_ptr past the end", [6]uint32{0, 0, 0, 0, end, 1}},
		{"a take with out_cap wrapping", [6]uint32{0, 0, 0, 0, outPtr, 0xFFFFFFFF - outPtr + 2}},
		{"a take with a stray name_ptr", [6]uint32{0xFFFFFFFF, 0, 0, 0, outPtr, 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := acmeWorld(t, 1000)
			a := tt.args
			script := opWrite(namePtr, []byte("llm.run")) + opWrite(inPtr, []byte(payload)) + opCall(a[0], a[1], a[2], a[3], a[4], a[5])
			_, f := w.faultOnWarmInstance(t, "acme", runtime.Limits{}, script, abi.FailABIViolation)
			if !strings.Contains(f.Message, "outside linear memory") {
				t.Errorf("message %q does not say what was wrong", f.Message)
			}
			if w.llm.calls.Load() != 0 || len(w.usage.Records()) != 0 {
				t.Errorf("the call reached the runner (%d records) or the provider (%d calls)", len(w.usage.Records()), w.llm.calls.Load())
			}
			if reserved, _, _ := w.ledger.counts(); reserved != 0 {
				t.Errorf("%d reservations for a call that never ran", reserved)
			}
		})
	}
	// The same six arguments, in range, make a billable call that works.
	t.Run("in range", func(t *testing.T) {
		w := acmeWorld(t, 1000)
		res, err := w.run(t, "acme", runtime.Limits{}, opHostCall("llm.run", payload, 4096))
		if err != nil || calls(t, res)[0].status != abi.StatusOK || res.CreditCharged != 3 {
			t.Fatalf("a valid call: %v %+v", err, res)
		}
	})
}

// Threat: an output pointer or length outside memory, or a claimed length of
// 2 GiB to make the host copy (or allocate) that much. Defence: the length is
// checked against MaxOutputBytes before any copy, then the range in 64 bits.
func TestABIOutputOutOfBounds(t *testing.T) {
	tests := []struct {
		name string
		ptr  uint32
		n    uint32
		lim  runtime.Limits
		want abi.FailureCode
	}{
		{"pointer past the end", hostileMemory - 8, 64, runtime.Limits{}, abi.FailABIViolation},
		{"pointer wraps 32 bits", 0xFFFFFFF0, 0x20, runtime.Limits{}, abi.FailABIViolation},
		{"length past the end", 0x40000, hostileMemory, runtime.Limits{}, abi.FailABIViolation},
		{"2 GiB claimed", 0, 0x80000000, runtime.Limits{}, abi.FailOutputTooLarge},
		{"2 GiB claimed, 1 GiB allowed", 0, 0x80000000, runtime.Limits{MaxOutputBytes: 1 << 30}, abi.FailOutputTooLarge},
		{"4 GiB claimed", 0, 0xFFFFFFFF, runtime.Limits{}, abi.FailOutputTooLarge},
		{"1 GiB claimed and allowed, memory of 512 KiB", 0, 1 << 30, runtime.Limits{MaxOutputBytes: 1 << 30}, abi.FailABIViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			before := totalAlloc()
			w.faultOnWarmInstance(t, "acme", tt.lim, opOutput(tt.ptr, tt.n), tt.want)
			if grew := totalAlloc() - before; grew > 64<<20 {
				t.Errorf("refusing an output of %d bytes allocated %d MiB", tt.n, grew>>20)
			}
		})
	}
}

// Threat: host calls made from _initialize, before any invocation (so before
// any tenant, grant or budget) exists. Defence: NOT_IN_INVOCATION; the runner
// is never asked, nothing is reserved.
func TestABIHostCallFromInitialize(t *testing.T) {
	w := acmeWorld(t, 1000)
	m := w.load(t, corpus(t, "init-hostcall.wat"))
	res, err := w.invoke(t, m, runtime.Request{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(t, res); got[0].status != abi.StatusNotInInvocation {
		t.Fatalf("host_call from _initialize: %v, want NOT_IN_INVOCATION", got[0].status)
	}
	if w.llm.calls.Load() != 0 || len(w.usage.Records()) != 0 {
		t.Errorf("the call reached the runner (%d records) or the provider (%d calls)", len(w.usage.Records()), w.llm.calls.Load())
	}
	if reserved, _, _ := w.ledger.counts(); reserved != 0 {
		t.Errorf("%d reservations from _initialize", reserved)
	}
}

// Threat: confusing the park/take protocol: a take with nothing parked, and
// takes with too small a buffer, hoping the host re-runs (and re-bills) the
// call or hands over a stale or foreign result. Defence: one parked slot per
// invocation; a take never runs anything; NO_PENDING and BUFFER_TOO_SMALL.
func TestABIParkAndTake(t *testing.T) {
	t.Run("take with nothing parked", func(t *testing.T) {
		w := acmeWorld(t, 1000)
		res, err := w.run(t, "acme", runtime.Limits{},
			opTake(4096)+opHostCall("llm.run", llmPayload("hi", 1), 4096)+opTake(4096))
		if err != nil {
			t.Fatal(err)
		}
		got := calls(t, res)
		if got[0].status != abi.StatusNoPending || got[1].status != abi.StatusOK || got[2].status != abi.StatusNoPending {
			t.Fatalf("statuses %v %v %v; want NO_PENDING, OK, NO_PENDING", got[0].status, got[1].status, got[2].status)
		}
		if w.llm.calls.Load() != 1 || res.HostCalls != 1 || res.CreditCharged != 3 {
			t.Errorf("provider calls %d, host calls %d, charged %d; want 1, 1, 3", w.llm.calls.Load(), res.HostCalls, res.CreditCharged)
		}
	})
	t.Run("take with a too-small buffer twice in a row", func(t *testing.T) {
		w := acmeWorld(t, 1000)
		res, err := w.run(t, "acme", runtime.Limits{},
			opHostCall("llm.run", llmPayload("hi", 1), 8)+opTake(8)+opTake(16)+opTake(4096)+opTake(4096))
		if err != nil {
			t.Fatal(err)
		}
		got := calls(t, res)
		size := got[0].length
		want := []abi.Status{abi.StatusOK, abi.StatusBufferTooSmall, abi.StatusBufferTooSmall, abi.StatusOK, abi.StatusNoPending}
		for i, s := range want {
			if got[i].status != s {
				t.Errorf("call %d: %v, want %v", i, got[i].status, s)
			}
		}
		if got[1].length != size || got[2].length != size || got[3].length != size || !strings.Contains(got[3].body, `"text":"ok"`) {
			t.Errorf("lengths %d %d %d, body %q; want %d and the result", got[1].length, got[2].length, got[3].length, got[3].body, size)
		}
		// Parked, taken twice too small, then taken: one execution, one charge.
		if w.llm.calls.Load() != 1 || res.CreditCharged != 3 {
			t.Errorf("provider calls %d, charged %d; want 1 and 3", w.llm.calls.Load(), res.CreditCharged)
		}
		if reserved, settled, released := w.ledger.counts(); reserved != 1 || settled != 1 || released != 0 {
			t.Errorf("reserved %d, settled %d, released %d; want 1, 1, 0", reserved, settled, released)
		}
	})
	t.Run("a parked result does not outlive its invocation", func(t *testing.T) {
		w := acmeWorld(t, 1000)
		if _, err := w.run(t, "acme", runtime.Limits{}, opHostCall("llm.run", llmPayload("hi", 1), 8)); err != nil {
			t.Fatal(err)
		}
		// The same (warm) instance, next invocation: the invocation document
		// was parked and taken; nothing else is pending.
		res, err := w.run(t, "acme", runtime.Limits{}, opTake(4096)+opServed)
		if err != nil {
			t.Fatal(err)
		}
		e := entries(res.Decision.Reason)
		if len(e) != 2 || e[1] != "00000002" {
			t.Fatalf("log %q: want a take and the instance's second invocation", res.Decision.Reason)
		}
		if got := decodeCall(t, e[0]); got.status != abi.StatusNoPending {
			t.Errorf("a take in the next invocation: %v, want NO_PENDING", got.status)
		}
	})
}
