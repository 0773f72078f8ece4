package runtime_test

import "strconv"

// The WAT guests the runtime's tests share, each built by guest.

// guest returns the WAT of a hook module: host_call imported as $hc, then
// wasi (WASI imports, if any), an exported memory of pages pages, and fields.
func guest(wasi string, pages int, fields string) string {
	return `(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  ` + wasi + `
  (memory (export "memory") ` + strconv.Itoa(pages) + `)
  ` + fields + `)`
}

// computeGuest hashes its input 1000 times over (FNV-1a, a call per byte to
// a leaf function, a data-dependent branch): loop- and call-heavy code, the
// worst case for both fuel and close-on-context-done.
var computeGuest = guest("", 2, `(data (i32.const 0) "{\"action\":\"continue\"}")
  (func $mix (param $h i64) (param $b i64) (result i64)
    (i64.mul (i64.xor (local.get $h) (local.get $b)) (i64.const 0x100000001b3)))
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (local $i i32) (local $r i32) (local $h i64)
    (if (i32.gt_u (local.get $n) (i32.const 60000)) (then (return (i64.const 0))))
    (drop (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1024) (local.get $n)))
    (local.set $h (i64.const 0xcbf29ce484222325))
    (loop $outer
      (local.set $i (i32.const 0))
      (loop $inner
        (local.set $h (call $mix (local.get $h) (i64.load8_u offset=1024 (local.get $i))))
        (if (i64.eqz (i64.and (local.get $h) (i64.const 7)))
          (then (local.set $h (i64.rotl (local.get $h) (i64.const 13)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $inner (i32.lt_u (local.get $i) (local.get $n))))
      (local.set $r (i32.add (local.get $r) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $r) (i32.const 1000))))
    (i64.store (i32.const 64) (local.get $h))
    (i64.const 21))`)

// initCaller calls host_call from _initialize, keeps the result, and reports
// it from hook_v1_handle as {"action":"block","reason":"<16 hex digits>"}.
var initCaller = guest("", 1, `(data (i32.const 0) "echo")
  (data (i32.const 16) "{}")
  (data (i32.const 512) "0123456789abcdef")
  (data (i32.const 1024) "{\"action\":\"block\",\"reason\":\"")
  (global $r (mut i64) (i64.const 0))
  (func (export "_initialize")
    (global.set $r (call $hc (i32.const 0) (i32.const 4) (i32.const 16) (i32.const 2) (i32.const 256) (i32.const 200))))
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (local $i i32)
    (loop $l
      (i32.store8 (i32.add (i32.const 1052) (local.get $i))
        (i32.load8_u (i32.add (i32.const 512)
          (i32.wrap_i64 (i64.and (i64.shr_u (global.get $r) (i64.extend_i32_u (i32.sub (i32.const 60) (i32.mul (local.get $i) (i32.const 4))))) (i64.const 15))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 16))))
    (i32.store16 (i32.const 1068) (i32.const 0x7d22))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 46)))`)

// mirrorWAT takes its input and sends it, whole, as the payload of a host
// call named "doc": the host sees the invocation document the hook got.
var mirrorWAT = guest("", 4, `(data (i32.const 0) "{\"action\":\"continue\"}")
  (data (i32.const 100) "doc")
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (drop (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1024) (local.get $n)))
    (drop (call $hc (i32.const 100) (i32.const 3) (i32.const 1024) (local.get $n) (i32.const 512) (i32.const 64)))
    (i64.const 21))`)

// counter keeps a global that counts the invocations of its instance and
// reports it as {"action":"block","reason":"N"} (N one decimal digit, mod 10).
// Settings {"trap": ...} anywhere in the input make it trap after counting;
// "grow" makes it grow its memory by 8 pages first.
var counter = guest("", 2, `(data (i32.const 0) "{\"action\":\"block\",\"reason\":\"0\"}")
  (global $n (mut i32) (i32.const 0))
  (func $has (param $len i32) (param $c i32) (result i32)
    (local $i i32)
    (block $no
      (loop $l
        (br_if $no (i32.ge_u (local.get $i) (local.get $len)))
        (if (i32.eq (i32.load8_u (i32.add (i32.const 4096) (local.get $i))) (local.get $c)) (then (return (i32.const 1))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (i32.const 0))
  (func (export "hook_v1_handle") (param $len i32) (result i64)
    (if (i32.gt_u (local.get $len) (i32.const 60000)) (then (return (i64.const 0))))
    (drop (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 4096) (local.get $len)))
    (global.set $n (i32.add (global.get $n) (i32.const 1)))
    ;; '!' in the input: trap; '^' in the input: grow by 8 pages
    (if (call $has (local.get $len) (i32.const 33)) (then unreachable))
    (if (call $has (local.get $len) (i32.const 94)) (then (drop (memory.grow (i32.const 8)))))
    (i32.store8 (i32.const 28) (i32.add (i32.const 48) (i32.rem_u (global.get $n) (i32.const 10))))
    (i64.or (i64.shl (i64.const 0) (i64.const 32)) (i64.const 31)))`)

// continueWAT is a hook that takes its input and continues.
var continueWAT = guest("", 1, `(data (i32.const 16) "{\"action\":\"continue\"}")
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (drop (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1024) (i32.const 4096)))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 21)))`)

// printer writes a fixed text to stdout and stderr through WASI fd_write,
// then, for each '!' in its input, 1 KiB more to stdout; then continues.
var printer = guest(`(import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))`, 2, `(data (i32.const 0) "{\"action\":\"continue\"}")
  (data (i32.const 64) "line one\nline two\r\n\1b[31mred\1b[0m\n{\"level\":\"error\",\"msg\":\"forged\"}\npartial")
  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 32) (local.get $ptr))
    (i32.store (i32.const 36) (local.get $len))
    (drop (call $fd_write (local.get $fd) (i32.const 32) (i32.const 1) (i32.const 40))))
  (func (export "hook_v1_handle") (param $len i32) (result i64)
    (local $i i32)
    (if (i32.gt_u (local.get $len) (i32.const 60000)) (then (return (i64.const 0))))
    (drop (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 4096) (local.get $len)))
    (call $write (i32.const 1) (i32.const 64) (i32.const 72))
    (call $write (i32.const 2) (i32.const 64) (i32.const 8))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (if (i32.eq (i32.load8_u (i32.add (i32.const 4096) (local.get $i))) (i32.const 33))
          (then (call $write (i32.const 1) (i32.const 4096) (i32.const 1024))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (i64.or (i64.shl (i64.const 0) (i64.const 32)) (i64.const 21)))`)

// sleeper calls poll_oneoff with one relative clock subscription of the
// number of milliseconds in its data, then continues.
var sleeper = guest(`(import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))`, 1, `(data (i32.const 0) "{\"action\":\"continue\"}")
  (func (export "hook_v1_handle") (param $len i32) (result i64)
    ;; subscription at 256: userdata 7, tag 0 (clock), id 1 (monotonic), timeout 300ms
    (i64.store (i32.const 256) (i64.const 7))
    (i32.store8 (i32.const 264) (i32.const 0))
    (i32.store (i32.const 272) (i32.const 1))
    (i64.store (i32.const 280) (i64.const 300000000))
    (i64.store (i32.const 288) (i64.const 0))
    (i32.store16 (i32.const 296) (i32.const 0))
    (if (i32.ne (call $poll (i32.const 256) (i32.const 512) (i32.const 1) (i32.const 600)) (i32.const 0)) (then unreachable))
    (if (i32.ne (i32.load (i32.const 600)) (i32.const 1)) (then unreachable))
    (if (i64.ne (i64.load (i32.const 512)) (i64.const 7)) (then unreachable))
    (i64.const 21))`)
