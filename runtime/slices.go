package runtime

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime/internal/meter"
)

// FuelSlice is the most fuel a metered guest holds at once. The rest of its
// budget stays with the host; each time the guest spends its slice, its next
// fuel check calls the host's yield function (see runtime/internal/meter),
// which hands over the next slice, checks the invocation's deadline and the
// caller's context, and gives Go's scheduler and garbage collector a safe
// point. At the speeds BENCHMARKS.md measured (0.1 to 17 ns a unit), a slice
// is 25 µs to 4.5 ms of guest code: the bound on how late a timeout or a
// cancellation stops a hook, and on how long a stop-the-world pause of the
// whole process can wait for it. See
// RATIONALE.md#why-fuel-slices-and-not-close-on-context-done.
const FuelSlice = 1 << 18

// Host functions (the WASI set and host_call) are charged for the work they
// do, before they do it, in the same fuel as guest code, so that fuel stays
// one deterministic measure of all the work an invocation makes the host do
// and a host function cannot do much work for one instruction's worth. The
// rates are about one unit per nanosecond of host work on the machine
// BENCHMARKS.md measured (guest code runs 0.1 to 17 ns a unit).
const (
	// HostFunctionFuel is what every call of a host function costs before
	// its work: a stream of cheap host calls spends fuel, and reaches the
	// clock check below, like any other loop.
	HostFunctionFuel = 64
	// HostIovecFuel is what each iovec costs fd_write.
	HostIovecFuel = 32
	// HostSubscriptionFuel is what each subscription costs poll_oneoff.
	HostSubscriptionFuel = 64
	// HostByteFuel is what each byte costs that fd_write, random_get and
	// host_call move between the guest's memory and the host.
	HostByteFuel = 1
	// HostLineFuel is what each line costs that fd_write completes in the
	// invocation's log (a LogLine kept; bytes the log drops make none).
	HostLineFuel = 128
)

// HostWorkPerCheck is how much host-function work, in fuel units, the host
// does between two looks at the clock and the caller's context: every
// charge adds up, metered or not (benchmode.Switches.DisableMetering), and when the sum
// reaches HostWorkPerCheck the deadline is checked. With the caps on each
// host function (MaxWriteIovecs, MaxWriteBytes, MaxPollSubscriptions,
// MaxRandomBytes) no single call does more than about a millisecond of work,
// so a hook that does nothing but call host functions is stopped within
// about a millisecond of its deadline; about 1,000 of the cheapest calls
// share one look at the clock, which keeps them cheap.
const HostWorkPerCheck = 1 << 16

// guestRun is the state of the guest code running on an instance: its fuel,
// its deadline, and the invocation or the initialisation it serves. There is
// one per instance, reused by every call, and host functions reach it
// through the context of the call (instance.ctx), which is made once per
// instance: a warm invocation allocates none of this.
type guestRun struct {
	// parent is the caller's context: its cancellation stops the guest,
	// and host calls see its values (trace spans, say).
	parent   context.Context
	done     <-chan struct{} // parent.Done(), looked up once per call
	deadline time.Time

	// fuel is the instrumentation's fuel global; nil when not metered.
	fuel api.MutableGlobal
	// sliced reports whether the module calls the yield function, so that
	// the budget can be handed over in slices. A module instrumented
	// otherwise (never, today) gets its whole budget at once.
	sliced bool
	// reserve is the fuel held back from the global.
	reserve int64
	// work is the host-function work charged since the clock was last
	// looked at (see HostWorkPerCheck).
	work uint64

	// Exactly one of inv and init is set while guest code runs.
	inv  *invocation
	init *initState

	// hostCtx is parent with the deadline, made at the first host call
	// that needs it and cancelled when the call ends.
	hostCtx context.Context
	cancel  context.CancelFunc
}

type runKey struct{}

// runFrom returns the guestRun of a host function's context, or nil.
func runFrom(ctx context.Context) *guestRun {
	g, _ := ctx.Value(runKey{}).(*guestRun)
	return g
}

// begin prepares a call of guest code that must end by deadline.
func (g *guestRun) begin(parent context.Context, deadline time.Time, fuel uint64, inv *invocation, init *initState) {
	g.parent, g.done = parent, parent.Done()
	g.deadline = deadline
	g.inv, g.init = inv, init
	g.setFuel(fuel)
}

// end forgets the call: nothing of it stays reachable from the instance.
func (g *guestRun) end() {
	if g.cancel != nil {
		g.cancel()
	}
	fuel, sliced := g.fuel, g.sliced
	*g = guestRun{fuel: fuel, sliced: sliced}
}

// setFuel gives the guest a budget: a slice of it in the global, the rest
// in reserve.
func (g *guestRun) setFuel(budget uint64) {
	if g.fuel == nil {
		return
	}
	take := budget
	if g.sliced {
		take = min(budget, FuelSlice)
	}
	g.fuel.Set(take)
	g.reserve = int64(budget - take)
}

// fuelLeft returns the fuel left: the global and the reserve. It is below
// zero when the budget ran out.
func (g *guestRun) fuelLeft() int64 {
	return int64(g.fuel.Get()) + g.reserve
}

// refill hands the guest its next slice. The guest flushed its use into
// the global before calling yield, so the global is exact. When the budget
// is spent, the global is left below zero and the guest traps.
func (g *guestRun) refill() {
	total := g.fuelLeft()
	if total < 0 {
		g.fuel.Set(uint64(total))
		g.reserve = 0
		return
	}
	take := min(total, FuelSlice)
	g.fuel.Set(uint64(take))
	g.reserve = total - take
}

// charge takes units of fuel for work a host function is about to do, and
// looks at the clock once HostWorkPerCheck units have been charged since
// the last look. It fails the guest with fuel_exhausted when the budget
// runs out (the fuel left is then below zero, exactly as when guest code
// runs out), and with timeout past the deadline, by panicking with the
// *abi.Failure, which wazero recovers and returns as the call's error. The
// instrumentation flushes the guest's use into the global before every call
// of an imported function, so the global is exact here and the accounting
// stays exact: fuel left is the global plus the reserve, before and after.
func (g *guestRun) charge(units uint64) {
	if units == 0 {
		return
	}
	if g.fuel != nil {
		left := int64(g.fuel.Get()) - int64(units)
		g.fuel.Set(uint64(left))
		if left < 0 {
			// The slice is spent: pool it with the reserve, as a
			// yield would, and stop if the budget is spent too.
			g.refill()
			if g.fuelLeft() < 0 {
				panic(&abi.Failure{Code: abi.FailFuelExhausted, Message: "the hook used up its fuel budget"})
			}
		}
	}
	g.work += units
	if g.work >= HostWorkPerCheck {
		g.work = 0
		if f := g.interrupted(); f != nil {
			panic(f)
		}
	}
}

// chargeHost charges units to the guest run of a host function's context,
// if any (see guestRun.charge).
func chargeHost(ctx context.Context, units uint64) *guestRun {
	g := runFrom(ctx)
	if g != nil {
		g.charge(units)
	}
	return g
}

// interrupted returns the failure that stops guest code now, or nil: the
// deadline passed, or the caller's context ended.
func (g *guestRun) interrupted() *abi.Failure {
	return g.interruptedAt(monoNow())
}

// interruptedAt is interrupted with the clock read at now (a monoNow
// reading).
func (g *guestRun) interruptedAt(now time.Time) *abi.Failure {
	select {
	case <-g.done:
		return &abi.Failure{Code: abi.FailTimeout, Message: "the invocation was cancelled"}
	default:
	}
	if !g.deadline.IsZero() && !now.Before(g.deadline) {
		return &abi.Failure{Code: abi.FailTimeout, Message: "the hook ran past its time limit"}
	}
	return nil
}

// hostContext returns the context host functions give to what they call:
// the caller's, bounded by the deadline.
func (g *guestRun) hostContext() context.Context {
	if g.hostCtx == nil {
		if g.parent == nil {
			return context.Background()
		}
		g.hostCtx, g.cancel = context.WithDeadline(g.parent, wallDeadline(g.deadline))
	}
	return g.hostCtx
}

// yieldFuel implements the instrumentation's yield import (see
// runtime/internal/meter): the next slice of fuel, then the deadline and
// the caller's context. Returning to Go here is also the safe point the
// scheduler and the garbage collector need: compiled guest code has none.
func yieldFuel(ctx context.Context, _ api.Module, _ []uint64) {
	g := runFrom(ctx)
	if g == nil || g.fuel == nil {
		return // the global stays as it is: below zero, the guest traps
	}
	g.refill()
	if f := g.interrupted(); f != nil {
		panic(f)
	}
}

// defineYield defines the instrumentation's yield import.
func defineYield(b wazero.HostModuleBuilder) {
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(yieldFuel), nil, nil).Export(meter.YieldImport)
}

// importsYield reports whether a compiled module imports the yield
// function.
func importsYield(code wazero.CompiledModule) bool {
	for _, f := range code.ImportedFunctions() {
		if mod, name, ok := f.Import(); ok && mod == meter.YieldModule && name == meter.YieldImport {
			return true
		}
	}
	return false
}
