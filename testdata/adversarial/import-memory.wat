;; import-memory.wat: imports its memory from the host instead of defining it.
;; Expected: refused at load, naming the import.
(module
  (import "env" "memory" (memory 1))
  (export "memory" (memory 0))
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 21))))
