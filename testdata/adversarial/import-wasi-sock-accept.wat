;; import-wasi-sock-accept.wat: imports a WASI function outside the fixed set
;; (sockets). Expected: refused at load, naming the import.
(module
  (import "wasi_snapshot_preview1" "sock_accept" (func (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 21))))
