package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/benchmode"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// workHook is a hook of 40 pages that imports fd_write, poll_oneoff,
// random_get and clock_time_get, runs body and continues. The body traps
// (unreachable) when what it checks does not hold.
func workHook(body string) string {
	return guest(`(import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))`, 40, `(data (i32.const 0) "{\"action\":\"continue\"}")
  (func $expect (param $got i32) (param $want i32)
    (if (i32.ne (local.get $got) (local.get $want)) (then unreachable)))
  ;; iovec i at 0x1000 + 8i
  (func $iovec (param $i i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.add (i32.const 0x1000) (i32.shl (local.get $i) (i32.const 3))) (local.get $ptr))
    (i32.store (i32.add (i32.const 0x1004) (i32.shl (local.get $i) (i32.const 3))) (local.get $len)))
  ;; n fd_read subscriptions at 0x4000 (48 bytes each), userdata i
  (func $subs (param $n i32) (local $i i32)
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (i64.store (i32.add (i32.const 0x4000) (i32.mul (local.get $i) (i32.const 48))) (i64.extend_i32_u (local.get $i)))
      (i32.store8 (i32.add (i32.const 0x4008) (i32.mul (local.get $i) (i32.const 48))) (i32.const 1))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l))))
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    `+body+`
    (i64.const 21))`)
}

const (
	errnoInval = 28
	errnoBadf  = 8
	dataPtr    = 0x10000 // 2 MiB of buffer from here
)

// TestHostFunctionCaps: each WASI function that takes a count refuses one
// over its cap (EINVAL) or, for fd_write's bytes, writes up to the cap and
// reports a short write; at the cap it works.
func TestHostFunctionCaps(t *testing.T) {
	tests := []struct{ name, body string }{
		{"fd_write of one iovec too many", fmt.Sprintf(
			`(call $expect (call $fd_write (i32.const 1) (i32.const 0x1000) (i32.const %d) (i32.const 0x100)) (i32.const %d))`,
			runtime.MaxWriteIovecs+1, errnoInval)},
		{"fd_write of the most iovecs", fmt.Sprintf(
			`(call $expect (call $fd_write (i32.const 1) (i32.const 0x1000) (i32.const %d) (i32.const 0x100)) (i32.const 0))
    (call $expect (i32.load (i32.const 0x100)) (i32.const 0))`, runtime.MaxWriteIovecs)},
		{"fd_write of more bytes than the cap is short", fmt.Sprintf(
			`(call $iovec (i32.const 0) (i32.const %d) (i32.const %d))
    (call $expect (call $fd_write (i32.const 2) (i32.const 0x1000) (i32.const 1) (i32.const 0x100)) (i32.const 0))
    (call $expect (i32.load (i32.const 0x100)) (i32.const %d))`, dataPtr, runtime.MaxWriteBytes+100, runtime.MaxWriteBytes)},
		{"fd_write over two iovecs stops at the cap", fmt.Sprintf(
			`(call $iovec (i32.const 0) (i32.const %d) (i32.const %d))
    (call $iovec (i32.const 1) (i32.const %d) (i32.const %d))
    (call $iovec (i32.const 2) (i32.const 0) (i32.const 0xFFFFFFFF)) ;; past the cap: never read
    (call $expect (call $fd_write (i32.const 1) (i32.const 0x1000) (i32.const 3) (i32.const 0x100)) (i32.const 0))
    (call $expect (i32.load (i32.const 0x100)) (i32.const %d))`,
			dataPtr, runtime.MaxWriteBytes/2+10, dataPtr, runtime.MaxWriteBytes/2+10, runtime.MaxWriteBytes)},
		{"poll_oneoff of one subscription too many", fmt.Sprintf(
			`(call $subs (i32.const %d))
    (call $expect (call $poll (i32.const 0x4000) (i32.const 0x20000) (i32.const %d) (i32.const 0x100)) (i32.const %d))`,
			runtime.MaxPollSubscriptions+1, runtime.MaxPollSubscriptions+1, errnoInval)},
		{"poll_oneoff of the most subscriptions", fmt.Sprintf(
			`(call $subs (i32.const %d))
    (call $expect (call $poll (i32.const 0x4000) (i32.const 0x20000) (i32.const %d) (i32.const 0x100)) (i32.const 0))
    (call $expect (i32.load (i32.const 0x100)) (i32.const %d))
    (call $expect (i32.load16_u (i32.const %d)) (i32.const %d))
    (call $expect (i32.wrap_i64 (i64.load (i32.const %d))) (i32.const %d))`,
			runtime.MaxPollSubscriptions, runtime.MaxPollSubscriptions, runtime.MaxPollSubscriptions,
			0x20000+32*(runtime.MaxPollSubscriptions-1)+8, errnoBadf,
			0x20000+32*(runtime.MaxPollSubscriptions-1), runtime.MaxPollSubscriptions-1)},
		{"poll_oneoff whose events overwrite its subscriptions", `(call $subs (i32.const 3))
    (call $expect (call $poll (i32.const 0x4000) (i32.const 0x4000) (i32.const 3) (i32.const 0x100)) (i32.const 0))
    (call $expect (i32.load (i32.const 0x100)) (i32.const 3))
    (call $expect (i32.wrap_i64 (i64.load (i32.const 0x4040))) (i32.const 2))`},
		{"random_get of one byte too many", fmt.Sprintf(
			`(call $expect (call $random (i32.const %d) (i32.const %d)) (i32.const %d))`, dataPtr, runtime.MaxRandomBytes+1, errnoInval)},
		{"random_get of the most bytes", fmt.Sprintf(
			`(call $expect (call $random (i32.const %d) (i32.const %d)) (i32.const 0))`, dataPtr, runtime.MaxRandomBytes)},
	}
	r := newRuntime(t, runtime.Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := load(t, r, testutil.WAT(t, workHook(tt.body)))
			if _, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t"}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHostFunctionFuel: a host function's work is charged exactly, per
// iovec, per byte and per subscription: two hooks that differ only in the
// counts they pass differ in fuel by exactly the rates. The accounting stays
// exact: a budget of the fuel used suffices, one unit less fails with
// fuel_exhausted and reports the whole budget used; DisableMetering charges
// nothing.
func TestHostFunctionFuel(t *testing.T) {
	tests := []struct {
		name      string
		base, big string
		extra     uint64
	}{
		{"random_get per byte",
			fmt.Sprintf(`(call $expect (call $random (i32.const %d) (i32.const 0)) (i32.const 0))`, dataPtr),
			fmt.Sprintf(`(call $expect (call $random (i32.const %d) (i32.const 1000)) (i32.const 0))`, dataPtr),
			1000 * runtime.HostByteFuel},
		{"fd_write per iovec and per byte",
			fmt.Sprintf(`(call $iovec (i32.const 0) (i32.const %d) (i32.const 0))
    (call $expect (call $fd_write (i32.const 1) (i32.const 0x1000) (i32.const 1) (i32.const 0x100)) (i32.const 0))`, dataPtr),
			fmt.Sprintf(`(call $iovec (i32.const 0) (i32.const %d) (i32.const 1000))
    (call $expect (call $fd_write (i32.const 1) (i32.const 0x1000) (i32.const 10) (i32.const 0x100)) (i32.const 0))`, dataPtr),
			9*runtime.HostIovecFuel + 1000*runtime.HostByteFuel},
		{"fd_write per line",
			fmt.Sprintf(`(memory.fill (i32.const %d) (i32.const 32) (i32.const 10))
    (call $iovec (i32.const 0) (i32.const %d) (i32.const 1000))
    (call $expect (call $fd_write (i32.const 1) (i32.const 0x1000) (i32.const 1) (i32.const 0x100)) (i32.const 0))`, dataPtr, dataPtr),
			fmt.Sprintf(`(memory.fill (i32.const %d) (i32.const 10) (i32.const 10))
    (call $iovec (i32.const 0) (i32.const %d) (i32.const 1000))
    (call $expect (call $fd_write (i32.const 1) (i32.const 0x1000) (i32.const 1) (i32.const 0x100)) (i32.const 0))`, dataPtr, dataPtr),
			10 * runtime.HostLineFuel},
		{"poll_oneoff per subscription",
			`(call $subs (i32.const 0)) (call $expect (call $poll (i32.const 0x4000) (i32.const 0x20000) (i32.const 1) (i32.const 0x100)) (i32.const 0))`,
			`(call $subs (i32.const 0)) (call $expect (call $poll (i32.const 0x4000) (i32.const 0x20000) (i32.const 10) (i32.const 0x100)) (i32.const 0))`,
			9 * runtime.HostSubscriptionFuel},
	}
	r := newRuntime(t, runtime.Config{})
	used := func(t *testing.T, m *runtime.Module, fuel uint64) (*runtime.Result, error) {
		return r.Invoke(context.Background(), m, runtime.Request{Tenant: "t", Limits: runtime.Limits{Fuel: fuel}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := load(t, r, testutil.WAT(t, workHook(tt.base)))
			big := load(t, r, testutil.WAT(t, workHook(tt.big)))
			rb, err := used(t, base, 0)
			if err != nil {
				t.Fatal(err)
			}
			rg, err := used(t, big, 0)
			if err != nil {
				t.Fatal(err)
			}
			if rg.FuelUsed-rb.FuelUsed != tt.extra {
				t.Errorf("fuel used %d and %d: the work cost %d, want %d", rb.FuelUsed, rg.FuelUsed, rg.FuelUsed-rb.FuelUsed, tt.extra)
			}
			if res, err := used(t, big, rg.FuelUsed); err != nil || res.FuelUsed != rg.FuelUsed {
				t.Errorf("with a budget of exactly %d: %v", rg.FuelUsed, err)
			}
			res, err := used(t, big, rg.FuelUsed-1)
			if !errors.Is(err, &abi.Failure{Code: abi.FailFuelExhausted}) || res.FuelUsed != rg.FuelUsed-1 {
				t.Errorf("with a budget of %d: %v", rg.FuelUsed-1, err)
			}
			// Short by less than the work: the host function fails it.
			res, err = used(t, big, rg.FuelUsed-tt.extra/2)
			if !errors.Is(err, &abi.Failure{Code: abi.FailFuelExhausted}) || res.FuelUsed != rg.FuelUsed-tt.extra/2 {
				t.Errorf("with a budget of %d: %v", rg.FuelUsed-tt.extra/2, err)
			}
		})
	}
	// Unmetered, nothing is charged.
	u := newRuntime(t, benchmode.With(runtime.Config{}, benchmode.Unmetered))
	m := load(t, u, testutil.WAT(t, workHook(tests[0].big)))
	if res, err := u.Invoke(context.Background(), m, runtime.Request{Tenant: "t"}); err != nil || res.FuelUsed != 0 {
		t.Fatalf("DisableMetering: fuel used %d, err %v", res.FuelUsed, err)
	}
}

// TestHostWorkChecksTheDeadline: with neither fuel slices nor wazero's
// close-on-context-done (DisableMetering with NoDeadlineInterrupt), the
// guest loops below reach the host only through WASI calls, and the host's
// own clock checks (HostWorkPerCheck) are all that stops them. Before those
// checks, the cheap loops never ended; the costly ones ended only when
// the loop had run out of memory.
func TestHostWorkChecksTheDeadline(t *testing.T) {
	loops := []struct{ name, body string }{
		{"clock_time_get", `(drop (call $clock (i32.const 1) (i64.const 0) (i32.const 0x100)))`},
		{"random_get", fmt.Sprintf(`(drop (call $random (i32.const %d) (i32.const %d)))`, dataPtr, runtime.MaxRandomBytes)},
		{"fd_write", fmt.Sprintf(`(drop (call $fd_write (i32.const 1) (i32.const 0x1000) (i32.const %d) (i32.const 0x100)))`, runtime.MaxWriteIovecs)},
		{"poll_oneoff", fmt.Sprintf(`(drop (call $poll (i32.const 0x4000) (i32.const 0x20000) (i32.const %d) (i32.const 0x100)))`, runtime.MaxPollSubscriptions)},
	}
	const timeout = 100 * time.Millisecond
	for _, cfg := range []runtime.Config{benchmode.With(runtime.Config{}, benchmode.Bare), benchmode.With(runtime.Config{}, benchmode.Unmetered), {}} {
		r := newRuntime(t, cfg)
		for _, l := range loops {
			t.Run(fmt.Sprintf("%s/metered=%v/interrupt=%v", l.name, !benchmode.Of(cfg).DisableMetering, !benchmode.Of(cfg).NoDeadlineInterrupt), func(t *testing.T) {
				m := load(t, r, testutil.WAT(t, workHook(`(call $subs (i32.const 1024)) (loop $l `+l.body+` (br $l))`)))
				start := time.Now()
				_, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t", Limits: runtime.Limits{Timeout: timeout, Fuel: runtime.MaxFuel}})
				if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailTimeout {
					t.Fatalf("err = %v, want a timeout", err)
				}
				// A coarse bound, for loaded machines and -race; the
				// figures are in SECURITY.md.
				if d := time.Since(start); d > timeout+2*time.Second {
					t.Errorf("stopped %v after its deadline", d-timeout)
				}
			})
		}
	}
}

// BenchmarkWASICall measures one call of a cheap WASI function from a
// metered guest on a warm instance (a loop of 10,000 per invocation): the
// cost of the per-call charge and of the clock check every
// HostWorkPerCheck units.
func BenchmarkWASICall(b *testing.B) {
	const calls = 10_000
	for _, tt := range []struct{ name, call string }{
		{"clock_time_get", `(drop (call $clock (i32.const 1) (i64.const 0) (i32.const 0x100)))`},
		{"fd_write_nothing", `(drop (call $fd_write (i32.const 1) (i32.const 0x1000) (i32.const 0) (i32.const 0x100)))`},
	} {
		b.Run(tt.name, func(b *testing.B) {
			r, m := loaded(b, runtime.Config{}, testutil.WAT(b, workHook(fmt.Sprintf(`(local.set $n (i32.const %d))
    (loop $l %s (local.set $n (i32.sub (local.get $n) (i32.const 1))) (br_if $l (local.get $n)))`, calls, tt.call))))
			req := runtime.Request{Tenant: "t", InvocationID: "i"}
			var res runtime.Result
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := r.InvokeInto(ctx, m, req, &res); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/calls, "ns/call")
		})
	}
}
