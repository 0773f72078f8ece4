//go:build !wasip1

package examples_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestRedactSecretsLongRunsWithinOrdinaryFuel: a long run of the e-mail
// pattern's characters around an "@" (the run before it, the run after
// it, a whole address that long) costs the Go redact-secrets no more than
// three times what prose of the same length costs (the run is still walked,
// without the regexp), where Go's regexp used to read
// the whole run at about 3,000 fuel a byte, 23 times the ordinary rate (a
// 130 KB message then ran out of the default 400 M fuel). Fuel is
// deterministic; the calls run in a fixed order on one module.
func TestRedactSecretsLongRunsWithinOrdinaryFuel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	lang := languages()[0]
	lang.require(t)
	ctx := context.Background()
	rt := newRuntime(t)
	wasm := lang.compile(t, filepath.Join(repoRoot(), "hooks-examples", "redact-secrets"), filepath.Join(t.TempDir(), "go.wasm"))
	m, err := rt.Load(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	run := strings.Repeat("a", n)
	invoke := func(text string) *runtime.Result {
		t.Helper()
		res, err := rt.Invoke(ctx, m, runtime.Request{Tenant: "long", Hook: "go", Point: "message.outbound",
			Context: map[string]any{"incoming": "hi", "outgoing": text}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	invoke("warm-up, which compiles the patterns: a@b.io")
	prose := invoke(strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit. ", n/57+1)[:n]).FuelUsed
	for _, tt := range []struct {
		name, text, want string // want "" means unchanged
	}{
		{"a run then @", run + "@b!", ""},
		{"an address as long", run + "@b.io", "[REDACTED]"},
		{"a local part of dots", strings.Repeat("x.", n/2) + "@b.io", "[REDACTED]"},
		{"a run after @", "a@" + strings.Repeat("x", n) + "!", ""},
		{"runs on both sides", run[:n/2] + "@" + run[:n/2] + ".com", ""}, // a label past 63
		{"an address in the middle", run[:n/2] + "@" + "b.io " + run[:n/2], "[REDACTED] " + run[:n/2]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := invoke(tt.text)
			got, _ := res.Decision.Context["outgoing"].(string)
			if want := tt.want; want != got && !(want == "" && res.Decision.Action == abi.ActionContinue) {
				t.Errorf("decision %s, %.40q..., want %.40q", res.Decision.Action, got, want)
			}
			if res.FuelUsed > 3*prose {
				t.Errorf("%d fuel, more than three times the %d of %d bytes of prose", res.FuelUsed, prose, n)
			}
			t.Logf("%d fuel (prose: %d)", res.FuelUsed, prose)
		})
	}
}
