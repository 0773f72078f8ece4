//go:build !wasip1

package examples_test

import (
	"context"
	"log/slog"
	"os/exec"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// BenchmarkExampleChain: the example chain of issue 15 at message.inbound
// (redact-secrets as a transformer, then block-prompt-injection as a guard,
// then an observer) over the 1 KiB message, chain.Run, per language of the
// two example hooks. messages/s per core is 1e9 / (ns/op).
func BenchmarkExampleChain(b *testing.B) {
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		b.Skip("wat2wasm (wabt) is not installed: make deps")
	}
	observer := testutil.WAT(b, testutil.EmptyHookWAT) // takes its input and continues
	dir := b.TempDir()
	for _, lang := range languages() {
		b.Run(lang.name, func(b *testing.B) {
			ctx := context.Background()
			cfg := chain.Config{Modules: map[string][]byte{"observer": observer}}
			for _, h := range []struct {
				hook  string
				phase chain.Phase
			}{{"redact-secrets", chain.Transformer}, {"block-prompt-injection", chain.Guard}} {
				cfg.Modules[h.hook] = buildFor(b, h.hook, lang, dir)
				cfg.Bindings = append(cfg.Bindings, chain.Binding{Name: h.hook, Module: h.hook, Point: "message.inbound", Phase: h.phase})
			}
			cfg.Bindings = append(cfg.Bindings, chain.Binding{Name: "observer", Module: "observer", Point: "message.inbound", Phase: chain.Observer})
			c, err := chain.New(ctx, cfg, chain.Options{Runtime: newRuntime(b), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
			in := chain.Input{Tenant: "bench", Point: "message.inbound", Context: map[string]any{"incoming": largeUnit}, Run: "bench"}
			out, err := c.Run(ctx, in)
			if err != nil {
				b.Fatal(err)
			}
			if out.Verdict != chain.Allow || !out.Modified {
				b.Fatalf("chain outcome %+v", out)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Run(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
