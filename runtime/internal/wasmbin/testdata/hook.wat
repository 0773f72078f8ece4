;; A hand-written hook that exercises most of what wasmbin decodes, compiled
;; by an independent encoder: wat2wasm hook.wat -o hook.wasm (wabt 1.0.32).
;; TestFixture checks the parse of hook.wasm against this text.
(module
  (type $host_call_t (func (param i32 i32 i32 i32 i32 i32) (result i64)))
  (import "hook_v1" "host_call" (func $host_call (type $host_call_t)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "env" "base" (global $base i32))

  (memory (export "memory") 1 16)
  (table $ext 1 externref)
  (table $t 4 funcref)

  (global $sp (mut i32) (global.get $base))
  (global $big i64 (i64.const -9223372036854775808))
  (global $pi f32 (f32.const 3.5))
  (global $e f64 (f64.const -2.25))
  (global $fref funcref (ref.func $handle))
  (global $eref externref (ref.null extern))

  (func $init (export "_initialize"))

  (func $handle (export "hook_v1_handle") (param $in_len i32) (result i64)
    (local $a i32) (local $b i32) (local $c i64) (local f64)
    (drop (call $host_call (i32.const 0) (i32.const 0) (i32.const 1024)
                           (local.get $in_len) (i32.const 1024) (i32.const 4096)))
    (i64.const 0))

  (func $helper (param i32) (result i32)
    (local.get 0))

;; wat2wasm picks the encodings (the flags of each segment): it turns
  ;; ref.func items into function indices and (memory 0) into the short form.
  (elem (table $t) (i32.const 0) func $init $handle)              ;; flags 2
  (elem func $helper)                                             ;; flags 1
  (elem (table $t) (i32.const 2) funcref (ref.func $helper))      ;; flags 2
  (elem declare func $helper)                                     ;; flags 3
  (elem (table $t) (i32.const 3) func 2)                          ;; flags 2
  (elem funcref (ref.null func) (ref.func $init))                 ;; flags 5
  (elem (table $ext) (i32.const 0) externref (ref.null extern))   ;; flags 6
  (elem declare funcref (ref.func $handle))                       ;; flags 3

  (data (i32.const 16) "hello")
  (data "passive")
  (data (memory 0) (global.get $base) "\00\01\02"))
