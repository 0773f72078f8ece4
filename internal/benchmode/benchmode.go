// Package benchmode sets the benchmark-only switches of a runtime.Config:
// loading modules without the fuel and stack instrumentation, and running
// them without wazero's close-on-context-done. Both reopen the CPU holes
// SECURITY.md lists, so they are kept off runtime.Config's exported
// fields, out of an embedder's reach; the runtime's own tests, the
// adversarial tests and the bench module use them through this package.
package benchmode

// Switches are the benchmark-only switches of a runtime.Config.
type Switches struct {
	// DisableMetering loads modules as they are, without the fuel and
	// stack instrumentation: Limits.Fuel, InitFuel and MaxStackBytes are
	// then not enforced, Result.FuelUsed is 0, and only the wall-clock
	// Timeout stops guest code, through wazero's close-on-context-done
	// (which costs 5 to 10 times a loop-heavy invocation; a loop-free
	// call tree is not stopped at all, and deep recursion grows the
	// host's heap). See SECURITY.md.
	DisableMetering bool
	// NoDeadlineInterrupt, with DisableMetering, turns wazero's
	// close-on-context-done off as well: nothing then stops guest code,
	// and while it runs a stop-the-world garbage collection of the whole
	// process waits for it (compiled wasm has no Go safe points). Metered
	// guests never use close-on-context-done: their deadline is checked at
	// every fuel slice, and this switch changes nothing for them. See
	// RATIONALE.md#why-fuel-slices-and-not-close-on-context-done.
	NoDeadlineInterrupt bool
}

var (
	// Unmetered is DisableMetering alone: the timeout still stops guest
	// code, through close-on-context-done.
	Unmetered = Switches{DisableMetering: true}
	// Bare is the bare engine: no metering and nothing that stops guest
	// code. For scale only.
	Bare = Switches{DisableMetering: true, NoDeadlineInterrupt: true}
)

// The accessors package runtime installs when it is initialised; cfg is a
// *runtime.Config. This package cannot name that type: runtime imports it.
var (
	set func(cfg any, s Switches)
	get func(cfg any) Switches
)

// Register installs the accessors of runtime.Config's switches. Package
// runtime calls it from init; no one else should.
func Register(setter func(cfg any, s Switches), getter func(cfg any) Switches) {
	set, get = setter, getter
}

// With returns cfg, a runtime.Config, with its switches set to s.
func With[C any](cfg C, s Switches) C {
	set(&cfg, s)
	return cfg
}

// Of returns the switches set on cfg, a runtime.Config.
func Of[C any](cfg C) Switches {
	return get(&cfg)
}
