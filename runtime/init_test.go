package runtime_test

import (
	"context"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// initCaller calls host_call from _initialize, keeps the result, and reports
// it from hook_v1_handle as {"action":"block","reason":"<16 hex digits>"}.
const initCaller = `(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "echo")
  (data (i32.const 16) "{}")
  (data (i32.const 512) "0123456789abcdef")
  (data (i32.const 1024) "{\"action\":\"block\",\"reason\":\"")
  (global $r (mut i64) (i64.const 0))
  (func (export "_initialize")
    (global.set $r (call $hc (i32.const 0) (i32.const 4) (i32.const 16) (i32.const 2) (i32.const 256) (i32.const 200))))
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (local $i i32)
    (loop $l
      (i32.store8 (i32.add (i32.const 1052) (local.get $i))
        (i32.load8_u (i32.add (i32.const 512)
          (i32.wrap_i64 (i64.and (i64.shr_u (global.get $r) (i64.extend_i32_u (i32.sub (i32.const 60) (i32.mul (local.get $i) (i32.const 4))))) (i64.const 15))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 16))))
    (i32.store16 (i32.const 1068) (i32.const 0x7d22))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 46))))`

func TestHostCallFromInitialize(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, initCaller))
	host := echoHost()
	res, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t", HostCaller: host})
	if err != nil {
		t.Fatal(err)
	}
	got := parseLog(t, res.Decision.Reason)
	if len(got) != 1 || got[0].status != abi.StatusNotInInvocation {
		t.Fatalf("host_call from _initialize returned %+v, want NOT_IN_INVOCATION", got)
	}
	if n := len(host.Calls()); n != 0 {
		t.Errorf("the capability ran %d times from _initialize", n)
	}
}
