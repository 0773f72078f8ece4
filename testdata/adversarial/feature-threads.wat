;; feature-threads.wat: a shared memory and an atomic instruction (threads).
;; Expected: refused at load (threads are not supported).
(module
  (memory (export "memory") 1 1 shared)
  (func (export "hook_v1_handle") (param i32) (result i64)
    (drop (i32.atomic.rmw.add (i32.const 0) (i32.const 1)))
    (i64.const 0)))
