package adversarial

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threats to the dispatch of follow-up work (issue 12 item 7), from hostile
// hooks through the real runtime: the follow-ups a capability returns carry
// the identity the runtime gave the call, whatever the payload says; a hook
// cannot flood the platform through them nor be slowed by the platform's
// dispatcher; a refused or failed call dispatches nothing.

// fanoutName is a free capability that returns one "notify.send" follow-up
// per recipient in its payload ({"to": [...], "tenant": ignored, "fail":
// bool}).
const fanoutName = "notify.fanout"

func fanoutCap() capability.Capability {
	return capability.Capability{
		Name:        fanoutName,
		Description: "notifies each recipient, after the call",
		Schema: `{"type": "object", "properties": {"to": {"type": "array", "items": {"type": "string"}},
			"fail": {"type": "boolean"}}, "required": ["to"]}`,
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			m := req.Payload.(map[string]any)
			to := m["to"].([]any)
			res := &capability.Result{Value: map[string]any{"sent": int64(len(to))}}
			for _, addr := range to {
				res.FollowUps = append(res.FollowUps, capability.FollowUp{Kind: "notify.send", Data: map[string]any{"to": addr}})
			}
			if m["fail"] == true {
				return res, errors.New("mail relay refused: " + secret)
			}
			return res, nil
		},
	}
}

// dispatchRecorder is the platform's Dispatcher: it records what it
// accepts, fails while failing is set, and waits for block while it is open.
type dispatchRecorder struct {
	failing atomic.Bool
	block   chan struct{} // nil: never waits

	mu  sync.Mutex // guards got
	got []capability.Dispatch
}

func (d *dispatchRecorder) Dispatch(ctx context.Context, x capability.Dispatch) error {
	if d.block != nil {
		select {
		case <-d.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if d.failing.Load() {
		return errors.New("notification service down")
	}
	d.mu.Lock()
	d.got = append(d.got, x)
	d.mu.Unlock()
	return nil
}

func (d *dispatchRecorder) all() []capability.Dispatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.got)
}

// newDispatchWorld is a world whose runner has fanoutCap and rec as its
// Dispatcher; the runner is closed (its workers gone) before the world's
// invariants are checked.
func newDispatchWorld(t *testing.T, rec capability.Dispatcher, opts capability.DispatchOptions) *world {
	w := newWorld(t, func(o *options) {
		o.caps = append(o.caps, fanoutCap())
		o.runner.Dispatcher = rec
		o.runner.Dispatch = opts
	})
	t.Cleanup(func() { // runs before the invariants, registered earlier
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.runner.Close(ctx); err != nil {
			t.Errorf("runner Close: %v", err)
		}
	})
	return w
}

// runFanout invokes hostile.wat as hook for tenant, granted notify.fanout.
func (w *world) runFanout(t *testing.T, tenant, hook, script string) *runtime.Result {
	t.Helper()
	res, err := w.invoke(t, w.hostile, runtime.Request{Tenant: tenant, Hook: hook,
		Grants: append(slices.Clone(allGrants), fanoutName), Limits: runtime.Limits{Timeout: 10 * time.Second},
		Context: map[string]any{"outgoing": "@@" + script}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func closeRunner(t *testing.T, w *world) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.runner.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// Threat: follow-up work attributed to another tenant or hook (the payload
// names one). Defence: the runner stamps each Dispatch with the Caller the
// runtime built: tenant, hook, module digest, invocation, and the key.
func TestDispatchIdentityFromTheRuntime(t *testing.T) {
	rec := &dispatchRecorder{}
	w := newDispatchWorld(t, rec, capability.DispatchOptions{})
	payload := `{"to": ["a@x", "b@x"], "tenant": "victim", "hook": "admin", "invocation": "inv-1"}`
	res := w.runFanout(t, "mallory", "spoofer", opHostCall("echo", `{}`, 64)+opHostCall(fanoutName, payload, 256))
	if got := calls(t, res); len(got) != 2 || got[1].status != abi.StatusOK || got[1].body != `{"sent":2}` {
		t.Fatalf("host calls %+v", got)
	}
	closeRunner(t, w)
	got := rec.all()
	if len(got) != 2 {
		t.Fatalf("%d dispatches, want 2", len(got))
	}
	slices.SortFunc(got, func(a, b capability.Dispatch) int { return a.Index - b.Index })
	inv := got[0].Caller.Invocation
	w.mu.Lock()
	tenant := w.tenantOf[inv]
	w.mu.Unlock()
	if tenant != "mallory" {
		t.Errorf("dispatch invocation %q is not the hook's", inv)
	}
	for i, d := range got {
		c := d.Caller
		if c.Tenant != "mallory" || c.Hook != "spoofer" || c.Module != w.hostile.Digest() || c.Invocation != inv || c.Granted != nil {
			t.Errorf("dispatch %d caller %+v", i, c)
		}
		if want := fmt.Sprintf("%s/2/%d", inv, i); d.Key() != want || d.Seq != 2 {
			t.Errorf("dispatch %d key %q seq %d, want %q, 2", i, d.Key(), d.Seq, want)
		}
	}
}

// Threat: a hook flooding the platform through follow-ups: thousands per
// call, and calls while the dispatcher is stuck. Defence: MaxPerCall and a
// bounded queue; the excess is dropped and reported, and the hook's calls
// never wait for the dispatcher.
func TestDispatchFloodIsBoundedAndNeverWaitedFor(t *testing.T) {
	rec := &dispatchRecorder{block: make(chan struct{})}
	var reported atomic.Int64
	w := newDispatchWorld(t, rec, capability.DispatchOptions{QueueSize: 8, Workers: 1,
		OnFailure: func(e *capability.DispatchError) { reported.Add(int64(e.Count)) }})
	to := make([]string, 1000)
	for i := range to {
		to[i] = fmt.Sprintf(`"u%d@x"`, i)
	}
	payload := `{"to": [` + strings.Join(to, ",") + `]}`
	var script string
	for range 4 {
		script += opHostCall(fanoutName, payload, 256)
	}
	var res *runtime.Result
	within(t, 2*time.Second, "an invocation whose follow-ups the dispatcher cannot take", func() {
		res = w.runFanout(t, "acme", "flood", script)
	})
	for i, c := range calls(t, res) {
		if c.status != abi.StatusOK || c.body != `{"sent":1000}` {
			t.Errorf("call %d: %v %s", i, c.status, c.body)
		}
	}
	// 4 calls x 16 follow-ups (the rest over MaxPerCall); 1 in the worker
	// and 8 in the queue, the rest dropped.
	s := w.runner.DispatchStats()
	if s.Queued+s.Dropped != 4000 || s.Queued > 9 || s.Pending != int64(s.Queued) {
		t.Errorf("stats %+v", s)
	}
	if reported.Load() != int64(s.Dropped) {
		t.Errorf("%d reported, %d dropped", reported.Load(), s.Dropped)
	}
	dropped := 0
	for _, r := range w.usage.Records() {
		if r.Capability == fanoutName {
			dropped += r.FollowUpsDropped
		}
	}
	if dropped != int(s.Dropped) {
		t.Errorf("usage records count %d dropped, stats %d", dropped, s.Dropped)
	}
	// The operator's log gets one line per call, not one per drop.
	if n := strings.Count(w.oplog.String(), "follow-ups dropped"); n != 4 {
		t.Errorf("%d log lines for the drops, want 4 (one per call)", n)
	}
	close(rec.block)
	closeRunner(t, w)
	if n := len(rec.all()); uint64(n) != s.Queued {
		t.Errorf("%d delivered, %d were queued", n, s.Queued)
	}
}

// Threat: a platform dispatcher that is down changing what hooks see, or
// leaking a provider's failure to them. Defence: the reply is decided before
// dispatch; the failures are reported to the operator only.
func TestDispatchFailureIsTheOperatorsOnly(t *testing.T) {
	rec := &dispatchRecorder{}
	rec.failing.Store(true)
	var reported atomic.Int64
	w := newDispatchWorld(t, rec, capability.DispatchOptions{MaxAttempts: 2, Backoff: time.Millisecond,
		OnFailure: func(*capability.DispatchError) { reported.Add(1) }})
	res := w.runFanout(t, "acme", "h", opHostCall(fanoutName, `{"to": ["a"]}`, 256))
	if c := calls(t, res)[0]; c.status != abi.StatusOK || c.body != `{"sent":1}` {
		t.Errorf("call: %v %s", c.status, c.body)
	}
	closeRunner(t, w)
	if reported.Load() != 1 || !strings.Contains(w.oplog.String(), "follow-up not delivered") {
		t.Errorf("%d reported; log %s", reported.Load(), w.oplog.String())
	}
}

// Threat: follow-up work obtained through a call that was refused or
// failed. Defence: only a settled call dispatches.
func TestDispatchNothingForRefusedOrFailedCalls(t *testing.T) {
	rec := &dispatchRecorder{}
	w := newDispatchWorld(t, rec, capability.DispatchOptions{})
	// Not granted: run without the fanout grant.
	res, err := w.run(t, "acme", runtime.Limits{}, opHostCall(fanoutName, `{"to": ["a"]}`, 256))
	if err != nil {
		t.Fatal(err)
	}
	res2 := w.runFanout(t, "acme", "h", opHostCall(fanoutName, `{"to": ["a"], "fail": true}`, 256)+
		opHostCall(fanoutName, `{"to": "a"}`, 256))
	got := append(calls(t, res), calls(t, res2)...)
	want := []abi.Status{abi.StatusDenied, abi.StatusCapabilityFailed, abi.StatusInvalidRequest}
	if len(got) != len(want) {
		t.Fatalf("%d calls reported, want %d", len(got), len(want))
	}
	for i, c := range got {
		if c.status != want[i] {
			t.Errorf("call %d: %v, want %v", i, c.status, want[i])
		}
		checkSanitised(t, "error body", c.body)
	}
	closeRunner(t, w)
	if n := len(rec.all()); n != 0 {
		t.Errorf("%d follow-ups dispatched for refused and failed calls", n)
	}
	if s := w.runner.DispatchStats(); s != (capability.DispatchStats{}) {
		t.Errorf("stats %+v", s)
	}
}
