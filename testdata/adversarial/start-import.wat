;; start-import.wat: the start function is an imported function, which panicked
;; wazero (#2474). No import in the allowed set has the () -> () type a start
;; function needs, so the import itself is refused first; validate.go also
;; refuses a start function that is an import. Expected: refused at load,
;; naming the import.
(module
  (import "env" "f" (func $f))
  (memory (export "memory") 1)
  (start $f)
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.const 0)))
