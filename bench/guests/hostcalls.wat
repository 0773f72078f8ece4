;; A hook that makes N host calls to capability "noop" with payload {} and a
;; 64-byte reply buffer, then continues. The harness replaces the N below
;; (0 and 16) and compares the two: the difference is N round trips.
(module
  (import "hook_v1" "host_call" (func $host_call (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"action\":\"continue\"}")
  (data (i32.const 48) "noop")
  (data (i32.const 56) "{}")
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (local $i i32)
    (if (i32.gt_u (local.get $n) (i32.const 0xE000)) (then (return (i64.const 0))))
    (if (i64.ne (i64.shr_u
                  (call $host_call (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
                                   (i32.const 4096) (local.get $n))
                  (i64.const 32))
                (i64.const 0))
      (then (return (i64.const 0))))
    (block $done
      (loop $calls
        (br_if $done (i32.ge_u (local.get $i) (i32.const {{N}})))
        (if (i64.ne (i64.shr_u
                      (call $host_call (i32.const 48) (i32.const 4) (i32.const 56) (i32.const 2)
                                       (i32.const 1024) (i32.const 64))
                      (i64.const 32))
                    (i64.const 0))
          (then (return (i64.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $calls)))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 21))))
