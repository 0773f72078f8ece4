;; feature-memory64.wat: a 64-bit memory (memory64). Expected: refused at load.
(module
  (memory (export "memory") i64 1)
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.const 0)))
