package chain

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

// gate is a HostCaller whose "t.wait" blocks until released, so a test can
// hold a run in flight.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 16), release: make(chan struct{})} }

func (g *gate) HostCall(ctx context.Context, call *abi.Call) abi.Reply {
	if call.Name != "t.wait" {
		return abi.ErrorReply(abi.StatusUnknownCapability, "unknown")
	}
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	return abi.Reply{Status: abi.StatusOK, Body: []byte(`{}`)}
}

// TestReloadWhileARunIsInFlight holds a run inside a host call, swaps the
// configuration, and checks that the held run finishes on the configuration
// it started with while new runs use the new one, and that the old
// configuration's modules are released only when the held run ends.
func TestReloadWhileARunIsInFlight(t *testing.T) {
	g := newGate()
	cfgA := policyConfig(t, Binding{Name: "waiter", Module: "scripted", Point: outbound, Phase: Guard,
		Grants: []string{"t.wait"}, Settings: script(hostCallScript("t.wait"))})
	cfgB := policyConfig(t, Binding{Name: "stamp-b", Point: outbound, Phase: Transformer, Settings: appendTo("outgoing", "+B")})
	e := newEnv(t, cfgA, func(o *Options) { o.HostCaller = g })
	snapA := e.c.cur.Load()

	done := make(chan *Outcome)
	go func() {
		out, err := e.c.Run(context.Background(), Input{Tenant: "acme", Point: outbound, Context: map[string]any{"outgoing": "x"}})
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	<-g.entered
	if err := e.c.Reload(context.Background(), cfgB); err != nil {
		t.Fatal(err)
	}
	if n := snapA.refs.Load(); n != 1 {
		t.Errorf("old configuration has %d references while its run is in flight, want 1", n)
	}
	outB := e.run(t, outbound, map[string]any{"outgoing": "x"})
	if outB.Context["outgoing"] != "x+B" || outB.Config == snapA.digest {
		t.Errorf("new run: %+v", outB)
	}
	close(g.release)
	outA := <-done
	if outA.Config != snapA.digest || len(outA.Trace) != 1 || outA.Trace[0].Binding != "waiter" || outA.Verdict != Block {
		t.Errorf("held run: %+v", outA)
	}
	if n := snapA.refs.Load(); n != 0 {
		t.Errorf("old configuration still has %d references after its last run", n)
	}
}

// TestReloadHammer runs the chain from several goroutines while the
// configuration flips between two versions; every outcome must be
// consistent with the configuration it reports. Run it with -race.
func TestReloadHammer(t *testing.T) {
	cfg := func(tag string) Config {
		return policyConfig(t,
			Binding{Name: "stamp-" + tag, Point: outbound, Phase: Transformer, Settings: appendTo("outgoing", "+"+tag)},
			Binding{Name: "guard-" + tag, Point: outbound, Phase: Guard, Settings: when("never", `{"action":"block"}`)})
	}
	e := newEnv(t, cfg("A"))
	digest := map[string]string{}
	for _, tag := range []string{"B", "A"} {
		if err := e.c.Reload(context.Background(), cfg(tag)); err != nil {
			t.Fatal(err)
		}
		info, _ := e.c.Info()
		digest[info.Digest] = tag
	}
	const workers, runs, reloads = 6, 25, 30
	var wg sync.WaitGroup
	errs := make(chan error, workers*runs+reloads)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < runs; i++ {
				out, err := e.c.Run(context.Background(), Input{Tenant: fmt.Sprintf("t%d", w%2), Point: outbound, Context: map[string]any{"outgoing": "x"}})
				if err != nil {
					errs <- err
					return
				}
				tag := digest[out.Config]
				if out.Context["outgoing"] != "x+"+tag || len(out.Trace) != 2 || out.Trace[0].Binding != "stamp-"+tag || out.Trace[1].Binding != "guard-"+tag {
					errs <- fmt.Errorf("run on configuration %s saw %v through %v (failures %q)", tag, out.Context, names(out.Trace), failures(out.Trace))
				}
			}
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < reloads; i++ {
			tag := []string{"A", "B"}[i%2]
			if err := e.c.Reload(context.Background(), cfg(tag)); err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
