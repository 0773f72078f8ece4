;; import-env-abort.wat: imports env.abort (AssemblyScript's default).
;; Expected: refused at load, naming the import.
(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (import "env" "abort" (func (param i32 i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 21))))
