package chain

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

func TestLoadConfigFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.wasm"), policyWasm(t), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `{"modules": {"policy": "p.wasm"},
	  "breaker": {"failures": 3, "backoff": "1s", "max_backoff": "4s"},
	  "bindings": [{"name": "g", "module": "policy", "point": "tool.before", "phase": "guard", "priority": -2,
	    "settings": {"n": 12345678901234}, "grants": ["kv.get"], "fail": "open",
	    "limits": {"timeout": "250ms", "memory_pages": 16, "max_host_calls": 3},
	    "approval": {"timeout": "2m", "on_expiry": "approve"}}]}`
	path := filepath.Join(dir, "chain.json")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfigFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Bindings[0]
	if len(cfg.Modules["policy"]) == 0 || cfg.Breaker.Failures != 3 || cfg.Breaker.MaxBackoff != 4*time.Second ||
		b.Priority != -2 || b.Settings["n"] != json.Number("12345678901234") || b.Fail != FailOpen ||
		b.Limits.Timeout != 250*time.Millisecond || b.Limits.MemoryPages != 16 || b.Limits.MaxHostCalls != 3 ||
		b.Approval.Timeout != 2*time.Minute || b.Approval.OnExpiry != ExpireApprove {
		t.Errorf("config %+v", cfg)
	}
	if _, err := New(t.Context(), cfg, Options{Runtime: testRuntime(t), Logger: quiet()}); err != nil {
		t.Errorf("New: %v", err)
	}

	for name, bad := range map[string]string{
		"unknown field":  `{"bindings": [{"name": "g", "prioirty": 1}]}`,
		"duplicate key":  `{"bindings": [], "bindings": []}`,
		"bad duration":   `{"breaker": {"backoff": 30}}`,
		"missing module": `{"modules": {"x": "nope.wasm"}}`,
	} {
		if _, err := ParseConfig([]byte(bad), func(p string) ([]byte, error) { return nil, errors.New("no such file") }); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestDemoConfigParses keeps demo/chain.json valid.
func TestDemoConfigParses(t *testing.T) {
	cfg, err := ParseConfig(testutil.ReadFile(t, "demo/chain.json"), func(string) ([]byte, error) { return []byte{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Bindings) == 0 || !strings.Contains(string(testutil.ReadFile(t, "demo/chain.json")), `"approve-shell"`) {
		t.Errorf("demo config: %+v", cfg)
	}
}
