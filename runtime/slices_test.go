package runtime_test

import (
	"context"
	"errors"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func TestInvokeIntoAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, continueWAT))
	ctx := context.Background()
	req := runtime.Request{Tenant: "t1", Hook: "h", InvocationID: "inv-1", Context: map[string]any{"outgoing": "hello"}}
	var res runtime.Result
	if err := r.InvokeInto(ctx, m, req, &res); err != nil { // warm the pool
		t.Fatal(err)
	}
	if res.Decision == nil || res.Decision.Action != abi.ActionContinue || !res.Reused {
		t.Fatalf("result %+v, want a continue on a reused instance", res)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if err := r.InvokeInto(ctx, m, req, &res); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a warm InvokeInto of a continue allocates %v times, want 0", allocs)
	}
}

func TestInvokeIntoReport(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	ctx := context.Background()
	res := runtime.Result{HostCalls: 99, Logs: []runtime.LogLine{{Stream: "stdout", Text: "stale"}}}
	// A failure fills res and returns the *Failure.
	err := r.InvokeInto(ctx, m, runtime.Request{Tenant: "t1", Context: map[string]any{"s": "@@U"}}, &res)
	var f *abi.Failure
	if !errors.As(err, &f) || f.Code != abi.FailTrap || res.Failure != f || res.HostCalls != 0 || res.Logs != nil {
		t.Fatalf("err %v, res %+v: want a trap reported in a fresh res", err, res)
	}
	// An error that is not the hook's leaves nothing of use.
	err = r.InvokeInto(ctx, m, runtime.Request{}, &res)
	if !errors.Is(err, runtime.ErrInvalidRequest) || res.Failure != nil {
		t.Fatalf("err %v, res %+v: want ErrInvalidRequest and an empty res", err, res)
	}
}

// TestGarbageCollectionWhileGuestLoops: compiled guest code has no Go safe
// points, so a stop-the-world collection waits for every goroutine in wasm
// to reach the host. The yield at every fuel slice is where a metered guest
// does; without it this collection would wait for the whole loop.
func TestGarbageCollectionWhileGuestLoops(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	var finished atomic.Bool
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		close(started)
		_, err := r.Invoke(context.Background(), m, runtime.Request{
			Tenant: "t1", Context: map[string]any{"s": "@@L"},
			Limits: runtime.Limits{Timeout: 3 * time.Second, Fuel: runtime.MaxFuel},
		})
		finished.Store(true)
		errc <- err
	}()
	<-started
	time.Sleep(50 * time.Millisecond) // let it enter the loop
	goruntime.GC()
	if finished.Load() {
		t.Error("the collection waited for the looping guest to end")
	}
	err := <-errc
	if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailTimeout {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

func TestCancelStopsLoopingGuest(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	res, err := r.Invoke(ctx, m, runtime.Request{
		Tenant: "t1", Context: map[string]any{"s": "@@L"},
		Limits: runtime.Limits{Timeout: time.Minute, Fuel: runtime.MaxFuel},
	})
	if res != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("res %v, err %v: want the invocation abandoned", res, err)
	}
}

// Guests that spend almost no fuel between calls to the host must still
// stop at their deadline: the host functions that can wait check it.
func TestDeadlineStopsCheapLoops(t *testing.T) {
	tests := []struct {
		name string
		wat  string
	}{
		{"poll_oneoff sleeps", `(module
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    ;; one clock subscription at 0x100: 10 ms, relative
    (i32.store8 (i32.const 0x108) (i32.const 0))
    (i64.store (i32.const 0x118) (i64.const 10000000))
    (loop $l
      (drop (call $poll (i32.const 0x100) (i32.const 0x200) (i32.const 1) (i32.const 0x300)))
      (br $l))
    (i64.const 0)))`},
		{"host calls that wait", `(module
  (import "hook_v1" "host_call" (func $host_call (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "wait")
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (loop $l
      (drop (call $host_call (i32.const 0) (i32.const 4) (i32.const 16) (i32.const 2) (i32.const 64) (i32.const 64)))
      (br $l))
    (i64.const 0)))`},
	}
	host := &fakeHost{caps: map[string]func(*abi.Call) abi.Reply{
		"wait": func(*abi.Call) abi.Reply {
			time.Sleep(20 * time.Millisecond)
			return abi.Reply{Status: abi.StatusOK, Body: []byte(`{}`)}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, m := loaded(t, runtime.Config{}, testutil.WAT(t, tt.wat))
			_, err := r.Invoke(context.Background(), m, runtime.Request{
				Tenant: "t1", HostCaller: host,
				Limits: runtime.Limits{Timeout: 100 * time.Millisecond, MaxHostCalls: 1 << 30, MaxHostCallBytes: 1 << 30},
			})
			if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailTimeout {
				t.Fatalf("err = %v, want a timeout", err)
			}
		})
	}
}
