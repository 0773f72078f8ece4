;; shape-huge-table.wat: a table of a billion elements, which wazero would
;; allocate (8 GiB of references) at every instantiation. Expected: refused at
;; load (MaxTableElements).
(module
  (table 1000000000 funcref)
  (memory (export "memory") 1)
  (func (export "hook_v1_handle") (param i32) (result i64) (i64.const 0)))
