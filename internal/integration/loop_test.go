package integration

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// demoChainConfig parses the demo chain configuration at path (relative to
// the repository root) over the example hook in hooks-examples/<hook>, built,
// with its manifest embedded.
func demoChainConfig(t testing.TB, hook, path string) chain.Config {
	t.Helper()
	wasm, err := runtime.EmbedManifest(testutil.BuildHook(t, "hooks-examples/"+hook),
		testutil.ReadFile(t, "hooks-examples/"+hook+"/manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := chain.ParseConfig(testutil.ReadFile(t, path), func(string) ([]byte, error) { return wasm, nil })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// loopChain builds demo/loop-chain.json (loop-detector as a guard at
// tool.before and a transformer at tool.after) over the built hook, with
// the built-in capabilities on kv.
func loopChain(t *testing.T, kv builtin.KVStore, edit func(*chain.Config)) (*chain.Chain, error) {
	t.Helper()
	ctx := context.Background()
	cfg := demoChainConfig(t, "loop-detector", "demo/loop-chain.json")
	if edit != nil {
		edit(&cfg)
	}
	runner := builtinRunner(t, builtin.Config{KV: kv})
	rt, err := runtime.New(ctx, runtime.Config{CacheDir: testutil.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	c, err := chain.New(ctx, cfg, chain.Options{Runtime: rt, HostCaller: runner})
	if err == nil {
		t.Cleanup(func() { c.Close(ctx) })
	}
	return c, err
}

// TestLoopDetectorInAChain runs the demo's loop: the same read five times in
// one conversation, through the real module, chain and kv. The transformer
// warns in the result from the second call, the guard blocks the fifth, and
// another conversation is not affected.
func TestLoopDetectorInAChain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go hooks for wasip1")
	}
	ctx := context.Background()
	kv := builtin.NewMemoryKV()
	c, err := loopChain(t, kv, nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func(conv string) map[string]any {
		return map[string]any{"tool": "files.read", "arguments": map[string]any{"path": "/srv/app/config.yaml"}, "conversation": conv}
	}
	for i := 1; i <= 5; i++ {
		out, err := c.Run(ctx, chain.Input{Tenant: "acme", Point: "tool.before", Context: call("c_9f2")})
		if err != nil {
			t.Fatal(err)
		}
		if i == 5 {
			if out.Verdict != chain.Block || !strings.Contains(out.Reason, "repetition") {
				t.Fatalf("call 5: %s %q, want a block for repetition", out.Verdict, out.Reason)
			}
			break
		}
		if out.Verdict != chain.Allow {
			t.Fatalf("call %d before: %s %q", i, out.Verdict, out.Reason)
		}
		in := call("c_9f2")
		in["result"] = "port: 8080\n"
		out, err = c.Run(ctx, chain.Input{Tenant: "acme", Point: "tool.after", Context: in})
		if err != nil {
			t.Fatal(err)
		}
		res, _ := out.Context["result"].(string)
		if warned := strings.HasPrefix(res, "[loop detector] Warning"); out.Verdict != chain.Allow || warned != (i >= 2) || !strings.HasSuffix(res, "port: 8080\n") {
			t.Fatalf("call %d after: %s, result %q", i, out.Verdict, res)
		}
	}
	out, err := c.Run(ctx, chain.Input{Tenant: "acme", Point: "tool.before", Context: call("c_a11")})
	if err != nil || out.Verdict != chain.Allow {
		t.Fatalf("another conversation: %v %+v", err, out)
	}

	// Each binding keeps its window in its own kv scope, under one bucket
	// key per point.
	h := sha256.Sum256([]byte("conversation:c_9f2"))
	bucket := binary.BigEndian.Uint64(h[:8]) % 64
	for _, k := range []struct{ hook, key string }{
		{"loop-guard", fmt.Sprintf("loop-detector/v1/before/%02x", bucket)},
		{"loop-warn", fmt.Sprintf("loop-detector/v1/after/%02x", bucket)},
	} {
		v, found, err := kv.Get(ctx, builtin.KVScope{Tenant: "acme", Hook: k.hook}, k.key)
		if err != nil || !found || !strings.Contains(string(v), `"calls"`) {
			t.Errorf("%s %s: %s %v %v", k.hook, k.key, v, found, err)
		}
	}
}

// TestLoopDetectorSettingsRefusedByTheHost: the manifest's settings_schema
// is enforced when the chain is built (an oscillation threshold of 2 is
// refused by its "not": {"enum": [1, 2]}, a misspelt setting by
// additionalProperties).
func TestLoopDetectorSettingsRefusedByTheHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go hooks for wasip1")
	}
	for name, settings := range map[string]map[string]any{
		"oscillation of 2":  {"oscillation_warn_at": 2},
		"window over 32":    {"window": 33},
		"unknown setting":   {"windw": 8},
		"threshold a float": {"drift_warn_at": 2.5},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loopChain(t, builtin.NewMemoryKV(), func(cfg *chain.Config) { cfg.Bindings[0].Settings = settings })
			if err == nil || !strings.Contains(err.Error(), "settings") {
				t.Fatalf("chain built with invalid settings, or refused for another reason: %v", err)
			}
		})
	}
	if _, err := loopChain(t, builtin.NewMemoryKV(), func(cfg *chain.Config) {
		cfg.Bindings[0].Settings = map[string]any{"oscillation_warn_at": 0, "window": 32, "ignore_tools": []any{"clock.now"}}
	}); err != nil {
		t.Fatalf("valid settings refused: %v", err)
	}
}
