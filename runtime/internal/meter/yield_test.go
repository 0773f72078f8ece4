package meter

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// sameOutcome reports how got differs from want, or "" if it does not:
// results, error, memory, the module's global, fuel and stack left.
func sameOutcome(got, want outcome) string {
	switch {
	case got.err != want.err:
		return fmt.Sprintf("error %q, want %q", got.err, want.err)
	case fmt.Sprint(got.results) != fmt.Sprint(want.results):
		return fmt.Sprintf("results %v, want %v", got.results, want.results)
	case !bytes.Equal(got.mem, want.mem):
		return "memory differs"
	case got.global != want.global:
		return fmt.Sprintf("global %d, want %d", got.global, want.global)
	case got.fuel != want.fuel:
		return fmt.Sprintf("fuel left %d, want %d", got.fuel, want.fuel)
	case got.stack != want.stack:
		return fmt.Sprintf("stack left %d, want %d", got.stack, want.stack)
	case got.negativeAtHost || want.negativeAtHost:
		return "a host function ran with the fuel global below zero"
	}
	return ""
}

// TestYieldSlices runs the generated modules with the budget handed over
// in slices at yield (the global holds at most a slice, the host keeps the
// rest) and checks that every call ends exactly as with the whole budget
// in the global: the same fuel used, and for a budget that runs out the
// same trap at the same point (memory, globals, fuel left); and that yield
// is called at most about once per slice used.
func TestYieldSlices(t *testing.T) {
	e := newEngines(t)
	n := 40
	if testing.Short() {
		n = 10
	}
	yields := 0
	for seed := int64(1); seed <= int64(n); seed++ {
		wasm := genModule(seed)
		m, err := wasmbin.Parse(wasm, wasmbin.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		rt := e.interpreter
		if seed%4 == 0 {
			rt = e.compiler
		}
		code := compile(t, rt, mustInstrument(t, wasm))
		for _, ex := range m.Exports {
			if ex.Kind != wasmbin.KindFunc {
				continue
			}
			ft, _ := m.FuncType(ex.Index)
			for _, args := range argsFor(ft) {
				whole := callBudget(t, rt, code, ex.Name, args, &budget{fuel: hugeFuel, stack: hugeStack})
				used := hugeFuel - whole.fuel
				for _, fuel := range []int64{hugeFuel, used, used - 1, used / 2} {
					want := whole
					if fuel != hugeFuel {
						want = callBudget(t, rt, code, ex.Name, args, &budget{fuel: fuel, stack: hugeStack})
					}
					for _, slice := range []int64{1, 13, 250} {
						got := callBudget(t, rt, code, ex.Name, args, &budget{fuel: fuel, slice: slice, stack: hugeStack})
						where := fmt.Sprintf("seed %d, %s%v, budget %d (uses %d) in slices of %d", seed, ex.Name, args, fuel, used, slice)
						// Every slice handed over but the last is used up
						// before the next yield.
						if max := (fuel-got.fuel)/slice + 2; int64(got.yields) > max {
							t.Fatalf("%s: %d yields, want at most %d", where, got.yields, max)
						}
						yields += got.yields
						if whole.err != "" && got.fuel <= want.fuel {
							// A trap of the module's own: the fuel left is
							// what was flushed last, and the slow paths
							// taken with slices flush more often.
							got.fuel = want.fuel
						}
						if diff := sameOutcome(got, want); diff != "" {
							t.Fatalf("%s: %s", where, diff)
						}
					}
				}
			}
		}
	}
	if yields == 0 {
		t.Fatal("yield was never called")
	}
}

// yieldCase is one call of TestYieldCount: the budget, the calls of yield
// expected, whether it traps and the fuel it leaves.
type yieldCase struct {
	name       string
	b          budget
	minY, maxY int
	trap       bool
	fuelLeft   int64
}

// TestYieldCount checks when yield is called, on code whose cost is known:
// loopWAT's f(n) uses 9n + 5, checks at every loop header and leaves the
// loop with 9n + 4 used, so a budget one short ends at -1 without a trap
// and one two short traps. Yield is never called while the global holds
// enough, once on the way to a trap (a host that hands over nothing), and
// about once per slice used up when the host hands the budget over in
// slices.
func TestYieldCount(t *testing.T) {
	e := newEngines(t)
	inst := mustInstrument(t, testutil.WAT(t, loopWAT))
	const n = 1000
	used := int64(9*n + 5)
	// With slices of s, each slice but the last is used up, with at most
	// one iteration (9 units) more, before the next yield.
	about := func(s int64) (int, int) { return int(used/(s+9)) - 1, int(used / s) }
	for _, rt := range []wazero.Runtime{e.compiler, e.interpreter} {
		code := compile(t, rt, inst)
		tests := []yieldCase{
			{"enough", budget{fuel: used}, 0, 0, false, 0},
			{"one short", budget{fuel: used - 1}, 0, 0, false, -1},
			{"two short", budget{fuel: used - 2}, 1, 1, true, -1},
			{"none", budget{fuel: 0}, 1, 1, true, -4},
		}
		for _, s := range []int64{10, 100, 1000} {
			lo, hi := about(s)
			tests = append(tests,
				yieldCase{fmt.Sprintf("slices of %d", s), budget{fuel: 3 * used, slice: s}, lo, hi, false, 2 * used},
				yieldCase{fmt.Sprintf("slices of %d, two short", s), budget{fuel: used - 2, slice: s}, lo, hi + 1, true, -1})
		}
		for _, tt := range tests {
			tt.b.stack = hugeStack
			o := callBudget(t, rt, code, "f", []uint64{n}, &tt.b)
			if o.yields < tt.minY || o.yields > tt.maxY {
				t.Errorf("%s: %d yields, want %d to %d", tt.name, o.yields, tt.minY, tt.maxY)
			}
			if (o.err != "") != tt.trap || o.fuel != tt.fuelLeft {
				t.Errorf("%s: error %q, fuel left %d; want a trap %v, fuel left %d", tt.name, o.err, o.fuel, tt.trap, tt.fuelLeft)
			}
		}
	}
}

// TestYieldRunaway checks that the runaway shapes still stop, with the
// same fuel left, when the budget is handed over in slices.
func TestYieldRunaway(t *testing.T) {
	e := newEngines(t)
	inst := mustInstrument(t, testutil.WAT(t, runawayWAT()))
	for _, rt := range []wazero.Runtime{e.compiler, e.interpreter} {
		code := compile(t, rt, inst)
		for _, name := range []string{"spin", "tree", "deadtree"} {
			want := callBudget(t, rt, code, name, nil, &budget{fuel: 100_000, stack: 16 << 10})
			got := callBudget(t, rt, code, name, nil, &budget{fuel: 100_000, slice: 1000, stack: 16 << 10})
			if want.err == "" || want.fuel >= 0 {
				t.Fatalf("%s: error %q, fuel left %d; want the fuel exhausted", name, want.err, want.fuel)
			}
			if diff := sameOutcome(got, want); diff != "" {
				t.Errorf("%s in slices: %s", name, diff)
			}
			if got.yields < 100 || got.yields > 101 {
				t.Errorf("%s: %d yields for 100 slices", name, got.yields)
			}
		}
	}
}
