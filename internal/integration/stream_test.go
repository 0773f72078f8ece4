package integration

import (
	"context"
	"math/rand"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// streamChain builds demo/stream-chain.json (redact-secrets as a
// transformer at llm.output.stream, lookahead 64) over the built hook.
func streamChain(t testing.TB) *chain.Chain {
	t.Helper()
	ctx := context.Background()
	cfg := demoChainConfig(t, "redact-secrets", "demo/stream-chain.json")
	rt, err := runtime.New(ctx, runtime.Config{CacheDir: testutil.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	c, err := chain.New(ctx, cfg, chain.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	return c
}

func streamChunks(t *testing.T, c *chain.Chain, chunks []string) (string, *chain.StreamOutcome) {
	t.Helper()
	s, err := c.Stream(context.Background(), chain.Input{Tenant: "acme", Point: "llm.output.stream", Context: map[string]any{"model": "small-chat"}})
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, ch := range chunks {
		r, err := s.Write(ch)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		got.WriteString(r)
	}
	r, out, err := s.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	got.WriteString(r)
	return got.String(), out
}

// TestStreamRedactSecretsSplitKey: the real redact-secrets hook, streamed,
// redacts a key split across two chunks at every split point, and a reply
// with several secrets cut at random gives what the hook makes of the whole
// reply; no part of a key is ever released.
func TestStreamRedactSecretsSplitKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go hooks for wasip1")
	}
	c := streamChain(t)
	key := "sk-proj-Q7vX2mLp9RtZ4bNc8WfYk3Hd"
	text := "Set the key in your shell first: export OPENAI_API_KEY=" + key + " and then run make deploy. The script reads the key from the environment."
	want := strings.Replace(text, key, "[REDACTED]", 1)
	i := strings.Index(text, key)
	for split := i; split <= i+len(key); split += 3 {
		got, out := streamChunks(t, c, []string{text[:split], text[split:]})
		if got != want || !out.Modified || out.Verdict != chain.Allow {
			t.Fatalf("split at %d: released %q, want %q", split, got, want)
		}
	}

	reply := "Here are the values. AWS: AKIAIOSFODNN7EXAMPLE, GitHub: ghp_abcdefghijklmnopqrstuvwxyz0123456789, " +
		"write to ops@example.com with Bearer abcdefgh.ijk-lmnop and " + key + " for the model. That is all; rotate them after."
	whole, err := c.Run(context.Background(), chain.Input{Tenant: "acme", Point: "llm.output.stream", Context: map[string]any{
		"model": "small-chat", "response": reply, "offset": 0, "final": true}})
	if err != nil {
		t.Fatal(err)
	}
	wantAll := whole.Context["response"].(string)
	if strings.Count(wantAll, "[REDACTED]") != 5 {
		t.Fatalf("whole reply redacted to %q", wantAll)
	}
	r := rand.New(rand.NewSource(3))
	for k := 0; k < 8; k++ {
		var chunks []string
		for rest := reply; rest != ""; {
			n := min(len(rest), 1+r.Intn(12))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		if got, _ := streamChunks(t, c, chunks); got != wantAll {
			t.Fatalf("released %q, whole reply %q (chunks %q)", got, wantAll, chunks)
		}
	}
}

// BenchmarkStreamRedactSecrets streams a 2,000-character reply with a key
// through the real redact-secrets (demo/stream-chain.json: lookahead 64) in
// chunks of 16 characters; whole=1 is one Chain.Run over the whole reply.
// ns/op is per stream; divide by chunks/op for the latency added per chunk.
func BenchmarkStreamRedactSecrets(b *testing.B) {
	c := streamChain(b)
	ctx := context.Background()
	reply := strings.Repeat("The pool ran dry under the evening peak. ", 25)[:1000] + "export KEY=sk-proj-Q7vX2mLp9RtZ4bNc8WfYk3Hd now. " +
		strings.Repeat("Requests timed out until the pool grew again. ", 25)
	reply = reply[:2000]
	b.Run("whole=1", func(b *testing.B) {
		in := chain.Input{Tenant: "acme", Point: "llm.output.stream", Context: map[string]any{"response": reply, "offset": 0, "final": true}}
		for b.Loop() {
			if _, err := c.Run(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunk=16", func(b *testing.B) {
		n := 0
		for b.Loop() {
			s, err := c.Stream(ctx, chain.Input{Tenant: "acme", Point: "llm.output.stream"})
			if err != nil {
				b.Fatal(err)
			}
			n = 0
			for i := 0; i < len(reply); i += 16 {
				if _, err := s.Write(reply[i:min(i+16, len(reply))]); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if _, out, err := s.Close(); err != nil || !strings.Contains(out.Text, "[REDACTED]") {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "chunks/op")
	})
}
