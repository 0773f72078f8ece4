;; import-host-call-wrong-signature.wat: imports hook_v1.host_call with four
;; parameters instead of six. Expected: refused at load, naming the import.
(module
  (import "hook_v1" "host_call" (func (param i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 21))))
