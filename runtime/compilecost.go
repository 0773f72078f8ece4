package runtime

import (
	"errors"
	"fmt"
	"io"

	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// Bounds on what a module may ask of wazero's compiler. Its time grows with
// the square of the blocks, loops and ifs in a function (20,000 loops in one
// 58 KB function take about 10 s to compile), and no size limit catches
// that. The example Go hooks have at most 984 of them in one function and a
// sum of squares of 8.5e6; the bounds leave them 3x of room. At the bounds a
// module of metered empty loops (3 functions of 2,990 loops) compiles in
// 2.7 s on a 2-core machine: bounded, once per module, off the request path, where without
// them it took minutes to hours. Branches (br, br_if, br_table) are not
// counted: Go emits a large br_table in every function, and branch-heavy
// bodies did not show the quadratic growth.
// See RATIONALE.md#why-bound-control-flow-at-load.
const (
	// MaxControlPerFunction bounds the block, loop and if instructions of
	// one function.
	MaxControlPerFunction = 3_000
	// MaxControlSquares bounds the sum over all functions of the square of
	// their control instructions.
	MaxControlSquares = 30_000_000
)

// checkCompileCost refuses a module whose control flow would make compiling
// it take unbounded time. It decodes every instruction, so it also refuses
// bodies that are not valid instructions before the compiler sees them.
func checkCompileCost(m *wasmbin.Module) error {
	var in wasmbin.Instr
	var squares uint64
	for i := range m.Code {
		c := &m.Code[i]
		d := wasmbin.NewInstrReader(c.Body, c.BodyOffset)
		var n uint64
		for {
			err := d.Next(&in)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return &ValidationError{Reason: fmt.Sprintf("function %d", int(m.NumImportedFuncs())+i), Err: err}
			}
			switch in.Op {
			case 0x02, 0x03, 0x04: // block, loop, if
				n++
			}
		}
		if n > MaxControlPerFunction {
			return &LimitError{Limit: fmt.Sprintf("blocks (function %d)", int(m.NumImportedFuncs())+i), Max: MaxControlPerFunction, Got: n}
		}
		squares += n * n
		if squares > MaxControlSquares {
			return &LimitError{Limit: "blocks_squared (sum over functions)", Max: MaxControlSquares, Got: squares}
		}
	}
	return nil
}
