package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestPrepare: Prepare makes Invoke's checks of the point and the limits
// once, with Invoke's errors; InvokePrepared runs with them, refuses a
// request that names other ones, and checks the rest of the request as
// InvokeInto does.
func TestPrepare(t *testing.T) {
	r, m := loaded(t, runtime.Config{MaxMemoryPages: 1024}, testutil.WAT(t, continueWAT))
	other := load(t, newRuntime(t, runtime.Config{}), testutil.WAT(t, continueWAT))
	for _, tt := range []struct {
		name   string
		m      *runtime.Module
		point  string
		limits runtime.Limits
	}{
		{"unknown point", m, "no.such.point", runtime.Limits{}},
		{"memory over the ceiling", m, "", runtime.Limits{MemoryPages: 1025}},
		{"another runtime's module", other, "", runtime.Limits{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := r.Prepare(tt.m, tt.point, nil, tt.limits); !errors.Is(err, runtime.ErrInvalidRequest) {
				t.Fatalf("Prepare: %v, want ErrInvalidRequest", err)
			}
			// The same refusal InvokeInto makes of the same request.
			var res runtime.Result
			err := r.InvokeInto(context.Background(), tt.m, runtime.Request{Tenant: "t", Point: tt.point, Limits: tt.limits}, &res)
			if !errors.Is(err, runtime.ErrInvalidRequest) {
				t.Fatalf("InvokeInto: %v, want ErrInvalidRequest", err)
			}
		})
	}

	lim := runtime.Limits{MemoryPages: 32, Fuel: 1 << 20}
	p, err := r.Prepare(m, "tool.before", nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	if p.Module() != m || p.Point() != "tool.before" || p.Limits().MemoryPages != 32 || p.Limits().Fuel != 1<<20 || p.Limits().MaxInputBytes == 0 {
		t.Fatalf("prepared %v %q %+v", p.Module(), p.Point(), p.Limits())
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		req  runtime.Request
		ok   bool
	}{
		{"the prepared point and limits left out", runtime.Request{Tenant: "a"}, true},
		{"the prepared point and limits named", runtime.Request{Tenant: "b", Point: "tool.before", Limits: lim}, true},
		{"another tenant", runtime.Request{Tenant: "a2"}, true},
		{"the first tenant again", runtime.Request{Tenant: "a"}, true},
		{"another point", runtime.Request{Tenant: "a", Point: "message.outbound"}, false},
		{"other limits", runtime.Request{Tenant: "a", Limits: runtime.Limits{MemoryPages: 16}}, false},
		{"another registry", runtime.Request{Tenant: "a", Points: mustRegistry(t)}, false},
		{"no tenant", runtime.Request{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res runtime.Result
			err := r.InvokePrepared(ctx, p, tt.req, &res)
			if tt.ok && (err != nil || res.Decision == nil || res.Decision.Action != abi.ActionContinue) {
				t.Fatalf("err %v, result %+v: want a continue", err, res)
			}
			if !tt.ok && !errors.Is(err, runtime.ErrInvalidRequest) {
				t.Fatalf("err %v, want ErrInvalidRequest", err)
			}
		})
	}
	// The pool a prepared invocation remembers is looked up again once
	// the runtime is closed: the call fails, it does not run.
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var res runtime.Result
	if err := r.InvokePrepared(ctx, p, runtime.Request{Tenant: "a"}, &res); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

func mustRegistry(t *testing.T) *abi.PointRegistry {
	reg, err := abi.NewPointRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestInvokePreparedAllocatesNothing is TestInvokeIntoAllocatesNothing for
// InvokePrepared.
func TestInvokePreparedAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	r := newRuntime(t, runtime.Config{})
	p, err := r.Prepare(load(t, r, testutil.WAT(t, continueWAT)), "", nil, runtime.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := runtime.Request{Tenant: "t1", Hook: "h", InvocationID: "inv-1", Context: map[string]any{"outgoing": "hello"}}
	var res runtime.Result
	if err := r.InvokePrepared(ctx, p, req, &res); err != nil { // warm the pool
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if err := r.InvokePrepared(ctx, p, req, &res); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a warm InvokePrepared of a continue allocates %v times, want 0", allocs)
	}
}

// slowInitWAT is continueWAT whose _initialize sleeps 300 ms (a relative
// clock subscription to poll_oneoff).
const slowInitWAT = `(module
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "hook_v1" "host_call" (func $host_call (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"action\":\"continue\"}")
  (func (export "_initialize")
    (i64.store (i32.const 1048) (i64.const 300000000))
    (drop (call $poll (i32.const 1024) (i32.const 2048) (i32.const 1) (i32.const 3072))))
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (drop (call $host_call (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1024) (i32.const 4096)))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 21))))`

// TestTimeoutExcludesCreation: an invocation's deadline runs from when its
// instance is ready (Limits.Timeout: "creation excluded"), on the prepared
// path and the other: a cold instance whose initialisation takes longer
// than the invocation's timeout still runs the invocation.
func TestTimeoutExcludesCreation(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, slowInitWAT))
	lim := runtime.Limits{Timeout: 100 * time.Millisecond}
	p, err := r.Prepare(m, "", nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, invoke := range []func(*runtime.Result) error{
		func(res *runtime.Result) error { return r.InvokePrepared(ctx, p, runtime.Request{Tenant: "a"}, res) },
		func(res *runtime.Result) error {
			return r.InvokeInto(ctx, m, runtime.Request{Tenant: "b", Limits: lim}, res)
		},
	} {
		start := time.Now()
		var res runtime.Result
		if err := invoke(&res); err != nil || res.Decision == nil || res.Decision.Action != abi.ActionContinue {
			t.Fatalf("cold invocation %d: %v, %+v", i, err, res)
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Fatalf("cold invocation %d took %v: the initialisation did not sleep", i, took)
		}
	}
}
