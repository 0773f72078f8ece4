;; start-loop.wat: a start function (the start section, run by
;; instantiation itself) that never returns. Expected: as init-loop.wat.
(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0x100) "{\"action\":\"continue\"}")
  (func $spin (loop $l (br $l)))
  (start $spin)
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 21))))
