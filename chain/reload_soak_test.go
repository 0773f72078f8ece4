package chain

import (
	"context"
	"fmt"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// discardSink keeps no audit record: a soak test's traffic would grow any
// sink that does.
type discardSink struct{}

func (discardSink) Append(context.Context, *audit.Record) error { return nil }

// TestReloadSoak reloads a chain hundreds of times, each reload binding a
// module with new bytes (testutil.SoakModule: the same code and function
// types, so wazero's per-Runtime table of function types, a known growth,
// does not grow) under a new binding name (whose breakers the next
// configuration drops) beside the policy guest with new settings, with traffic
// between the reloads and from goroutines running meanwhile. After each
// batch of reloads nothing may have grown past the warm-up batch by more
// than the bounds: the old configurations' modules, their pools and warm
// instances are released (snapshot.release), and the compile cache stays
// at its size. WASMHOOKS_SOAK=1h (make soak) runs it for an hour;
// BENCHMARKS.md has its figures.
func TestReloadSoak(t *testing.T) {
	ctx := context.Background()
	// A small compile cache, which the warm-up batch fills.
	rt, err := runtime.New(ctx, runtime.Config{Logger: quiet(), CacheModules: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	version := uint64(0)
	config := func() Config {
		version++
		tag := fmt.Sprintf("+%d", version%2)
		cfg := policyConfig(t,
			Binding{Name: "stamp", Point: outbound, Phase: Transformer, Settings: appendTo("outgoing", tag)},
			Binding{Name: fmt.Sprintf("soak-%d", version), Module: "soak", Point: outbound, Phase: Guard})
		cfg.Modules["soak"] = testutil.SoakModule(t, version)
		return cfg
	}
	e := newEnv(t, config(), func(o *Options) { o.Runtime, o.Audit = rt, discardSink{} })
	run := func(tenant string) error {
		out, err := e.c.Run(ctx, Input{Tenant: tenant, Point: outbound, Context: map[string]any{"outgoing": "x"}})
		if err == nil && (out.Verdict != Allow || len(out.Trace) != 2) {
			err = fmt.Errorf("run: %s through %v (failures %q)", out.Verdict, names(out.Trace), failures(out.Trace))
		}
		return err
	}
	const reloads, workers = 50, 3
	tenants := []string{"w0", "w1", "w2", "a", "b"} // the workers', then those of the runs between reloads
	bound := testutil.Growth{
		testutil.MeasureHeap: 4 << 20, testutil.MeasureRSS: 32 << 20,
		testutil.MeasureGoroutines: 2, testutil.MeasureFDs: 2,
		"pools": 0, "instances": 0, "idle": 0, "idle_bytes": 0,
	}
	testutil.Soak(t, bound, func() any { return rt.Stats() }, func(int) {
		stop := testutil.Meanwhile(t, workers, func(w int) error { return run(tenants[w]) })
		for range reloads {
			if err := e.c.Reload(ctx, config()); err != nil {
				t.Error(err)
				break
			}
			for _, tenant := range tenants[workers:] {
				if err := run(tenant); err != nil {
					t.Error(err)
				}
			}
		}
		stop()
		// Every tenant once more, one at a time: each has one warm instance
		// per binding, whichever ran last in the batch.
		for _, tenant := range tenants {
			if err := run(tenant); err != nil {
				t.Error(err)
			}
		}
	})
}
