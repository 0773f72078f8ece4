package testutil

import "strconv"

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

// TableGrowerWAT is the WAT of a hook that grows its table to n elements
// (if it has fewer) and continues: tables are memory MemoryPages does not
// bound.
func TableGrowerWAT(n int) string {
	return `(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (data (i32.const 16) "{\"action\":\"continue\"}")
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (if (i32.lt_u (table.size $t) (i32.const ` + strconv.Itoa(n) + `))
      (then (drop (table.grow $t (ref.null func) (i32.sub (i32.const ` + strconv.Itoa(n) + `) (table.size $t))))))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 21))))`
}
