;; hostile.wat: one hostile hook for the adversarial suite
;; (internal/adversarial). Like testdata/guests/scripted.wat it interprets a
;; script carried in its invocation, so each Go test provokes one attack
;; without a module per case; it adds the attacks scripted.wat does not make:
;; burning CPU, deep recursion, a loop-free exponential call tree, writing to
;; stdout/stderr, and state kept across invocations of one instance.
;;
;; The hook takes the invocation into memory at 0x20000, finds the marker "@@"
;; and interprets the characters after it until a byte it does not know
;; (normally the closing quote of the JSON string). Numbers are 8 hex digits.
;;   C p1 p2 p3 p4 p5 p6  host_call; logs the i64 result as 16 hex digits,
;;                        then, if the body was written (len <= p6), the body
;;                        as hex, then "."
;;   W addr len hex...    write len bytes (2 hex digits each) at addr
;;   F addr len byte      memory.fill len bytes of value byte at addr
;;   G pages              memory.grow; logs the i32 result as 16 hex digits, "."
;;   S addr               store one byte at addr (traps when out of bounds)
;;   U                    unreachable (trap)
;;   L                    loop forever
;;   B n                  a busy loop of n iterations
;;   R n                  recursion n calls deep (fat frames)
;;   X k                  the loop-free call tree from level k: t(i) calls
;;                        t(i+1) twice, t40 is a leaf, so 2^(41-k) calls
;;   P fd ptr len n       fd_write [ptr, ptr+len) to fd, n times
;;   M len chars...       remember the next len raw characters (the stash,
;;                        kept in memory and a global across invocations)
;;   Q                    log the stash as it is (raw characters) and "."
;;   I                    log how many invocations this instance served
;;                        (this one included) as 8 hex digits and "."
;;   O ptr len            return (ptr << 32) | len as the output
;;   Z                    return 0
;; At the end it returns {"action":"block","reason":"<log>"}.
;;
;; Memory (8 pages): scratch for tests below 0x10000 (the Go side uses 0x1000
;; for names, 0x2000 for payloads, 0x4000 for results); the stash at 0x10000;
;; an iovec at 0x11000; hex digits at 0x12000; the invocation at 0x20000 (at
;; most 0x20000 bytes); the output from 0x40000.
;;
;; Assembled by the tests with wabt's wat2wasm (internal/testutil.WAT).
(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 8)
  (type $void (func))
  (table 41 funcref)
  (elem (i32.const 0) $t0 $t1 $t2 $t3 $t4 $t5 $t6 $t7 $t8 $t9 $t10 $t11 $t12 $t13 $t14 $t15 $t16 $t17 $t18 $t19 $t20 $t21 $t22 $t23 $t24 $t25 $t26 $t27 $t28 $t29 $t30 $t31 $t32 $t33 $t34 $t35 $t36 $t37 $t38 $t39 $t40)
  (data (i32.const 0x12000) "0123456789abcdef")
  (data (i32.const 0x40000) "{\"action\":\"block\",\"reason\":\"")
  (global $pc (mut i32) (i32.const 0))
  (global $end (mut i32) (i32.const 0))
  (global $out (mut i32) (i32.const 0))
  (global $stashlen (mut i32) (i32.const 0))
  (global $served (mut i32) (i32.const 0))

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
    (call $emit (i32.load8_u (i32.add (i32.const 0x12000) (i32.shr_u (local.get $b) (i32.const 4)))))
    (call $emit (i32.load8_u (i32.add (i32.const 0x12000) (i32.and (local.get $b) (i32.const 15))))))

  (func $emit64 (param $v i64)
    (local $i i32)
    (local.set $i (i32.const 56))
    (loop $l
      (call $emitbyte (i32.wrap_i64 (i64.and (i64.shr_u (local.get $v) (i64.extend_i32_u (local.get $i))) (i64.const 255))))
      (if (i32.gt_s (local.get $i) (i32.const 0))
        (then (local.set $i (i32.sub (local.get $i) (i32.const 8))) (br $l)))))

  (func $emit32 (param $v i32)
    (call $emitbyte (i32.shr_u (local.get $v) (i32.const 24)))
    (call $emitbyte (i32.and (i32.shr_u (local.get $v) (i32.const 16)) (i32.const 255)))
    (call $emitbyte (i32.and (i32.shr_u (local.get $v) (i32.const 8)) (i32.const 255)))
    (call $emitbyte (i32.and (local.get $v) (i32.const 255))))

  ;; recursion with fat frames: the locals are live across the call
  (func $rec (param $n i32) (result i64)
    (local $a i64) (local $b i64) (local $c i64) (local $d i64)
    (local $e i64) (local $f i64) (local $g i64) (local $h i64)
    (if (i32.eqz (local.get $n)) (then (return (i64.const 0))))
    (local.set $a (i64.extend_i32_u (local.get $n)))
    (local.set $b (i64.add (local.get $a) (i64.const 1)))
    (local.set $c (i64.add (local.get $b) (i64.const 1)))
    (local.set $d (i64.add (local.get $c) (i64.const 1)))
    (local.set $e (i64.add (local.get $d) (i64.const 1)))
    (local.set $f (i64.add (local.get $e) (i64.const 1)))
    (local.set $g (i64.add (local.get $f) (i64.const 1)))
    (local.set $h (i64.add (local.get $g) (i64.const 1)))
    (i64.add
      (call $rec (i32.sub (local.get $n) (i32.const 1)))
      (i64.add (i64.add (i64.add (local.get $a) (local.get $b)) (i64.add (local.get $c) (local.get $d)))
               (i64.add (i64.add (local.get $e) (local.get $f)) (i64.add (local.get $g) (local.get $h))))))

;; the loop-free call tree: t(i) calls t(i+1) twice
  (func $t40)
  (func $t39 (call $t40) (call $t40))
  (func $t38 (call $t39) (call $t39))
  (func $t37 (call $t38) (call $t38))
  (func $t36 (call $t37) (call $t37))
  (func $t35 (call $t36) (call $t36))
  (func $t34 (call $t35) (call $t35))
  (func $t33 (call $t34) (call $t34))
  (func $t32 (call $t33) (call $t33))
  (func $t31 (call $t32) (call $t32))
  (func $t30 (call $t31) (call $t31))
  (func $t29 (call $t30) (call $t30))
  (func $t28 (call $t29) (call $t29))
  (func $t27 (call $t28) (call $t28))
  (func $t26 (call $t27) (call $t27))
  (func $t25 (call $t26) (call $t26))
  (func $t24 (call $t25) (call $t25))
  (func $t23 (call $t24) (call $t24))
  (func $t22 (call $t23) (call $t23))
  (func $t21 (call $t22) (call $t22))
  (func $t20 (call $t21) (call $t21))
  (func $t19 (call $t20) (call $t20))
  (func $t18 (call $t19) (call $t19))
  (func $t17 (call $t18) (call $t18))
  (func $t16 (call $t17) (call $t17))
  (func $t15 (call $t16) (call $t16))
  (func $t14 (call $t15) (call $t15))
  (func $t13 (call $t14) (call $t14))
  (func $t12 (call $t13) (call $t13))
  (func $t11 (call $t12) (call $t12))
  (func $t10 (call $t11) (call $t11))
  (func $t9 (call $t10) (call $t10))
  (func $t8 (call $t9) (call $t9))
  (func $t7 (call $t8) (call $t8))
  (func $t6 (call $t7) (call $t7))
  (func $t5 (call $t6) (call $t6))
  (func $t4 (call $t5) (call $t5))
  (func $t3 (call $t4) (call $t4))
  (func $t2 (call $t3) (call $t3))
  (func $t1 (call $t2) (call $t2))
  (func $t0 (call $t1) (call $t1))

  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (local $r i64) (local $op i32) (local $a i32) (local $b i32) (local $c i32) (local $i i32)
    (local $p1 i32) (local $p2 i32) (local $p3 i32) (local $p4 i32) (local $p5 i32) (local $p6 i32)
    (global.set $served (i32.add (global.get $served) (i32.const 1)))
    (if (i32.gt_u (local.get $n) (i32.const 0x20000)) (then (return (i64.const 0))))
    ;; take the invocation
    (local.set $r (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0x20000) (local.get $n)))
    (if (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))) (then (return (i64.const 0))))
    (global.set $out (i32.const 0x4001c))
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
        (if (i32.eq (local.get $op) (i32.const 70)) ;; F
          (then
            (local.set $a (call $u32)) (local.set $b (call $u32)) (local.set $c (call $hex (i32.const 2)))
            (memory.fill (local.get $a) (local.get $c) (local.get $b))
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
        (if (i32.eq (local.get $op) (i32.const 66)) ;; B
          (then
            (local.set $a (call $u32))
            (block $d
              (loop $l
                (br_if $d (i32.eqz (local.get $a)))
                (local.set $a (i32.sub (local.get $a) (i32.const 1)))
                (br $l)))
            (br $next)))
        (if (i32.eq (local.get $op) (i32.const 82)) ;; R
          (then (drop (call $rec (call $u32))) (br $next)))
        (if (i32.eq (local.get $op) (i32.const 88)) ;; X
          (then (call_indirect (type $void) (call $u32)) (br $next)))
        (if (i32.eq (local.get $op) (i32.const 80)) ;; P
          (then
            (local.set $p1 (call $u32)) (local.set $p2 (call $u32)) (local.set $p3 (call $u32)) (local.set $p4 (call $u32))
            (i32.store (i32.const 0x11000) (local.get $p2))
            (i32.store (i32.const 0x11004) (local.get $p3))
            (block $d
              (loop $l
                (br_if $d (i32.eqz (local.get $p4)))
                (drop (call $fd_write (local.get $p1) (i32.const 0x11000) (i32.const 1) (i32.const 0x11008)))
                (local.set $p4 (i32.sub (local.get $p4) (i32.const 1)))
                (br $l)))
            (br $next)))
        (if (i32.eq (local.get $op) (i32.const 77)) ;; M
          (then
            (local.set $b (call $u32))
            (memory.copy (i32.const 0x10000) (global.get $pc) (local.get $b))
            (global.set $pc (i32.add (global.get $pc) (local.get $b)))
            (global.set $stashlen (local.get $b))
            (br $next)))
        (if (i32.eq (local.get $op) (i32.const 81)) ;; Q
          (then
            (memory.copy (global.get $out) (i32.const 0x10000) (global.get $stashlen))
            (global.set $out (i32.add (global.get $out) (global.get $stashlen)))
            (call $emit (i32.const 46))
            (br $next)))
        (if (i32.eq (local.get $op) (i32.const 73)) ;; I
          (then (call $emit32 (global.get $served)) (call $emit (i32.const 46)) (br $next)))
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
    (i64.or (i64.shl (i64.const 0x40000) (i64.const 32))
            (i64.extend_i32_u (i32.sub (global.get $out) (i32.const 0x40000)))))
)
