;; scripted.wat: a hook written by hand against ABI.md, driven by a script the
;; test puts in the invocation. It lets tests provoke every host_call status and
;; every failure from Go without writing one module per case.
;;
;; The hook takes the invocation into memory at 0x20000, finds the marker "@@"
;; and interprets the characters after it until a byte it does not know
;; (normally the closing quote of the JSON string):
;;   C p1 p2 p3 p4 p5 p6  host_call with six u32 (8 hex digits each); logs the
;;                        i64 result as 16 hex digits, then, if the body was
;;                        written (len <= p6), the body as hex, then "."
;;   W addr len hex...    write len bytes (2 hex digits each) at addr
;;   G pages              memory.grow; logs the i32 result as 16 hex digits and "."
;;   S addr               store one byte at addr (traps when out of bounds)
;;   U                    unreachable (trap)
;;   L                    loop forever
;;   O ptr len            return (ptr << 32) | len as the output
;;   Z                    return 0
;; At the end it returns {"action":"block","reason":"<log>"}.
;;
;; Build: wat2wasm scripted.wat -o scripted.wasm
(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 4)
  (data (i32.const 0x37f00) "0123456789abcdef")
  (data (i32.const 0x38000) "{\"action\":\"block\",\"reason\":\"")
  (global $pc (mut i32) (i32.const 0))
  (global $end (mut i32) (i32.const 0))
  (global $out (mut i32) (i32.const 0))

  (func $hexval (param $c i32) (result i32)
    (if (result i32) (i32.le_u (local.get $c) (i32.const 57))
      (then (i32.sub (local.get $c) (i32.const 48)))
      (else (i32.sub (i32.or (local.get $c) (i32.const 0x20)) (i32.const 87)))))

  (func $hex (param $n i32) (result i32)
    (local $v i32)
    (block $done
      (loop $l
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $v (i32.or (i32.shl (local.get $v) (i32.const 4))
                              (call $hexval (i32.load8_u (global.get $pc)))))
        (global.set $pc (i32.add (global.get $pc) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $l)))
    (local.get $v))

  (func $u32 (result i32) (call $hex (i32.const 8)))

  (func $emit (param $c i32)
    (i32.store8 (global.get $out) (local.get $c))
    (global.set $out (i32.add (global.get $out) (i32.const 1))))

  (func $emitbyte (param $b i32)
    (call $emit (i32.load8_u (i32.add (i32.const 0x37f00) (i32.shr_u (local.get $b) (i32.const 4)))))
    (call $emit (i32.load8_u (i32.add (i32.const 0x37f00) (i32.and (local.get $b) (i32.const 15))))))

  (func $emit64 (param $v i64)
    (local $i i32)
    (local.set $i (i32.const 56))
    (loop $l
      (call $emitbyte (i32.wrap_i64 (i64.and (i64.shr_u (local.get $v) (i64.extend_i32_u (local.get $i))) (i64.const 255))))
      (if (i32.gt_s (local.get $i) (i32.const 0))
        (then (local.set $i (i32.sub (local.get $i) (i32.const 8))) (br $l)))))

  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (local $r i64) (local $op i32) (local $a i32) (local $b i32) (local $i i32)
    (local $p1 i32) (local $p2 i32) (local $p3 i32) (local $p4 i32) (local $p5 i32) (local $p6 i32)
    (if (i32.gt_u (local.get $n) (i32.const 0x18000)) (then (return (i64.const 0))))
    ;; take the invocation
    (local.set $r (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0x20000) (local.get $n)))
    (if (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))) (then (return (i64.const 0))))
    (global.set $out (i32.const 0x3801c))
    (global.set $end (i32.add (i32.const 0x20000) (local.get $n)))
    (global.set $pc (i32.const 0x20000))
    (block $found
      (loop $scan
        (if (i32.ge_u (i32.add (global.get $pc) (i32.const 1)) (global.get $end)) (then (return (i64.const 0))))
        (br_if $found (i32.eq (i32.load16_u (global.get $pc)) (i32.const 0x4040)))
        (global.set $pc (i32.add (global.get $pc) (i32.const 1)))
        (br $scan)))
    (global.set $pc (i32.add (global.get $pc) (i32.const 2)))
    (block $stop
      (loop $next
        (br_if $stop (i32.ge_u (global.get $pc) (global.get $end)))
        (local.set $op (i32.load8_u (global.get $pc)))
        (global.set $pc (i32.add (global.get $pc) (i32.const 1)))
        (if (i32.eq (local.get $op) (i32.const 67)) ;; C
          (then
            (local.set $p1 (call $u32)) (local.set $p2 (call $u32)) (local.set $p3 (call $u32))
            (local.set $p4 (call $u32)) (local.set $p5 (call $u32)) (local.set $p6 (call $u32))
            (local.set $r (call $hc (local.get $p1) (local.get $p2) (local.get $p3)
                                    (local.get $p4) (local.get $p5) (local.get $p6)))
            (call $emit64 (local.get $r))
            (local.set $a (i32.wrap_i64 (local.get $r)))
            (if (i32.le_u (local.get $a) (local.get $p6))
              (then
                (local.set $i (i32.const 0))
                (block $d
                  (loop $l
                    (br_if $d (i32.ge_u (local.get $i) (local.get $a)))
                    (call $emitbyte (i32.load8_u (i32.add (local.get $p5) (local.get $i))))
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br $l)))))
            (call $emit (i32.const 46))
            (br $next)))
        (if (i32.eq (local.get $op) (i32.const 87)) ;; W
          (then
            (local.set $a (call $u32)) (local.set $b (call $u32))
            (local.set $i (i32.const 0))
            (block $d
              (loop $l
                (br_if $d (i32.ge_u (local.get $i) (local.get $b)))
                (i32.store8 (i32.add (local.get $a) (local.get $i)) (call $hex (i32.const 2)))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $l)))
            (br $next)))
        (if (i32.eq (local.get $op) (i32.const 71)) ;; G
          (then
            (call $emit64 (i64.extend_i32_s (memory.grow (call $u32))))
            (call $emit (i32.const 46))
            (br $next)))
        (if (i32.eq (local.get $op) (i32.const 83)) ;; S
          (then (i32.store8 (call $u32) (i32.const 1)) (br $next)))
        (if (i32.eq (local.get $op) (i32.const 85)) ;; U
          (then unreachable))
        (if (i32.eq (local.get $op) (i32.const 76)) ;; L
          (then (loop $forever (br $forever))))
        (if (i32.eq (local.get $op) (i32.const 79)) ;; O
          (then
            (local.set $a (call $u32)) (local.set $b (call $u32))
            (return (i64.or (i64.shl (i64.extend_i32_u (local.get $a)) (i64.const 32))
                            (i64.extend_i32_u (local.get $b))))))
        (if (i32.eq (local.get $op) (i32.const 90)) ;; Z
          (then (return (i64.const 0))))
        (br $stop)))
    (call $emit (i32.const 34))
    (call $emit (i32.const 125))
    (i64.or (i64.shl (i64.const 0x38000) (i64.const 32))
            (i64.extend_i32_u (i32.sub (global.get $out) (i32.const 0x38000)))))
)
