package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestModuleCopiesHaveOwnPools: after the compile cache evicted a module and
// the same bytes were loaded again, closing the first copy leaves the warm
// instances of the second alone, and its invocations in flight; on
// 5da7c09 pools were keyed by digest, and closing one copy closed them all.
func TestModuleCopiesHaveOwnPools(t *testing.T) {
	r := newRuntime(t, runtime.Config{CacheModules: 1})
	ctx := context.Background()
	wasm := testutil.WAT(t, counter)
	a := load(t, r, wasm)
	load(t, r, testutil.WAT(t, continueWAT)) // evicts a's compiled code
	b := load(t, r, wasm)                    // compiled again: another copy
	if a.Digest() != b.Digest() {
		t.Fatal("same bytes, different digests")
	}
	if n, err := count(t, r, b, "tenant-b", "x"); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if n, err := count(t, r, a, "tenant-a", "x"); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	// Tenant B keeps invoking its copy while tenant A closes its own.
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := count(t, r, b, "tenant-b", "x"); err != nil {
					errs <- err
				}
			}
		}()
		if g == 1 {
			_ = a.Close(ctx)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("tenant B's invocation failed after tenant A closed its copy: %v", err)
	}
	// B's warm instance survived: its count goes on.
	r2 := newRuntime(t, runtime.Config{CacheModules: 1})
	a2, b2 := load(t, r2, wasm), (*runtime.Module)(nil)
	load(t, r2, testutil.WAT(t, continueWAT))
	b2 = load(t, r2, wasm)
	for want := 1; want <= 2; want++ {
		if n, err := count(t, r2, b2, "tenant-b", "x"); err != nil || n != want {
			t.Fatalf("count %d, %v; want %d", n, err, want)
		}
	}
	_ = a2.Close(ctx)
	if n, err := count(t, r2, b2, "tenant-b", "x"); err != nil || n != 3 {
		t.Fatalf("after the other copy closed: count %d, %v; want 3 (the warm instance)", n, err)
	}
}

// TestHookIdentityFromTheHost: the identity the capabilities see
// (Caller.Hook: the key-value scope) comes from the request, and defaults to
// the module's digest, never to the name its manifest claims; on 5da7c09 a
// module declaring another's name got its scope.
func TestHookIdentityFromTheHost(t *testing.T) {
	r := newRuntime(t, runtime.Config{})
	withName := func(name, version string) *runtime.Module {
		wasm, err := runtime.EmbedManifest(scripted(t), []byte(`{"name":"`+name+`","version":"`+version+`","capabilities":["echo"],"points":["message.outbound"]}`))
		if err != nil {
			t.Fatal(err)
		}
		return load(t, r, wasm)
	}
	// The impostor claims the victim's name: other bytes, the same name.
	victim, impostor, bare := withName("victim", "1.0.0"), withName("victim", "6.6.6"), load(t, r, scripted(t))
	tests := []struct {
		name string
		m    *runtime.Module
		hook string
		want string
	}{
		{"manifest name ignored", victim, "", victim.Digest()},
		{"impostor", impostor, "", impostor.Digest()},
		{"no manifest", bare, "", bare.Digest()},
		{"host's name", victim, "redact-inbound", "redact-inbound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := echoHost()
			_, err := r.Invoke(context.Background(), tt.m, runtime.Request{
				Tenant: "acme", Hook: tt.hook, Grants: []string{"echo"}, HostCaller: host,
				Context: map[string]any{"s": "@@" + opHostCall("echo", `{}`, 64)},
			})
			if err != nil {
				t.Fatal(err)
			}
			if c := host.Calls(); len(c) != 1 || c[0].Caller.Hook != tt.want {
				t.Fatalf("calls %+v: want Caller.Hook %q", c, tt.want)
			}
		})
	}
}

// TestPoolsPerHook: two hooks (bindings) of one module for one tenant never
// share a warm instance, so one cannot see what the other's traffic left in
// memory; on 5da7c09 pools were keyed by (module, tenant) only.
func TestPoolsPerHook(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, counter))
	ctx := context.Background()
	invoke := func(hook string) int {
		res, err := r.Invoke(ctx, m, runtime.Request{Tenant: "t", Hook: hook, Context: map[string]any{"outgoing": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, c := range res.Decision.Reason {
			n = int(c - '0')
		}
		return n
	}
	for i, step := range []struct {
		hook string
		want int
	}{{"redact", 1}, {"redact", 2}, {"guard", 1}, {"redact", 3}, {"guard", 2}, {"", 1}} {
		if got := invoke(step.hook); got != step.want {
			t.Fatalf("step %d (%q): the instance served %d invocations, want %d", i, step.hook, got, step.want)
		}
	}
	if _, err := r.Invoke(ctx, m, runtime.Request{Tenant: "", Hook: "x"}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Fatal(err)
	}
}
