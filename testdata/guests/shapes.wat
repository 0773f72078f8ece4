;; shapes.wat: a hook hand-written in WAT against ABI.md alone (no SDK). It
;; returns each of the four decision shapes the host accepts, chosen by its
;; settings: {"shape": "canonical" | "top-level" | "outcome" | "legacy"}.
;; Without the setting it returns {"action":"continue"}.
;;
;; Build: wat2wasm shapes.wat -o shapes.wasm
(module
  (import "hook_v1" "host_call" (func $host_call (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 2)
  ;; the key to look for, 9 bytes
  (data (i32.const 0x100) "\"shape\":\"")
  (data (i32.const 0x200) "{\"action\":\"continue\"}")                                              ;; 21
  (data (i32.const 0x300) "{\"action\":\"modify\",\"context\":{\"outgoing\":\"[canonical]\"},\"reason\":\"wat\"}") ;; 71
  (data (i32.const 0x400) "{\"action\":\"modify\",\"outgoing\":\"[top-level]\"}")                    ;; 44
  (data (i32.const 0x500) "{\"abort\":false,\"decision\":\"transform\",\"transformed_body\":\"[outcome]\",\"reason\":\"wat\"}") ;; 84
  (data (i32.const 0x600) "{\"abort\":true,\"reason\":\"legacy block\"}")                            ;; 38

  (func $match (param $p i32) (result i32)
    (local $i i32)
    (block $no
      (loop $l
        (br_if $no (i32.ne (i32.load8_u (i32.add (local.get $p) (local.get $i)))
                           (i32.load8_u (i32.add (i32.const 0x100) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $l (i32.lt_u (local.get $i) (i32.const 9)))
        (return (i32.const 1))))
    (i32.const 0))

  (func (export "hook_v1_handle") (param $in_len i32) (result i64)
    (local $p i32) (local $end i32) (local $c i32)
    (if (i32.gt_u (local.get $in_len) (i32.const 0xF000)) (then (return (i64.const 0))))
    ;; take the invocation into 0x1000
    (if (i64.ne (i64.shr_u (call $host_call (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
                                            (i32.const 0x1000) (local.get $in_len))
                           (i64.const 32))
                (i64.const 0))
      (then (return (i64.const 0))))
    (local.set $p (i32.const 0x1000))
    (local.set $end (i32.sub (i32.add (i32.const 0x1000) (local.get $in_len)) (i32.const 10)))
    (block $found
      (loop $scan
        (if (i32.gt_s (local.get $p) (local.get $end))
          (then (return (i64.or (i64.shl (i64.const 0x200) (i64.const 32)) (i64.const 21)))))
        (br_if $found (call $match (local.get $p)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $scan)))
    (local.set $c (i32.load8_u (i32.add (local.get $p) (i32.const 9))))
    (if (i32.eq (local.get $c) (i32.const 99)) ;; c
      (then (return (i64.or (i64.shl (i64.const 0x300) (i64.const 32)) (i64.const 71)))))
    (if (i32.eq (local.get $c) (i32.const 116)) ;; t
      (then (return (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 44)))))
    (if (i32.eq (local.get $c) (i32.const 111)) ;; o
      (then (return (i64.or (i64.shl (i64.const 0x500) (i64.const 32)) (i64.const 84)))))
    (if (i32.eq (local.get $c) (i32.const 108)) ;; l
      (then (return (i64.or (i64.shl (i64.const 0x600) (i64.const 32)) (i64.const 38)))))
    ;; unknown shape: return 0, a hook failure
    (i64.const 0))
)
