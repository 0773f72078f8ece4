package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/postgres"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// TestServeReloadSoak is chain's TestReloadSoak through the platform, over
// loopback HTTP, on SQLite and (with WASMHOOKS_TEST_POSTGRES) on Postgres:
// hundreds of times, a publisher uploads a new version of a module
// (testutil.SoakModule: new bytes, the same code and function types, so
// wazero's per-Runtime table of function types, a known growth listed in
// SECURITY.md's "Known gaps", does not grow) and publishes it, and the
// tenant's operator binds it beside the policy guest with new settings,
// with runs between the binds and from clients running meanwhile. After
// each batch nothing may have grown past the warm-up batch by more than the
// bounds: each swap releases the old configuration's modules, their pools
// and warm instances. WASMHOOKS_SOAK=1h (make soak) runs it for an hour;
// BENCHMARKS.md has its figures.
func TestServeReloadSoak(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			var db *store.DB
			conns := int64(1) // the connections the database's pool keeps
			if dialect == "postgres" {
				if os.Getenv(storetest.PostgresEnv) == "" {
					t.Skip("no Postgres: " + storetest.PostgresEnv + " is unset")
				}
				db = postgresTarget.OpenAt(t, storetest.PostgresURL(t))
				conns = postgres.MaxConns
			} else {
				db = openSQLite(t, t.TempDir())
			}
			serveSoak(t, db, conns)
		})
	}
}

// serveSoak is TestServeReloadSoak on db, whose pool keeps up to conns
// connections open (as many as the requests overlapped, so far).
func serveSoak(t *testing.T, db *store.DB, conns int64) {
	ctx := context.Background()
	// A small compile cache, which the warm-up batch fills.
	rt, err := runtime.New(ctx, runtime.Config{CacheModules: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	p := startPlatform(t, db, hostKey(), func(o *server.Options) {
		o.Runtime, o.Logger = rt, slog.New(slog.NewTextHandler(io.Discard, nil))
		o.RateLimit = server.RateLimit{PerSecond: 1e6, Burst: 1e6}
		o.UploadQuota.MaxModules = 1 << 30
	})
	const binds, workers = 15, 2
	// One client's connections, all kept: the connections (each a
	// descriptor and goroutines at both ends) are those of the warm-up.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers + 2
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	a := newTenant(t, p, "acme", false)
	for _, c := range []*client.Client{a.pub, a.op, a.rt} {
		c.HTTP = hc
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
     "settings": {"when": "SECRET-%d", "decide": {"action": "block", "reason": "mentions a secret"}}},
    {"name": "soak", "module": "soak", "point": "message.outbound", "phase": "guard"}
  ]
}`, policy, client.Pin(v), version))
		return err
	}
	run := func() error {
		out, err := a.rt.Run(ctx, a.id, "message.outbound", map[string]any{"outgoing": "hello"}, "")
		if err == nil && out.Verdict != "allow" {
			err = fmt.Errorf("run: %s by %s", out.Verdict, out.Binding)
		}
		return err
	}
	if err := bind(); err != nil {
		t.Fatal(err)
	}
	// The policy guest's pool lives as long as it stays bound, and keeps up
	// to MaxIdlePerPool warm instances, as many as the clients' runs
	// overlapped in a batch (each under 1 MiB); the soak module's pool is a
	// new one each bind.
	idle := int64(runtime.DefaultMaxIdlePerPool)
	bound := testutil.Growth{
		testutil.MeasureHeap: 8 << 20, testutil.MeasureRSS: 64 << 20,
		testutil.MeasureGoroutines: 8, testutil.MeasureFDs: 4 + conns,
		"pools": 0, "instances": idle, "idle": idle, "idle_bytes": idle << 20,
	}
	testutil.Soak(t, bound, func() any { return rt.Stats() }, func(int) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := run(); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		for range binds {
			if err := bind(); err != nil {
				t.Error(err)
				break
			}
			if err := run(); err != nil {
				t.Error(err)
			}
		}
		close(stop)
		wg.Wait()
		if err := run(); err != nil { // the last module's pool, warm
			t.Error(err)
		}
	})
}
