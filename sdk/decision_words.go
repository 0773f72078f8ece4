package sdk

import "maps"

// ShortCircuit returns d ending the chain's run with success: the guards
// after this one do not run (seed 000's ShortCircuit; ABI 1.2). It belongs
// on Continue() from a guard: the host ignores it from an observer or a
// transformer, and rejects it on any other action as an invalid output.
//
//	if trustedSender(inv) {
//		return sdk.Continue().WithReason("trusted sender").ShortCircuit()
//	}
func (d Decision) ShortCircuit() Decision {
	d.shortCircuit = true
	return d
}

// WithPending returns d carrying pending, what the approver is shown beside
// the held traffic (seed 002's requireApproval(pending); ABI 1.2). It belongs
// on Ask: the host rejects it on any other action as an invalid output. The
// map is copied; an empty one carries nothing.
//
//	return sdk.Ask("financial transfer requires human sign-off").
//		WithPending(map[string]any{"tool": tool, "amount": amount})
func (d Decision) WithPending(pending map[string]any) Decision {
	d.pending = maps.Clone(pending)
	return d
}
