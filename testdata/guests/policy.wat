;; policy.wat: a hook written by hand against ABI.md alone, whose behaviour is
;; chosen by its settings. The chain's tests and the demo use it; it reads the
;; compact, key-sorted invocation the host sends (ABI.md) with plain byte
;; searches, so it is a test guest, not a JSON parser.
;;
;; Settings (each optional):
;;   "log": "text"           write the text (JSON escapes \n \t \" \\ \/ \u00XX
;;                           decoded) and a newline to stdout first
;;   "when": "text"          act only if the text occurs in the invocation
;;                           before the settings (its context); else continue
;;   "decide": {...}         return this object, verbatim, as the decision
;;   "field": "f",           return {"action":"modify","context":{"f": V+A}}
;;   "append": "A"           where V is the string value of "f" in the context
;;                           ("" if there is none)
;; With none of decide/field it returns {"action":"continue"}.
;;
;; Build: wat2wasm policy.wat -o policy.wasm
(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)

  (data (i32.const 0x100) "\"settings\":{")                      ;; 12
  (data (i32.const 0x120) "\"decide\":")                         ;; 9
  (data (i32.const 0x140) "\"when\":\"")                         ;; 8
  (data (i32.const 0x160) "\"field\":\"")                        ;; 9
  (data (i32.const 0x180) "\"append\":\"")                       ;; 10
  (data (i32.const 0x1a0) "\"log\":\"")                          ;; 7
  (data (i32.const 0x200) "{\"action\":\"continue\"}")           ;; 21
  (data (i32.const 0x240) "{\"action\":\"modify\",\"context\":{\"") ;; 31
  (data (i32.const 0x280) "\":\"")                               ;; 3
  (data (i32.const 0x290) "\"}}")                                ;; 3
  (data (i32.const 0x2a0) "0123456789abcdef")

  ;; memeq compares n bytes at a and b.
  (func $memeq (param $a i32) (param $b i32) (param $n i32) (result i32)
    (local $i i32)
    (block $no
      (loop $l
        (if (i32.ge_u (local.get $i) (local.get $n)) (then (return (i32.const 1))))
        (br_if $no (i32.ne (i32.load8_u (i32.add (local.get $a) (local.get $i)))
                           (i32.load8_u (i32.add (local.get $b) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (i32.const 0))

  ;; find returns the first index in [start, end) where the n-byte needle
  ;; starts, or -1.
  (func $find (param $start i32) (param $end i32) (param $needle i32) (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (local.get $start))
    (block $no
      (loop $l
        (br_if $no (i32.gt_s (i32.add (local.get $p) (local.get $n)) (local.get $end)))
        (if (call $memeq (local.get $p) (local.get $needle) (local.get $n)) (then (return (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $l)))
    (i32.const -1))

  ;; rfind is find from the end.
  (func $rfind (param $start i32) (param $end i32) (param $needle i32) (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (i32.sub (local.get $end) (local.get $n)))
    (block $no
      (loop $l
        (br_if $no (i32.lt_s (local.get $p) (local.get $start)))
        (if (call $memeq (local.get $p) (local.get $needle) (local.get $n)) (then (return (local.get $p))))
        (local.set $p (i32.sub (local.get $p) (i32.const 1)))
        (br $l)))
    (i32.const -1))

  ;; strend returns the index of the quote closing the JSON string whose
  ;; content starts at p (or end).
  (func $strend (param $p i32) (param $end i32) (result i32)
    (local $c i32)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $p)))
        (br_if $done (i32.eq (local.get $c) (i32.const 34)))
        (if (i32.eq (local.get $c) (i32.const 92))
          (then (local.set $p (i32.add (local.get $p) (i32.const 1)))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $l)))
    (local.get $p))

  ;; objend returns the index just after the object or array starting at p.
  (func $objend (param $p i32) (param $end i32) (result i32)
    (local $depth i32) (local $c i32)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $p)))
        (if (i32.eq (local.get $c) (i32.const 34))
          (then (local.set $p (call $strend (i32.add (local.get $p) (i32.const 1)) (local.get $end)))))
        (if (i32.or (i32.eq (local.get $c) (i32.const 123)) (i32.eq (local.get $c) (i32.const 91)))
          (then (local.set $depth (i32.add (local.get $depth) (i32.const 1)))))
        (if (i32.or (i32.eq (local.get $c) (i32.const 125)) (i32.eq (local.get $c) (i32.const 93)))
          (then
            (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))
            (if (i32.eqz (local.get $depth)) (then (return (i32.add (local.get $p) (i32.const 1)))))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $l)))
    (local.get $p))

  ;; copy copies n bytes from src to dst and returns dst + n.
  (func $copy (param $dst i32) (param $src i32) (param $n i32) (result i32)
    (local $i i32)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (i32.store8 (i32.add (local.get $dst) (local.get $i)) (i32.load8_u (i32.add (local.get $src) (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (i32.add (local.get $dst) (local.get $n)))

  (func $hexval (param $c i32) (result i32)
    (if (result i32) (i32.le_u (local.get $c) (i32.const 57))
      (then (i32.sub (local.get $c) (i32.const 48)))
      (else (i32.sub (i32.or (local.get $c) (i32.const 0x20)) (i32.const 87)))))

  ;; unescape decodes the JSON string content [src, end) into dst and returns
  ;; the end of what it wrote. \uXXXX above 0xFF becomes '?'.
  (func $unescape (param $dst i32) (param $src i32) (param $end i32) (result i32)
    (local $c i32) (local $v i32)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $src) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $src)))
        (local.set $src (i32.add (local.get $src) (i32.const 1)))
        (if (i32.eq (local.get $c) (i32.const 92))
          (then
            (local.set $c (i32.load8_u (local.get $src)))
            (local.set $src (i32.add (local.get $src) (i32.const 1)))
            (if (i32.eq (local.get $c) (i32.const 110)) (then (local.set $c (i32.const 10))))
            (if (i32.eq (local.get $c) (i32.const 116)) (then (local.set $c (i32.const 9))))
            (if (i32.eq (local.get $c) (i32.const 114)) (then (local.set $c (i32.const 13))))
            (if (i32.eq (local.get $c) (i32.const 117))
              (then
                (local.set $v (i32.or (i32.or
                    (i32.shl (call $hexval (i32.load8_u (local.get $src))) (i32.const 12))
                    (i32.shl (call $hexval (i32.load8_u (i32.add (local.get $src) (i32.const 1)))) (i32.const 8)))
                  (i32.or
                    (i32.shl (call $hexval (i32.load8_u (i32.add (local.get $src) (i32.const 2)))) (i32.const 4))
                    (call $hexval (i32.load8_u (i32.add (local.get $src) (i32.const 3)))))))
                (local.set $src (i32.add (local.get $src) (i32.const 4)))
                (local.set $c (select (local.get $v) (i32.const 63) (i32.le_u (local.get $v) (i32.const 0xFF))))))))
        (i32.store8 (local.get $dst) (local.get $c))
        (local.set $dst (i32.add (local.get $dst) (i32.const 1)))
        (br $l)))
    (local.get $dst))

  ;; strarg finds the string setting whose key needle is at k (n bytes) in
  ;; [s, end) and stores its content's start at 0x3020 and end at 0x3024.
  ;; It returns 0 when the setting is absent.
  (func $strarg (param $s i32) (param $end i32) (param $k i32) (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (call $find (local.get $s) (local.get $end) (local.get $k) (local.get $n)))
    (if (i32.lt_s (local.get $p) (i32.const 0)) (then (return (i32.const 0))))
    (local.set $p (i32.add (local.get $p) (local.get $n)))
    (i32.store (i32.const 0x3020) (local.get $p))
    (i32.store (i32.const 0x3024) (call $strend (local.get $p) (local.get $end)))
    (i32.const 1))

  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (local $in i32) (local $end i32) (local $s i32) (local $p i32) (local $q i32)
    (local $out i32) (local $o i32) (local $need i32)
    (local $f i32) (local $fend i32) (local $a i32) (local $aend i32) (local $v i32) (local $vend i32)
    (if (i32.gt_u (local.get $n) (i32.const 0x1000000)) (then (return (i64.const 0))))
    (local.set $in (i32.const 0x10000))
    (local.set $end (i32.add (local.get $in) (local.get $n)))
    ;; room for the input, a log line and an output, each at most n + 256
    (local.set $need (i32.shr_u (i32.add (i32.add (local.get $in) (i32.mul (local.get $n) (i32.const 3))) (i32.const 0x10FFF))
                                (i32.const 16)))
    (if (i32.gt_u (local.get $need) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $need) (memory.size))) (i32.const -1))
          (then (return (i64.const 0))))))
    (if (i32.wrap_i64 (i64.shr_u (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
                                           (local.get $in) (local.get $n))
                                 (i64.const 32)))
      (then (return (i64.const 0))))
    (local.set $out (i32.add (local.get $end) (i32.const 16)))

    ;; the settings start at the last "settings":{
    (local.set $s (call $rfind (local.get $in) (local.get $end) (i32.const 0x100) (i32.const 12)))
    (if (i32.lt_s (local.get $s) (i32.const 0)) (then (local.set $s (local.get $in))))

    ;; log
    (if (call $strarg (local.get $s) (local.get $end) (i32.const 0x1a0) (i32.const 7))
      (then
        (local.set $o (call $unescape (local.get $out) (i32.load (i32.const 0x3020)) (i32.load (i32.const 0x3024))))
        (i32.store8 (local.get $o) (i32.const 10))
        (i32.store (i32.const 0x3000) (local.get $out))
        (i32.store (i32.const 0x3004) (i32.add (i32.sub (local.get $o) (local.get $out)) (i32.const 1)))
        (drop (call $fd_write (i32.const 1) (i32.const 0x3000) (i32.const 1) (i32.const 0x3010)))))

    ;; when
    (if (call $strarg (local.get $s) (local.get $end) (i32.const 0x140) (i32.const 8))
      (then
        (local.set $p (i32.load (i32.const 0x3020)))
        (local.set $q (i32.load (i32.const 0x3024)))
        (if (i32.lt_s (call $find (local.get $in) (local.get $s) (local.get $p) (i32.sub (local.get $q) (local.get $p))) (i32.const 0))
          (then (return (i64.or (i64.shl (i64.const 0x200) (i64.const 32)) (i64.const 21)))))))

    ;; decide
    (local.set $p (call $find (local.get $s) (local.get $end) (i32.const 0x120) (i32.const 9)))
    (if (i32.ge_s (local.get $p) (i32.const 0))
      (then
        (local.set $p (i32.add (local.get $p) (i32.const 9)))
        (local.set $q (call $objend (local.get $p) (local.get $end)))
        (return (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
                        (i64.extend_i32_u (i32.sub (local.get $q) (local.get $p)))))))

    ;; field + append
    (if (call $strarg (local.get $s) (local.get $end) (i32.const 0x160) (i32.const 9))
      (then
        (local.set $f (i32.load (i32.const 0x3020)))
        (local.set $fend (i32.load (i32.const 0x3024)))
        (local.set $a (i32.const 0)) (local.set $aend (i32.const 0))
        (if (call $strarg (local.get $s) (local.get $end) (i32.const 0x180) (i32.const 10))
          (then
            (local.set $a (i32.load (i32.const 0x3020)))
            (local.set $aend (i32.load (i32.const 0x3024)))))
        ;; the needle "f":" is built at the output area, then overwritten
        (local.set $o (local.get $out))
        (i32.store8 (local.get $o) (i32.const 34))
        (local.set $o (call $copy (i32.add (local.get $o) (i32.const 1)) (local.get $f) (i32.sub (local.get $fend) (local.get $f))))
        (local.set $o (call $copy (local.get $o) (i32.const 0x280) (i32.const 3)))
        (local.set $v (call $find (local.get $in) (local.get $s) (local.get $out) (i32.sub (local.get $o) (local.get $out))))
        (local.set $vend (local.get $v))
        (if (i32.ge_s (local.get $v) (i32.const 0))
          (then
            (local.set $v (i32.add (local.get $v) (i32.sub (local.get $o) (local.get $out))))
            (local.set $vend (call $strend (local.get $v) (local.get $s)))))
        (local.set $o (call $copy (local.get $out) (i32.const 0x240) (i32.const 31)))
        (local.set $o (call $copy (local.get $o) (local.get $f) (i32.sub (local.get $fend) (local.get $f))))
        (local.set $o (call $copy (local.get $o) (i32.const 0x280) (i32.const 3)))
        (local.set $o (call $copy (local.get $o) (local.get $v) (i32.sub (local.get $vend) (local.get $v))))
        (local.set $o (call $copy (local.get $o) (local.get $a) (i32.sub (local.get $aend) (local.get $a))))
        (local.set $o (call $copy (local.get $o) (i32.const 0x290) (i32.const 3)))
        (return (i64.or (i64.shl (i64.extend_i32_u (local.get $out)) (i64.const 32))
                        (i64.extend_i32_u (i32.sub (local.get $o) (local.get $out)))))))

    (i64.or (i64.shl (i64.const 0x200) (i64.const 32)) (i64.const 21)))
)
