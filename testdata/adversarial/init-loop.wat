;; init-loop.wat: _initialize never returns. Expected: the instance is never
;; handed out; the invocation fails with timeout (InitTimeout) or, with fuel
;; metering, fuel_exhausted; nothing leaks.
(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0x100) "{\"action\":\"continue\"}")
  (func (export "_initialize") (loop $l (br $l)))
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 21))))
