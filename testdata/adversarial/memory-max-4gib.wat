;; memory-max-4gib.wat: declares a maximum of 65536 pages (4 GiB) with a
;; minimum of 1, then asks for all of it with memory.grow. Expected: accepted at
;; load; memory is never allocated up front; the grow is refused (-1) past the
;; hook's limit and the hook says so: {"action":"block","reason":"refused"},
;; or "granted" if the grow succeeded.
(module
  (memory (export "memory") 1 65536)
  (data (i32.const 0x100) "{\"action\":\"block\",\"reason\":\"refused\"}")
  (data (i32.const 0x200) "{\"action\":\"block\",\"reason\":\"granted\"}")
  (func (export "hook_v1_handle") (param i32) (result i64)
    (if (i32.eq (memory.grow (i32.const 65535)) (i32.const -1))
      (then (return (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 37)))))
    (i64.or (i64.shl (i64.const 0x200) (i64.const 32)) (i64.const 37))))
