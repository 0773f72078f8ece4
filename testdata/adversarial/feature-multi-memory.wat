;; feature-multi-memory.wat: two memories (multi-memory). Expected: refused at
;; load.
(module
  (memory (export "memory") 1)
  (memory $second 1)
  (func (export "hook_v1_handle") (param i32) (result i64)
    (i32.store $second (i32.const 0) (i32.const 1))
    (i64.const 0)))
