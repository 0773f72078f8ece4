package adversarial

// Review of issue 10, sections 3 and 8 as merged: settings schemas that
// still cost the host (regular expressions, numbers the validator makes
// exact), and files planted where the chain keeps approvals. Each case runs
// on a world, whose invariants are checked after it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestReview1SettingsSchemaCosts: a hook's manifest whose settings_schema
// panicked the schema compiler (multipleOf 1e-9999999: chain.New crashed the
// process), cost minutes (1e-999999 numbers) or 1.5 s and 150 MiB per
// compile (3,300 patterns of \pL{1000}) is refused by chain.New with a
// *SettingsSchemaError, at once, and nothing else is disturbed.
func TestReview1SettingsSchemaCosts(t *testing.T) {
	many := func(n int, f func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, ",")
	}
	tests := []struct{ name, schema string }{
		{"multipleOf that panics", `{"properties":{"a":{"multipleOf":1e-9999999}}}`},
		{"costly numbers", `{"properties":{` + many(200, func(i int) string { return fmt.Sprintf(`"a%d":{"multipleOf":1e-999999}`, i) }) + `}}`},
		{"costly patterns", `{"patternProperties":{` + many(3000, func(i int) string { return fmt.Sprintf(`"\\pL{1000}%d":{}`, i) }) + `}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			wasm, err := runtime.EmbedManifest(policyWasm(t), []byte(`{"name":"evil","settings_schema":`+tt.schema+`}`))
			if err != nil {
				t.Fatal(err)
			}
			cfg := chain.Config{Modules: map[string][]byte{"evil": wasm},
				Bindings: []chain.Binding{{Name: "x", Module: "evil", Point: "message.outbound", Phase: chain.Guard}}}
			var cerr error
			within(t, 10*time.Second, "chain.New", func() { // coarse: refused in milliseconds
				defer func() {
					if p := recover(); p != nil {
						cerr = fmt.Errorf("panic: %v", p)
					}
				}()
				c, err := chain.New(context.Background(), cfg, chain.Options{Runtime: w.rt, HostCaller: w.runner,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err == nil {
					c.Close(context.Background())
				}
				cerr = err
			})
			var se *chain.SettingsSchemaError
			if !errors.As(cerr, &se) {
				t.Fatalf("chain.New = %v, want a *SettingsSchemaError", cerr)
			}
			w.checkInvariants(t)
		})
	}
}

// TestReview1OversizedTrafficCannotSilenceAGuard: a sender's messages over
// a fail-open guard's input limit, refused before the guard ran, opened its
// breaker after five; the guard was then skipped and the next message, a
// secret, went through unseen. The refusals no longer count: the guard still
// blocks the secret.
func TestReview1OversizedTrafficCannotSilenceAGuard(t *testing.T) {
	cw := newChainsecWorld(t,
		chain.Binding{Name: "guard", Point: "message.outbound", Phase: chain.Guard, Fail: chain.FailOpen,
			Limits:   runtime.Limits{MaxInputBytes: 4 << 10},
			Settings: map[string]any{"when": "SECRET", "decide": map[string]any{"action": "block", "reason": "secret"}}})
	for i := 0; i < 10; i++ {
		cw.run(t, "message.outbound", map[string]any{"outgoing": strings.Repeat("A", 8<<10)})
	}
	out := cw.run(t, "message.outbound", map[string]any{"outgoing": "the SECRET is 42"})
	if out.Verdict != chain.Block || out.Binding != "guard" || out.By != chain.ByHook {
		t.Fatalf("after oversized traffic: %s by %s/%s (%+v); want the guard's block", out.Verdict, out.Binding, out.By, out.Failure)
	}
	cw.w.checkInvariants(t)
}
