;; The empty hook on wasmhooks' ABI: it takes its input (as a hook that looks
;; at it must) and continues. It is the floor of one invocation.
(module
  (import "hook_v1" "host_call" (func $host_call (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"action\":\"continue\"}")
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (local $pages i32)
    (if (i32.gt_u (local.get $n) (i32.const 0x1000000)) (then (return (i64.const 0))))
    (local.set $pages (i32.shr_u (i32.add (i32.add (i32.const 1024) (local.get $n)) (i32.const 0xFFFF)) (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
          (then (return (i64.const 0))))))
    (if (i64.ne (i64.shr_u
                  (call $host_call (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
                                   (i32.const 1024) (local.get $n))
                  (i64.const 32))
                (i64.const 0))
      (then (return (i64.const 0))))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 21))))
