package chain

import (
	"context"
	"fmt"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// shortCircuits reports whether step, b's step with the hook's decision dec,
// ends the run with allow (ABI 1.2's "short_circuit": true, seed 000's
// MiddlewareResult::ShortCircuit): only a guard's own continue does. Guards
// run last, so a short_circuit skips only the guards after it, never an
// observer or a transformer; from those it is ignored and reported
// (permitted). See RATIONALE.md#why-is-short-circuit-a-flag-on-continue.
func shortCircuits(b *bound, step *Step, dec *abi.Decision) bool {
	return dec != nil && dec.ShortCircuit && b.Phase == Guard &&
		step.By == ByHook && step.Applied == abi.ActionContinue && step.Ignored == ""
}

// skipRest records every binding after by in st's run order as skipped by
// its short_circuit: a trace step and an audit record each (decision
// continue, by short_circuit, the context unchanged), so the log shows
// which guards did not see the traffic and why. It returns records with
// theirs appended.
func (c *Chain) skipRest(ctx context.Context, s *snapshot, st *RunState, by *bound, cur *audit.Digests, records []audit.Record) ([]audit.Record, error) {
	list := s.points[st.Point]
	why := fmt.Sprintf("skipped: guard %s short-circuited the run", by.Name)
	for st.Next < len(list) {
		b := list[st.Next]
		st.Next++
		step := Step{
			Binding: b.Name, Module: b.digest, Phase: b.Phase, Priority: b.Priority,
			Applied: abi.ActionContinue, By: ByShortCircuit, Reason: why, HostCalls: []audit.HostCall{},
		}
		rec, err := c.record(ctx, s.digest, st, b.Name, b.Phase, b.digest, &step, cur, cur)
		if err != nil {
			return records, err
		}
		records = append(records, rec)
		st.Trace = append(st.Trace, step)
	}
	return records, nil
}

// joinIgnored joins two reasons a decision was (partly) ignored.
func joinIgnored(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
