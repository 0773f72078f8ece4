package chain

import (
	"fmt"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// shortCircuits reports whether step, b's step with the hook's decision dec,
// short-circuits the run (ABI 1.2's "short_circuit": true, seed 000's
// MiddlewareResult::ShortCircuit): only a guard's own continue does. The
// guards after it are then skipped (RunState.ShortCircuit) and the run ends
// with allow. Guards run last, so a short_circuit skips only guards, never
// an observer or a transformer; from those it is ignored and reported
// (permitted). A ToolApproval after it still applies: it is the platform's
// configuration, not a hook, and a hook cannot switch it off. An audit-mode
// guard's short_circuit is never applied either: audit mode never alters the
// traffic, and skipping the guards after it would. See
// RATIONALE.md#why-is-short-circuit-a-flag-on-continue.
func shortCircuits(b *bound, step *Step, dec *abi.Decision) bool {
	return dec != nil && dec.ShortCircuit && b.Phase == Guard && b.rule == nil && b.Mode != ModeAudit &&
		step.By == ByHook && step.Applied == abi.ActionContinue && step.Ignored == ""
}

// skippedStep is the step of guard b, skipped because guard by
// short-circuited the run: it did not run, the traffic goes on unchanged,
// and its audit record (decision continue, by short_circuit, the context
// digest unchanged) says so and why.
func skippedStep(b *bound, by string) Step {
	return Step{
		Binding: b.Name, Module: b.digest, Phase: b.Phase, Priority: b.Priority,
		Applied: abi.ActionContinue, By: ByShortCircuit, HostCalls: []audit.HostCall{},
		Reason: fmt.Sprintf("skipped: guard %s short-circuited the run", by),
	}
}

// joinIgnored joins two reasons a decision was (partly) ignored.
func joinIgnored(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
