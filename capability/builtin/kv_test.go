package builtin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/capabilitytest"
)

func TestKVConformance(t *testing.T) {
	get, set := KV(KVConfig{})
	t.Run("kv.get", func(t *testing.T) {
		capabilitytest.Run(t, get,
			capabilitytest.Case{Name: "key", Payload: `{"key": "a"}`, Valid: true},
			capabilitytest.Case{Name: "longest key", Payload: `{"key": "` + strings.Repeat("k", 256) + `"}`, Valid: true},
			capabilitytest.Case{Name: "no key", Payload: `{}`},
			capabilitytest.Case{Name: "empty key", Payload: `{"key": ""}`},
			capabilitytest.Case{Name: "key too long", Payload: `{"key": "` + strings.Repeat("k", 257) + `"}`},
			capabilitytest.Case{Name: "key not a string", Payload: `{"key": 1}`},
			capabilitytest.Case{Name: "scope chosen by the hook", Payload: `{"key": "a", "tenant": "other"}`},
		)
	})
	t.Run("kv.set", func(t *testing.T) {
		capabilitytest.Run(t, set,
			capabilitytest.Case{Name: "value", Payload: `{"key": "a", "value": {"n": [1, 2.5, "x", null, true]}}`, Valid: true},
			capabilitytest.Case{Name: "null value", Payload: `{"key": "a", "value": null}`, Valid: true},
			capabilitytest.Case{Name: "no value", Payload: `{"key": "a"}`},
			capabilitytest.Case{Name: "no key", Payload: `{"value": 1}`},
			capabilitytest.Case{Name: "extra field", Payload: `{"key": "a", "value": 1, "hook": "other"}`},
		)
	})
}

// kvRunner returns a runner with kv.get and kv.set over store.
func kvRunner(t *testing.T, cfg KVConfig) *capability.Runner {
	t.Helper()
	reg := capability.NewRegistry()
	get, set := KV(cfg)
	reg.MustRegister(get)
	reg.MustRegister(set)
	r, err := capability.NewRunner(reg, capability.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func kvCall(name, tenant, hook, payload string) *abi.Call {
	return &abi.Call{Name: name, Payload: []byte(payload), Seq: 1, Caller: abi.Caller{
		Tenant: tenant, Hook: hook, Invocation: "inv", Granted: []string{KVGetName, KVSetName}}}
}

func TestKVScoping(t *testing.T) {
	r := kvRunner(t, KVConfig{})
	ctx := context.Background()
	if reply := r.HostCall(ctx, kvCall(KVSetName, "acme", "h1", `{"key": "k", "value": {"secret": "acme-h1"}}`)); reply.Status != abi.StatusOK || string(reply.Body) != `{"ok":true}` {
		t.Fatalf("set: %v %s", reply.Status, reply.Body)
	}
	tests := []struct {
		name, tenant, hook, want string
	}{
		{"same tenant and hook", "acme", "h1", `{"found":true,"value":{"secret":"acme-h1"}}`},
		{"same tenant, other hook", "acme", "h2", `{"found":false,"value":null}`},
		{"other tenant, same hook", "globex", "h1", `{"found":false,"value":null}`},
		{"tenant and hook run together", "acmeh", "1", `{"found":false,"value":null}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reply := r.HostCall(ctx, kvCall(KVGetName, tc.tenant, tc.hook, `{"key": "k"}`))
			if reply.Status != abi.StatusOK || string(reply.Body) != tc.want {
				t.Errorf("get: %v %s, want %s", reply.Status, reply.Body, tc.want)
			}
		})
	}
}

func TestKVLimits(t *testing.T) {
	ctx := context.Background()
	r := kvRunner(t, KVConfig{Store: &MemoryKV{MaxKeysPerScope: 2}, MaxValueBytes: 16})
	tests := []struct {
		name    string
		tenant  string
		payload string
		want    abi.Status
		wantMsg string
	}{
		{"value at the limit", "acme", `{"key": "a", "value": "12345678901234"}`, abi.StatusOK, ""}, // 16 bytes encoded
		{"value over the limit", "acme", `{"key": "a", "value": "123456789012345"}`, abi.StatusInvalidRequest, "17 bytes encoded, over the limit of 16"},
		{"second key", "acme", `{"key": "b", "value": 1}`, abi.StatusOK, ""},
		{"third key: scope full", "acme", `{"key": "c", "value": 1}`, abi.StatusQuotaExceeded, "full"},
		{"overwrite in a full scope", "acme", `{"key": "a", "value": 2}`, abi.StatusOK, ""},
		{"another scope is not full", "globex", `{"key": "c", "value": 1}`, abi.StatusOK, ""},
		{"key of 256 characters but 512 bytes", "acme", `{"key": "` + strings.Repeat("é", 256) + `", "value": 1}`, abi.StatusInvalidRequest, "key is 512 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reply := r.HostCall(ctx, kvCall(KVSetName, tc.tenant, "h", tc.payload))
			if reply.Status != tc.want {
				t.Fatalf("status %v %s, want %v", reply.Status, reply.Body, tc.want)
			}
			if msg := abi.DecodeError(reply.Status, reply.Body).Message; tc.wantMsg != "" && !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("message %q does not contain %q", msg, tc.wantMsg)
			}
		})
	}
}

func TestMemoryKVCopies(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryKV()
	scope := KVScope{Tenant: "t", Hook: "h"}
	in := []byte(`"abc"`)
	if err := s.Set(ctx, scope, "k", in); err != nil {
		t.Fatal(err)
	}
	in[1] = 'X'
	out, found, err := s.Get(ctx, scope, "k")
	if err != nil || !found || string(out) != `"abc"` {
		t.Fatalf("Get = %s, %v, %v", out, found, err)
	}
	out[1] = 'Y'
	if again, _, _ := s.Get(ctx, scope, "k"); string(again) != `"abc"` {
		t.Errorf("store shares memory: %s", again)
	}
}

// TestMemoryKVHammer writes and reads from many goroutines, for -race.
func TestMemoryKVHammer(t *testing.T) {
	ctx := context.Background()
	r := kvRunner(t, KVConfig{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			tenant := fmt.Sprintf("t%d", g%2)
			for i := range 100 {
				key := fmt.Sprintf("k%d", i%10)
				if reply := r.HostCall(ctx, kvCall(KVSetName, tenant, "h", fmt.Sprintf(`{"key": %q, "value": %d}`, key, i))); reply.Status != abi.StatusOK {
					t.Errorf("set: %v %s", reply.Status, reply.Body)
				}
				if reply := r.HostCall(ctx, kvCall(KVGetName, tenant, "h", fmt.Sprintf(`{"key": %q}`, key))); reply.Status != abi.StatusOK {
					t.Errorf("get: %v %s", reply.Status, reply.Body)
				}
			}
		})
	}
	wg.Wait()
}
