package chain

import (
	"context"
	"fmt"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// BenchmarkInvokeDirect is one runtime.Invoke of the policy guest: the cost
// the chain adds to.
func BenchmarkInvokeDirect(b *testing.B) {
	rt := testRuntime(&testing.T{})
	m, err := rt.Load(context.Background(), policyWasm(&testing.T{}))
	if err != nil {
		b.Fatal(err)
	}
	req := runtime.Request{Tenant: "acme", Hook: "h", Point: outbound, Context: map[string]any{"outgoing": "hello"}, Settings: map[string]any{}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rt.Invoke(context.Background(), m, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChain runs chains of 1 and 5 continue-guards; the overhead per
// hook is (ns/op of the chain - hooks * ns/op of BenchmarkInvokeDirect) /
// hooks. It includes the audit record (hashing) and the spans (no-op
// provider).
func BenchmarkChain(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("hooks=%d", n), func(b *testing.B) {
			t := &testing.T{}
			var bs []Binding
			for i := 0; i < n; i++ {
				bs = append(bs, Binding{Name: fmt.Sprintf("g%d", i), Point: outbound, Phase: Guard})
			}
			c, err := New(context.Background(), policyConfig(t, bs...), Options{Runtime: testRuntime(t), Audit: &audittest.LinkingSink{}, Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(context.Background())
			in := Input{Tenant: "acme", Point: outbound, Context: map[string]any{"outgoing": "hello"}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Run(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChainOverhead is the chain's own cost, without wasm: the three
// steps of the bench module's chain/3-hooks row (see overheadChain). Audit
// records are hashed into a sink that keeps none; spans go to the no-op
// provider.
func BenchmarkChainOverhead(b *testing.B) {
	c, in := overheadChain(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}
