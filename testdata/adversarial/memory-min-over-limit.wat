;; memory-min-over-limit.wat: declares a minimum of 5000 pages (312.5 MiB), over
;; the runtime's ceiling of 4096. Expected: refused at load (memory_min_pages).
(module
  (memory (export "memory") 5000)
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 21))))
