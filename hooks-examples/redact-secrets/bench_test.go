//go:build !wasip1

package main

import (
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

// BenchmarkNative1KiB is the native Go figure of the redaction rows of
// BENCHMARKS.md (hooks-examples/corpus_bench_test.go): this hook's code over
// the same 1 KiB text (bench.Text), under sdktest's fake host.
func BenchmarkNative1KiB(b *testing.B) {
	filler := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 40)
	s := filler[:501] + " AKIAIOSFODNN7EXAMPLE "
	text := s + filler[501:501+1024-len(s)]
	h := sdktest.HostFor(b, "manifest.json")
	inv := sdktest.Invocation{Point: "message.outbound", Context: map[string]any{"incoming": "hi", "outgoing": text}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Run(inv); err != nil {
			b.Fatal(err)
		}
	}
}
