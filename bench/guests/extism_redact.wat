;; The 1 KiB redaction as a hand-written Extism plugin, against the kernel
;; ABI of extism:host/env (research 1.4) as a PDK uses it: the input is
;; copied from kernel memory 8 bytes per input_load_u64 call (then bytes),
;; the output is copied into a kernel block from alloc with store_u64 /
;; store_u8 and handed over with output_set. The redaction itself, between
;; BEGIN SHARED and END SHARED, is byte-identical to redact.wat's.
;;
;; Exports: "redact" (the benchmark) and "noop" (the empty plugin).
(module
  (import "extism:host/env" "input_length"   (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (import "extism:host/env" "input_load_u8"  (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "alloc"          (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u64"      (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "store_u8"       (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set"     (func $output_set (param i64 i64)))
  (memory (export "memory") 2)

  ;; BEGIN SHARED
  (data (i32.const 0) "\"outgoing\":\"")                                  ;; 12 bytes
  (data (i32.const 16) "{\"action\":\"continue\"}")                       ;; 21 bytes
  (data (i32.const 64) "{\"action\":\"modify\",\"context\":{\"outgoing\":\"") ;; 42 bytes
  (data (i32.const 128) "\"},\"reason\":\"redacted ")                     ;; 22 bytes
  (data (i32.const 160) " secret\"}")                                     ;; 9 bytes
  (data (i32.const 176) " secrets\"}")                                    ;; 10 bytes
  (data (i32.const 192) "[REDACTED]")                                     ;; 10 bytes

  ;; $grow_to makes memory at least $end bytes; 0 if it cannot.
  (func $grow_to (param $end i32) (result i32)
    (local $pages i32)
    (local.set $pages (i32.shr_u (i32.add (local.get $end) (i32.const 0xFFFF)) (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
          (then (return (i32.const 0))))))
    (i32.const 1))

  ;; $find returns the address of the first occurrence in [$p, $end) of the
  ;; $nl bytes at $n, or -1.
  (func $find (param $p i32) (param $end i32) (param $n i32) (param $nl i32) (result i32)
    (local $j i32)
    (block $none
      (loop $outer
        (br_if $none (i32.gt_u (i32.add (local.get $p) (local.get $nl)) (local.get $end)))
        (local.set $j (i32.const 0))
        (block $miss
          (loop $inner
            (br_if $miss (i32.ne (i32.load8_u (i32.add (local.get $p) (local.get $j)))
                                 (i32.load8_u (i32.add (local.get $n) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br_if $inner (i32.lt_u (local.get $j) (local.get $nl))))
          (return (local.get $p)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $outer)))
    (i32.const -1))

  ;; $secret reports whether the 20 bytes at $p are "AKIA" + 16 [0-9A-Z].
  (func $secret (param $p i32) (result i32)
    (local $k i32) (local $c i32)
    (if (i32.ne (i32.load (local.get $p)) (i32.const 0x41494B41)) ;; "AKIA", little-endian
      (then (return (i32.const 0))))
    (local.set $k (i32.const 4))
    (loop $l
      (local.set $c (i32.load8_u (i32.add (local.get $p) (local.get $k))))
      (if (i32.and (i32.ge_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 10))   ;; not 0-9
                   (i32.ge_u (i32.sub (local.get $c) (i32.const 65)) (i32.const 26)))  ;; not A-Z
        (then (return (i32.const 0))))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $k) (i32.const 20))))
    (i32.const 1))

  ;; $itoa writes $n (> 0) in decimal at $o and returns the end.
  (func $itoa (param $o i32) (param $n i32) (result i32)
    (local $len i32) (local $t i32)
    (local.set $t (local.get $n))
    (loop $count
      (local.set $len (i32.add (local.get $len) (i32.const 1)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $count (i32.ne (local.get $t) (i32.const 0))))
    (local.set $t (local.get $len))
    (loop $write
      (local.set $t (i32.sub (local.get $t) (i32.const 1)))
      (i32.store8 (i32.add (local.get $o) (local.get $t))
                  (i32.add (i32.const 48) (i32.rem_u (local.get $n) (i32.const 10))))
      (local.set $n (i32.div_u (local.get $n) (i32.const 10)))
      (br_if $write (i32.ne (local.get $t) (i32.const 0))))
    (i32.add (local.get $o) (local.get $len)))

  ;; $redact reads the invocation document in [$src, $end), writes the
  ;; decision at $dst (at most $end - $src + 128 bytes) and returns its
  ;; length, or -1 if the document has no string "outgoing".
  (func $redact (param $src i32) (param $end i32) (param $dst i32) (result i32)
    (local $i i32) (local $o i32) (local $c i32) (local $count i32)
    (local.set $i (call $find (local.get $src) (local.get $end) (i32.const 0) (i32.const 12)))
    (if (i32.lt_s (local.get $i) (i32.const 0)) (then (return (i32.const -1))))
    (local.set $i (i32.add (local.get $i) (i32.const 12)))
    (memory.copy (local.get $dst) (i32.const 64) (i32.const 42))
    (local.set $o (i32.add (local.get $dst) (i32.const 42)))
    (block $done
      (loop $scan
        (if (i32.ge_u (local.get $i) (local.get $end)) (then (return (i32.const -1))))
        (local.set $c (i32.load8_u (local.get $i)))
        (br_if $done (i32.eq (local.get $c) (i32.const 34))) ;; closing quote
        (if (i32.eq (local.get $c) (i32.const 92)) ;; backslash: copy the escape pair
          (then
            (if (i32.ge_u (i32.add (local.get $i) (i32.const 1)) (local.get $end)) (then (return (i32.const -1))))
            (i32.store16 (local.get $o) (i32.load16_u (local.get $i)))
            (local.set $o (i32.add (local.get $o) (i32.const 2)))
            (local.set $i (i32.add (local.get $i) (i32.const 2)))
            (br $scan)))
        (if (i32.eq (local.get $c) (i32.const 65)) ;; 'A'
          (then
            (if (i32.le_u (i32.add (local.get $i) (i32.const 20)) (local.get $end))
              (then
                (if (call $secret (local.get $i))
                  (then
                    (memory.copy (local.get $o) (i32.const 192) (i32.const 10))
                    (local.set $o (i32.add (local.get $o) (i32.const 10)))
                    (local.set $i (i32.add (local.get $i) (i32.const 20)))
                    (local.set $count (i32.add (local.get $count) (i32.const 1)))
                    (br $scan)))))))
        (i32.store8 (local.get $o) (local.get $c))
        (local.set $o (i32.add (local.get $o) (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (if (i32.eqz (local.get $count))
      (then
        (memory.copy (local.get $dst) (i32.const 16) (i32.const 21))
        (return (i32.const 21))))
    (memory.copy (local.get $o) (i32.const 128) (i32.const 22))
    (local.set $o (call $itoa (i32.add (local.get $o) (i32.const 22)) (local.get $count)))
    (if (i32.eq (local.get $count) (i32.const 1))
      (then
        (memory.copy (local.get $o) (i32.const 160) (i32.const 9))
        (local.set $o (i32.add (local.get $o) (i32.const 9))))
      (else
        (memory.copy (local.get $o) (i32.const 176) (i32.const 10))
        (local.set $o (i32.add (local.get $o) (i32.const 10)))))
    (i32.sub (local.get $o) (local.get $dst)))
  ;; END SHARED

  ;; The input is copied to 65536, the decision is written after it.
  (func (export "redact") (result i32)
    (local $n i32) (local $in i32) (local $out i32) (local $len i32) (local $k i32) (local $h i64)
    (if (i64.gt_u (call $input_length) (i64.const 0x1000000)) (then (return (i32.const 1))))
    (local.set $n (i32.wrap_i64 (call $input_length)))
    (local.set $in (i32.const 65536))
    (local.set $out (i32.and (i32.add (i32.add (local.get $in) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (if (i32.eqz (call $grow_to (i32.add (i32.add (local.get $out) (local.get $n)) (i32.const 128))))
      (then (return (i32.const 1))))
    ;; Copy the input in: 8 bytes per host call, then the rest byte by byte.
    (block $words_done
      (loop $words
        (br_if $words_done (i32.gt_u (i32.add (local.get $k) (i32.const 8)) (local.get $n)))
        (i64.store (i32.add (local.get $in) (local.get $k))
                   (call $input_load_u64 (i64.extend_i32_u (local.get $k))))
        (local.set $k (i32.add (local.get $k) (i32.const 8)))
        (br $words)))
    (block $bytes_done
      (loop $bytes
        (br_if $bytes_done (i32.ge_u (local.get $k) (local.get $n)))
        (i32.store8 (i32.add (local.get $in) (local.get $k))
                    (call $input_load_u8 (i64.extend_i32_u (local.get $k))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $bytes)))
    (local.set $len (call $redact (local.get $in) (i32.add (local.get $in) (local.get $n)) (local.get $out)))
    (if (i32.lt_s (local.get $len) (i32.const 0)) (then (return (i32.const 1))))
    ;; Copy the output to a kernel block.
    (local.set $h (call $alloc (i64.extend_i32_u (local.get $len))))
    (if (i64.eqz (local.get $h)) (then (return (i32.const 1))))
    (local.set $k (i32.const 0))
    (block $owords_done
      (loop $owords
        (br_if $owords_done (i32.gt_u (i32.add (local.get $k) (i32.const 8)) (local.get $len)))
        (call $store_u64 (i64.add (local.get $h) (i64.extend_i32_u (local.get $k)))
                         (i64.load (i32.add (local.get $out) (local.get $k))))
        (local.set $k (i32.add (local.get $k) (i32.const 8)))
        (br $owords)))
    (block $obytes_done
      (loop $obytes
        (br_if $obytes_done (i32.ge_u (local.get $k) (local.get $len)))
        (call $store_u8 (i64.add (local.get $h) (i64.extend_i32_u (local.get $k)))
                        (i32.load8_u (i32.add (local.get $out) (local.get $k))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $obytes)))
    (call $output_set (local.get $h) (i64.extend_i32_u (local.get $len)))
    (i32.const 0))

  ;; The empty plugin: it ignores its input and returns success.
  (func (export "noop") (result i32) (i32.const 0)))
