package capability

import (
	"context"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

// discardUsage is a UsageSink that keeps nothing.
type discardUsage struct{}

func (discardUsage) Record(context.Context, UsageRecord) error { return nil }

// BenchmarkRunner is the runner's own cost per host call, without the
// runtime: noop is the bench module's hostcall/runner-noop capability ({}
// schema, free, no gates, returns {}); usage adds a usage sink; billed adds
// an object schema, a cost, a CreditGate on a MemoryLedger and a spend cap,
// the path of a metered capability.
func BenchmarkRunner(b *testing.B) {
	noop := func(context.Context, *Request) (*Result, error) {
		return &Result{Value: map[string]any{}}, nil
	}
	for _, c := range []struct {
		name    string
		cap     Capability
		opts    RunnerOptions
		payload string
	}{
		{"noop", Capability{Name: "noop", Schema: `{}`, Execute: noop}, RunnerOptions{}, `{}`},
		{"usage", Capability{Name: "noop", Schema: `{}`, Execute: noop}, RunnerOptions{Usage: discardUsage{}}, `{}`},
		{"billed", Capability{}, RunnerOptions{Usage: discardUsage{}, MaxCreditPerInvocation: 1 << 40}, `{"use":1,"size":16}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			reg := NewRegistry()
			capab := c.cap
			if c.name == "billed" {
				ledger := fundedLedger(b, 1<<40)
				capab = meteredCap("noop", 2, &counter{}, &CreditGate{Ledger: ledger})
			}
			reg.MustRegister(capab)
			r, err := NewRunner(reg, c.opts)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			call := newCall("noop", c.payload)
			b.ReportAllocs()
			for b.Loop() {
				call.Seq++
				if reply := r.HostCall(ctx, call); reply.Status != abi.StatusOK {
					b.Fatalf("status %v: %s", reply.Status, reply.Body)
				}
			}
		})
	}
}
