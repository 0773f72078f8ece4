package chain

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
)

// BenchmarkStream streams a 2,000-character reply through one policy-guest
// transformer (continue) at llm.output.stream with the default look-ahead
// (256), in chunks of 4 characters (about a token) and of 64; whole=1 is one
// Chain.Run over the whole reply, the cost without streaming. ns/op is per
// stream: divide by chunks/op for the latency a chunk adds (every chunk after
// the first 256 characters runs the chain once over the held window).
func BenchmarkStream(b *testing.B) {
	t := &testing.T{}
	c, err := New(context.Background(), policyConfig(t, Binding{Name: "t", Point: "llm.output.stream", Phase: Transformer}),
		Options{Runtime: testRuntime(t), Audit: &audittest.LinkingSink{}, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	reply := strings.Repeat("The pool ran dry under the evening peak. ", 50)[:2000]
	b.Run("whole=1", func(b *testing.B) {
		in := Input{Tenant: "acme", Point: "llm.output.stream", Context: map[string]any{"response": reply, "offset": 0, "final": true}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Run(context.Background(), in); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range []int{4, 64} {
		var chunks []string
		for i := 0; i < len(reply); i += n {
			chunks = append(chunks, reply[i:min(i+n, len(reply))])
		}
		b.Run(fmt.Sprintf("chunk=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, err := c.Stream(context.Background(), Input{Tenant: "acme", Point: "llm.output.stream"})
				if err != nil {
					b.Fatal(err)
				}
				for _, ch := range chunks {
					if _, err := s.Write(ch); err != nil {
						b.Fatal(err)
					}
				}
				if _, _, err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(chunks)), "chunks/op")
		})
	}
}
