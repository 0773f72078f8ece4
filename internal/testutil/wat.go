package testutil

// EmptyHookWAT is the WAT of a hook that takes its input (the invocation
// document, copied into its memory at 1024) and continues: a hook that costs
// as little as a hook can, the floor of one invocation in the benchmarks.
const EmptyHookWAT = `(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 2)
  (data (i32.const 0) "{\"action\":\"continue\"}")
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (drop (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1024) (local.get $n)))
    (i64.const 21)))`
