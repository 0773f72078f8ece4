package runtime_test

import (
	"fmt"

	"context"
	"github.com/wasmhooks/wasmhooks/abi"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// printer writes a fixed text to stdout and stderr through WASI fd_write,
// then, for each '!' in its input, 1 KiB more to stdout; then continues.
const printer = `(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 0) "{\"action\":\"continue\"}")
  (data (i32.const 64) "line one\nline two\r\n\1b[31mred\1b[0m\n{\"level\":\"error\",\"msg\":\"forged\"}\npartial")
  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 32) (local.get $ptr))
    (i32.store (i32.const 36) (local.get $len))
    (drop (call $fd_write (local.get $fd) (i32.const 32) (i32.const 1) (i32.const 40))))
  (func (export "hook_v1_handle") (param $len i32) (result i64)
    (local $i i32)
    (if (i32.gt_u (local.get $len) (i32.const 60000)) (then (return (i64.const 0))))
    (drop (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 4096) (local.get $len)))
    (call $write (i32.const 1) (i32.const 64) (i32.const 72))
    (call $write (i32.const 2) (i32.const 64) (i32.const 8))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (if (i32.eq (i32.load8_u (i32.add (i32.const 4096) (local.get $i))) (i32.const 33))
          (then (call $write (i32.const 1) (i32.const 4096) (i32.const 1024))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (i64.or (i64.shl (i64.const 0) (i64.const 32)) (i64.const 21))))`

func TestStdoutIsACappedPerInvocationLog(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, printer))
	res, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t", Context: map[string]any{"outgoing": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []runtime.LogLine{
		{Stream: "stdout", Text: "line one"},
		{Stream: "stdout", Text: "line two\r"},
		{Stream: "stdout", Text: "\x1b[31mred\x1b[0m"},
		{Stream: "stdout", Text: `{"level":"error","msg":"forged"}`},
		{Stream: "stdout", Text: "partial"},
		{Stream: "stderr", Text: "line one"},
	}
	if len(res.Logs) != len(want) {
		t.Fatalf("logs %q, want %q", res.Logs, want)
	}
	for i := range want {
		if res.Logs[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, res.Logs[i], want[i])
		}
	}
	// The next invocation on the same (warm) instance starts with an empty log.
	res, err = r.Invoke(context.Background(), m, runtime.Request{Tenant: "t", Context: map[string]any{"outgoing": strings.Repeat("!", 100)}, Limits: runtime.Limits{MaxLogBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, l := range res.Logs {
		total += len(l.Text) + 1
	}
	if total > 4096+16 || res.LogBytesDropped == 0 {
		t.Fatalf("log of %d bytes with %d dropped; want at most the 4 KiB cap and the rest counted", total, res.LogBytesDropped)
	}
}

// sleeper calls poll_oneoff with one relative clock subscription of the
// number of milliseconds in its data, then continues.
const sleeper = `(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"action\":\"continue\"}")
  (func (export "hook_v1_handle") (param $len i32) (result i64)
    ;; subscription at 256: userdata 7, tag 0 (clock), id 1 (monotonic), timeout 300ms
    (i64.store (i32.const 256) (i64.const 7))
    (i32.store8 (i32.const 264) (i32.const 0))
    (i32.store (i32.const 272) (i32.const 1))
    (i64.store (i32.const 280) (i64.const 300000000))
    (i64.store (i32.const 288) (i64.const 0))
    (i32.store16 (i32.const 296) (i32.const 0))
    (if (i32.ne (call $poll (i32.const 256) (i32.const 512) (i32.const 1) (i32.const 600)) (i32.const 0)) (then unreachable))
    (if (i32.ne (i32.load (i32.const 600)) (i32.const 1)) (then unreachable))
    (if (i64.ne (i64.load (i32.const 512)) (i64.const 7)) (then unreachable))
    (i64.const 21)))`

func TestPollOneoffSleepsAndHonoursDeadline(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, sleeper))
	start := time.Now()
	if _, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("poll_oneoff returned after %v, want about 300ms", d)
	}
	_, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t", Limits: runtime.Limits{Timeout: 50 * time.Millisecond}})
	if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailTimeout {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

// TestEveryWASIFunctionIsServed imports the whole fixed WASI set, with the
// signatures abi.WASIFunctions gives, and instantiates the module: the host
// must serve each one with exactly that signature.
func TestEveryWASIFunctionIsServed(t *testing.T) {
	var imports strings.Builder
	for name, sig := range abi.WASIFunctions() {
		params, results, _ := strings.Cut(sig, " -> ")
		wat := func(list string) string {
			list = strings.Trim(list, "()")
			return strings.ReplaceAll(list, ",", "")
		}
		fmt.Fprintf(&imports, "(import %q %q (func (param %s) (result %s)))\n", abi.WASIModule, name, wat(params), wat(results))
	}
	src := `(module ` + imports.String() + `
	  (memory (export "memory") 1)
	  (data (i32.const 0) "{\"action\":\"continue\"}")
	  (func (export "hook_v1_handle") (param i32) (result i64) (i64.const 21)))`
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, src))
	if _, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
}
