package chain

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// BenchmarkChainSteps runs chains of N empty WAT hooks (guards that take
// their input and continue) over a context of a few fields with a 1 KiB
// message: the host's and the chain's cost per hook step, wasm included,
// reported as ns/step, and as cpu-ns/step, the process's CPU time (all
// threads), which a loaded machine disturbs less. Audit records are hashed into a sink that keeps
// none; spans go to the no-op provider.
func BenchmarkChainSteps(b *testing.B) {
	wasm := testutil.WAT(b, testutil.EmptyHookWAT)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 23)
	for _, n := range []int{1, 3, 10} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			t := &testing.T{}
			cfg := Config{Modules: map[string][]byte{"empty": wasm}}
			for i := range n {
				cfg.Bindings = append(cfg.Bindings, Binding{Name: fmt.Sprintf("g%d", i), Module: "empty", Point: outbound, Phase: Guard,
					Settings: map[string]any{"mode": "strict", "threshold": 3}})
			}
			c, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), Audit: &audittest.LinkingSink{}, Logger: quiet(),
				TracerProvider: noop.NewTracerProvider()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(context.Background())
			in := Input{Tenant: "acme", Point: outbound, Run: "bench", Context: map[string]any{
				"outgoing": text, "channel": "email", "to": []any{"a@example.com", "b@example.com"}, "thread": map[string]any{"id": "t-1", "n": 4}}}
			if out, err := c.Run(context.Background(), in); err != nil || len(out.Trace) != n || out.Verdict != Allow {
				b.Fatalf("outcome %+v, %v", out, err)
			}
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, err := c.Run(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			cpu = processCPU() - cpu
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/step")
			b.ReportMetric(float64(cpu)/float64(b.N*n), "cpu-ns/step")
		})
	}
}
