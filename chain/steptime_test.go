package chain

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestStepTimesOnTheRunsClock: on the real clock (Options.Now unset) a
// step's audit time is the run's start moved by the monotonic time to the
// hook's return (perRun.endOf), not a clock read of its own. Each record's
// time lies between the run's start and its return, the times never go
// back, the steps sit in the trace in order with their invocation ids, and
// each record names its own step.
func TestStepTimesOnTheRunsClock(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprint("N=", n), func(t *testing.T) {
			var bs []Binding
			for i := range n {
				bs = append(bs, Binding{Name: fmt.Sprintf("g%d", i), Point: "message.outbound", Phase: Guard, Settings: decide(`{"action":"continue"}`)})
			}
			e := newEnv(t, policyConfig(t, bs...), func(o *Options) { o.Now = nil })
			before := time.Now().UTC().Truncate(time.Microsecond)
			out, err := e.c.Run(context.Background(), Input{Tenant: "acme", Point: "message.outbound", Run: "r", Context: map[string]any{"outgoing": "hi"}})
			after := time.Now().UTC()
			if err != nil || out.Verdict != Allow || len(out.Trace) != n {
				t.Fatalf("outcome %+v, %v", out, err)
			}
			recs := out.Records()
			if len(recs) != n {
				t.Fatalf("%d records, want %d", len(recs), n)
			}
			last := before
			for i, r := range recs {
				if r.Time.Before(last) || r.Time.After(after) {
					t.Errorf("record %d at %s: want within [%s, %s] and not before the one before it", i, r.Time, last, after)
				}
				last = r.Time
				if step := out.Trace[i]; step.Binding != r.Binding || step.Invocation != fmt.Sprintf("r.%d", i) || step.Audit != r.Hash {
					t.Errorf("step %d is %s (%s, %s), record %s (%s)", i, step.Binding, step.Invocation, step.Audit, r.Binding, r.Hash)
				}
			}
		})
	}
}
