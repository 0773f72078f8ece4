package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
	"github.com/wasmhooks/wasmhooks/store/postgres"
)

// TestServeReloadSoak is chain's TestReloadSoak through the platform, over
// loopback HTTP: hundreds of times, a publisher uploads a new version of a
// module (testutil.SoakModule: new bytes, the same code and function types,
// so wazero's per-Runtime table of function types, a known growth listed in
// SECURITY.md's "Known gaps", does not grow) and publishes it, and the
// tenant's operator binds it, under a new binding name (whose metric series
// the next configuration drops), beside the policy guest with new
// settings, with runs between the binds and from clients running
// meanwhile. On
// SQLite one node; on Postgres (WASMHOOKS_TEST_POSTGRES) two, the second
// reloading on each bind's notification (reloadTenant) and serving runs
// too. After each batch nothing may have grown past the warm-up batch by
// more than the bounds: each swap releases the old configuration's
// modules, their pools and warm instances. WASMHOOKS_SOAK=1h (make soak)
// runs it for an hour; BENCHMARKS.md has its figures.
func TestServeReloadSoak(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, dialect string) {
		var rts []*runtime.Runtime
		tweak := func(o *server.Options) {
			// A small compile cache, which the warm-up batch fills.
			rt, err := runtime.New(context.Background(), runtime.Config{CacheModules: 8})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rt.Close(context.Background()) })
			rts = append(rts, rt)
			o.Runtime, o.Logger = rt, slog.New(slog.NewTextHandler(io.Discard, nil))
			o.RateLimit = server.RateLimit{PerSecond: 1e6, Burst: 1e6}
			o.UploadQuota.MaxModules = 1 << 30
		}
		var nodes []*platform
		conns := int64(1) // the connections the database pools keep
		if dialect == "postgres" {
			nodes = newCluster(t, 2, func(_ int, o *server.Options) { tweak(o) }).nodes
			conns = 2 * postgres.MaxConns
		} else {
			nodes = []*platform{startPlatform(t, openSQLite(t, t.TempDir()), hostKey(), tweak)}
		}
		serveSoak(t, nodes, rts, conns)
	})
}

// serveSoak is TestServeReloadSoak on nodes, whose runtimes are rts and
// whose database pools keep up to conns connections open (as many as the
// requests overlapped, so far). Binds go to the first node, runs to all.
func serveSoak(t *testing.T, nodes []*platform, rts []*runtime.Runtime, conns int64) {
	ctx := context.Background()
	const binds, workers = 15, 2
	// One client's connections, all kept: the connections (each a
	// descriptor and goroutines at both ends) are those of the warm-up.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers + 2
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	a := newTenant(t, nodes[0], "acme", false)
	for _, c := range []*client.Client{a.pub, a.op} {
		c.HTTP = hc
	}
	var runners []*client.Client // the tenant's runtime key, on each node
	for _, n := range nodes {
		c := on(a.rt, n)
		c.HTTP = hc
		runners = append(runners, c)
	}
	policy := publishPolicy(t, a.pub)
	version := 0
	bind := func() error {
		version++
		mod, err := a.pub.UploadModule(ctx, "pubco", testutil.SoakModule(t, uint64(version)))
		if err != nil {
			return err
		}
		v, err := a.pub.Publish(ctx, "pubco", "soak", fmt.Sprintf("1.0.%d", version), mod.Digest)
		if err != nil {
			return err
		}
		_, err = a.op.BindChain(ctx, a.id, fmt.Appendf(nil, `{
  "modules": {"policy": %q, "soak": %q},
  "bindings": [
    {"name": "no-secrets", "module": "policy", "point": "message.outbound", "phase": "guard",
     "settings": {"when": "<SECRET-%d>", "decide": {"action": "block", "reason": "mentions a secret"}}},
    {"name": "soak-%d", "module": "soak", "point": "message.outbound", "phase": "guard"}
  ]
}`, policy, client.Pin(v), version, version))
		return err
	}
	run := func(node int, outgoing, want string) error {
		out, err := runners[node].Run(ctx, a.id, "message.outbound", map[string]any{"outgoing": outgoing}, "")
		if err == nil && out.Verdict != want {
			err = fmt.Errorf("run on node %d: %s by %s (%s), want %s", node, out.Verdict, out.Binding, out.Reason, want)
		}
		return err
	}
	// settle waits until every node runs the last bind (the others reload
	// it when told: the last version alone blocks its own secret), then
	// runs each binding once on each node (the guard's block skipped the
	// next), so that each has a warm instance.
	settle := func() {
		secret := fmt.Sprintf("<SECRET-%d>", version)
		for n := range nodes {
			for deadline := time.Now().Add(30 * time.Second); run(n, secret, "block") != nil; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Errorf("node %d does not run version %d of the binding: %v", n, version, run(n, secret, "block"))
					return
				}
			}
			if err := run(n, "hello", "allow"); err != nil {
				t.Error(err)
			}
		}
	}
	if err := bind(); err != nil {
		t.Fatal(err)
	}
	settle()
	// The policy guest's pool on each node lives as long as it stays
	// bound, and keeps up to MaxIdlePerPool warm instances, as many as the
	// clients' runs overlapped in a batch (each under 1 MiB); the soak
	// module's pool is a new one each bind.
	idle := int64(len(nodes) * runtime.DefaultMaxIdlePerPool)
	bound := testutil.Growth{
		testutil.MeasureHeap: 8 << 20, testutil.MeasureRSS: 64 << 20,
		testutil.MeasureGoroutines: 8, testutil.MeasureFDs: 4 + conns,
		"pools": 0, "instances": idle, "idle": idle, "idle_bytes": idle << 20,
	}
	testutil.Soak(t, bound, func() any {
		var sum runtime.Stats
		for _, rt := range rts {
			s := rt.Stats()
			sum.Modules += s.Modules
			sum.Pools += s.Pools
			sum.Instances += s.Instances
			sum.Idle += s.Idle
			sum.IdleBytes += s.IdleBytes
		}
		return sum
	}, func(int) {
		stop := testutil.Meanwhile(t, workers, func(w int) error { return run(w%len(nodes), "hello", "allow") })
		for range binds {
			if err := bind(); err != nil {
				t.Error(err)
				break
			}
			if err := run(0, "hello", "allow"); err != nil {
				t.Error(err)
			}
		}
		stop()
		settle()
	})
}
