package adversarial

import (
	"context"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threat: tenants by the thousand each invoke a hook once, and every
// (module, tenant) pool keeps its warm instances for ever: 3,000 tenants on
// a trivial hook kept 245 MiB, 1,000 on a Go hook 4.2 GiB. Defence: a
// runtime-wide budget of idle instances, in number and in bytes, the least
// recently used closed first, whatever its pool.
func TestPoolsIdleBudgetRuntimeWide(t *testing.T) {
	t.Run("default count", func(t *testing.T) {
		w := newWorld(t)
		const tenants = runtime.DefaultMaxIdleInstances + 44
		for i := range tenants {
			if _, err := w.run(t, fmt.Sprint("tenant-", i), runtime.Limits{}, ""); err != nil {
				t.Fatal(err)
			}
		}
		if s := w.rt.Stats(); s.Idle > runtime.DefaultMaxIdleInstances || s.Instances != s.Idle {
			t.Fatalf("%d tenants left %d idle instances (%d alive), over the default budget of %d", tenants, s.Idle, s.Instances, runtime.DefaultMaxIdleInstances)
		}
		// The most recent tenant is still warm; the first is not.
		if res, err := w.run(t, fmt.Sprint("tenant-", tenants-1), runtime.Limits{}, opServed); err != nil || res.Decision.Reason != "00000002." {
			t.Errorf("the most recent tenant: %v %+v; want its warm instance", err, res)
		}
		if res, err := w.run(t, "tenant-0", runtime.Limits{}, opServed); err != nil || res.Decision.Reason != "00000001." {
			t.Errorf("the least recent tenant: %v %+v; want a fresh instance", err, res)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		const budget = 16 << 20
		w := newWorld(t, func(o *options) { o.cfg.MaxIdleBytes = budget })
		goruntime.GC()
		base := heapInuse()
		for i := range 24 { // 8 + 24 pages each: 2 MiB, 48 MiB in all
			if _, err := w.run(t, fmt.Sprint("tenant-", i), runtime.Limits{}, opGrow(24)); err != nil {
				t.Fatal(err)
			}
		}
		goruntime.GC()
		s := w.rt.Stats()
		if s.IdleBytes > budget || s.Idle > budget/(32*65536) {
			t.Fatalf("stats %+v: over the budget of %d MiB", s, budget>>20)
		}
		if grew := int64(heapInuse()) - int64(base); grew > 2*budget {
			t.Errorf("the heap grew by %d MiB with a budget of %d MiB", grew>>20, budget>>20)
		}
	})
}

// tableGrower grows its table to 262,144 elements (2 MiB in wazero) and
// continues.
var tableGrower = testutil.TableGrowerWAT(262144)

// Threat: a hook grows its tables, which MemoryPages does not bound, and
// its warm instances pin them (56 MiB per tenant). Defence: tables count
// toward the idle budget; an instance alone over it is closed.
func TestPoolsTablesCountTowardTheBudget(t *testing.T) {
	w := newWorld(t, func(o *options) { o.cfg.MaxIdleBytes = 1 << 20 })
	m := w.load(t, testutil.WAT(t, tableGrower))
	// Each tenant invokes twice, so that its second invocation would reuse
	// the first's instance had it been kept.
	for i := range 8 {
		for j := range 2 {
			res, err := w.invoke(t, m, runtime.Request{Tenant: fmt.Sprint("tenant-", i)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Reused {
				t.Fatalf("tenant %d, invocation %d: an instance with 2 MiB of table was kept under a budget of 1 MiB", i, j)
			}
		}
	}
	if s := w.rt.Stats(); s.IdleBytes > 1<<20 || s.Idle != 0 {
		t.Fatalf("stats %+v: over the budget, or an instance alone over it kept", s)
	}
}

// Threat: a tenant that went quiet keeps its warm instances (and what its
// traffic left in them) for ever. Defence: idle instances expire after
// Config.IdleTTL, closed by the runtime's one janitor without any
// traffic.
func TestPoolsIdleInstancesExpire(t *testing.T) {
	w := newWorld(t, func(o *options) { o.cfg.IdleTTL = 50 * time.Millisecond })
	for i := range 3 {
		if _, err := w.run(t, fmt.Sprint("tenant-", i), runtime.Limits{}, opStash("left")); err != nil {
			t.Fatal(err)
		}
	}
	if !waitFor(5*time.Second, func() bool { return w.rt.Stats().Instances == 0 }) {
		t.Fatalf("stats %+v: idle instances outlived their TTL of 50ms by seconds", w.rt.Stats())
	}
	res, err := w.run(t, "tenant-0", runtime.Limits{}, opQuote+opServed)
	if err != nil || res.Decision.Reason != ".00000001." {
		t.Fatalf("after the TTL: %v %+v; want a fresh instance", err, res)
	}
}

// Threat: tenant A closes its copy of a module (loaded again after the
// compile cache evicted it) and so closes tenant B's pools of the same
// digest: 4 of B's 20 invocations failed with ErrClosed. Defence: pools
// belong to the compiled copy; closing one copy touches no other.
func TestPoolsModuleCopyCloseIsolated(t *testing.T) {
	w := newWorld(t, func(o *options) { o.cfg.CacheModules = 1 })
	hostile := corpus(t, "hostile.wat")
	other := testutil.WAT(t, tableGrower)
	w.load(t, other)        // evicts w.hostile's compiled code
	a := w.load(t, hostile) // tenant A's copy
	w.load(t, other)        // evicts A's
	b := w.load(t, hostile) // tenant B's copy
	if _, err := w.invoke(t, b, runtime.Request{Tenant: "tenant-b", Context: map[string]any{"outgoing": "@@" + opStash("bwarm")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.invoke(t, a, runtime.Request{Tenant: "tenant-a", Context: map[string]any{"outgoing": "@@"}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if _, err := w.invoke(t, b, runtime.Request{Tenant: "tenant-b", Context: map[string]any{"outgoing": "@@" + opBusy(2000)}}); err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
			}
		}()
		if g == 2 {
			_ = a.Close(context.Background())
		}
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of tenant B's 20 invocations failed after tenant A closed its copy: %v", len(failed), failed[0])
	}
	// B's warm instances were not closed under it: the next invocation
	// reuses one. (Which one is the pool's choice: the concurrent
	// invocations above may have made up to four, and only the first
	// holds the stash, so the stash alone is not the test.)
	res, err := w.invoke(t, b, runtime.Request{Tenant: "tenant-b", Context: map[string]any{"outgoing": "@@" + opQuote}})
	if err != nil || !res.Reused {
		t.Fatalf("tenant B after A closed its copy: %v %+v; want one of B's warm instances", err, res)
	}
}

// kvCall returns the body of one kv host call made by m for tenant as
// hook ("" is the README's embedding example: no Hook in the request).
func kvCall(t *testing.T, w *world, m *runtime.Module, tenant, hook, name, payload string) string {
	t.Helper()
	res, err := w.invoke(t, m, runtime.Request{Tenant: tenant, Hook: hook,
		Context: map[string]any{"outgoing": "@@" + opHostCall(name, payload, 4096)}})
	if err != nil {
		t.Fatal(err)
	}
	c := calls(t, res)
	if len(c) != 1 || c[0].status != abi.StatusOK {
		t.Fatalf("%s: %+v", name, c)
	}
	return c[0].body
}

// Threat: the key-value scope is the module's own manifest name when the
// request names no hook: an impostor declaring another's name reads its
// secret; two modules without a manifest share one store. Defence: the
// scope comes from the host: Request.Hook, or the module's digest, never
// from the module.
func TestPoolsKVScopeFromTheHost(t *testing.T) {
	w := newWorld(t)
	manifest := func(name, version string) []byte {
		b, err := runtime.EmbedManifest(corpus(t, "hostile.wat"), []byte(fmt.Sprintf(
			`{"name":%q,"version":%q,"capabilities":[%q,%q],"points":["message.outbound"]}`, name, version, builtin.KVGetName, builtin.KVSetName)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	victim := w.load(t, manifest("payments-guard", "1.0.0"))
	impostor := w.load(t, manifest("payments-guard", "6.6.6"))
	// A manifest-less module other than w.hostile: the same code with a
	// custom section of its own.
	pad := append(append([]byte(nil), corpus(t, "hostile.wat")...), 0x00, 0x05, 0x03, 'p', 'a', 'd', 0x01)
	bare := w.load(t, pad)
	const set = `{"key":"api","value":"` + secret + `"}`
	const get = `{"key":"api"}`

	kvCall(t, w, victim, "acme", "", builtin.KVSetName, set)
	kvCall(t, w, w.hostile, "acme", "", builtin.KVSetName, set)
	for _, tc := range []struct {
		name string
		m    *runtime.Module
	}{{"impostor naming itself as the victim", impostor}, {"another module without a manifest", bare}} {
		if body := kvCall(t, w, tc.m, "acme", "", builtin.KVGetName, get); strings.Contains(body, secret) {
			t.Errorf("%s read the secret: %s", tc.name, body)
		}
	}
	// The owners still read their own, and the host's name is a scope of
	// its own.
	for _, m := range []*runtime.Module{victim, w.hostile} {
		if body := kvCall(t, w, m, "acme", "", builtin.KVGetName, get); !strings.Contains(body, secret) {
			t.Errorf("the owner lost its data: %s", body)
		}
	}
	if body := kvCall(t, w, victim, "acme", "payments-guard", builtin.KVGetName, get); strings.Contains(body, secret) {
		t.Errorf("the host's binding name %q shares the digest's scope: %s", "payments-guard", body)
	}
}

// Threat: two bindings of one module for one tenant share warm instances,
// so one binding's hook sees what the other's traffic left in memory.
// Defence: pools are keyed by the binding (Request.Hook) too; the chain
// passes the binding's name.
func TestPoolsBindingsNeverShareInstances(t *testing.T) {
	w := newWorld(t)
	const secretA = "bindingAsecret"
	if _, err := w.invoke(t, w.hostile, runtime.Request{Tenant: "acme", Hook: "binding-a",
		Context: map[string]any{"outgoing": "@@" + opStash(secretA)}}); err != nil {
		t.Fatal(err)
	}
	for _, hook := range []string{"binding-b", ""} {
		res, err := w.invoke(t, w.hostile, runtime.Request{Tenant: "acme", Hook: hook,
			Context: map[string]any{"outgoing": "@@" + opQuote + opServed}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Reason != ".00000001." {
			t.Fatalf("binding %q saw %q; want a fresh instance (\".00000001.\")", hook, res.Decision.Reason)
		}
	}
	// The attack is real: binding A's own next invocation sees its stash.
	res, err := w.invoke(t, w.hostile, runtime.Request{Tenant: "acme", Hook: "binding-a",
		Context: map[string]any{"outgoing": "@@" + opQuote}})
	if err != nil || res.Decision.Reason != secretA+"." {
		t.Fatalf("binding A: %v %+v", err, res)
	}
}

// The same threat through the chain: two observers bound to one module at
// one point run one after the other for one tenant; the second must not
// start on the instance the first left warm (the chain passes each
// binding's name as Request.Hook).
func TestPoolsChainBindingsNeverShareInstances(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c, err := chain.New(ctx, chain.Config{
		Modules: map[string][]byte{"hostile": corpus(t, "hostile.wat")},
		Bindings: []chain.Binding{
			{Name: "first", Module: "hostile", Point: "message.outbound", Phase: chain.Observer, Priority: 1},
			{Name: "second", Module: "hostile", Point: "message.outbound", Phase: chain.Observer, Priority: 2},
		},
	}, chain.Options{Runtime: w.rt, HostCaller: w.runner, Logger: slog.New(slog.NewJSONHandler(w.oplog, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	// Each binding quotes what its instance remembers, then leaves a stash.
	script := "@@" + opQuote + opStash("leftbyabinding")
	out, err := c.Run(ctx, chain.Input{Tenant: "acme", Point: "message.outbound", Context: map[string]any{"outgoing": script}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Trace) != 2 {
		t.Fatalf("trace %+v, want two steps", out.Trace)
	}
	for _, s := range out.Trace {
		if s.Decision == nil || s.Decision.Reason != "." {
			t.Errorf("binding %s started on an instance that remembered %+v; want a fresh one", s.Binding, s.Decision)
		}
	}
}
