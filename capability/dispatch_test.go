package capability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// followCap is a capability that returns the follow-ups its payload names:
// {"follow": ["kind", ...], "use": n, "size": bytes, "fail": bool,
// "panic": bool}. Each follow-up's Data is {"i": index}.
func followCap(name string, cost int64, gates ...Gate) Capability {
	return Capability{
		Name:        name,
		Description: "returns the follow-ups its payload names",
		Schema: `{"type": "object", "properties": {
			"follow": {"type": "array", "items": {"type": "string"}},` + meteredProps + `},
			"additionalProperties": false}`,
		Gates: gates,
		Cost:  func(any) int64 { return cost },
		Execute: func(ctx context.Context, req *Request) (*Result, error) {
			m := req.Payload.(map[string]any)
			var fus []FollowUp
			if list, ok := m["follow"].([]any); ok {
				for i, k := range list {
					fus = append(fus, FollowUp{Kind: k.(string), Data: map[string]any{"i": int64(i)}})
				}
			}
			if m["panic"] == true {
				panic("follow: panic")
			}
			use, size := payloadInt(m, "use"), payloadInt(m, "size")
			res := &Result{Value: strings.Repeat("x", int(size)), Usage: Usage{Credit: use}, FollowUps: fus}
			if m["fail"] == true {
				return res, errors.New("upstream failed")
			}
			return res, nil
		},
	}
}

// recordingDispatcher records every attempt and fails the first failFirst
// attempts of each follow-up (all of them when failFirst < 0).
type recordingDispatcher struct {
	failFirst int
	err       error // what a failing attempt returns; nil means "unavailable"

	mu       sync.Mutex // guards attempts
	attempts []Dispatch
}

func (d *recordingDispatcher) Dispatch(ctx context.Context, x Dispatch) error {
	d.mu.Lock()
	d.attempts = append(d.attempts, x)
	d.mu.Unlock()
	if d.failFirst < 0 || x.Attempt <= d.failFirst {
		if d.err != nil {
			return d.err
		}
		return errors.New("notification service unavailable")
	}
	return nil
}

func (d *recordingDispatcher) all() []Dispatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.attempts)
}

// failures collects what OnFailure is told.
type failures struct {
	mu   sync.Mutex // guards errs
	errs []*DispatchError
}

func (f *failures) on(e *DispatchError) {
	f.mu.Lock()
	f.errs = append(f.errs, e)
	f.mu.Unlock()
}

func (f *failures) all() []*DispatchError {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errs)
}

// fastDispatch are dispatch options whose retries take milliseconds.
func fastDispatch(f *failures) DispatchOptions {
	return DispatchOptions{Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, OnFailure: f.on}
}

func closeRunner(t *testing.T, r *Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestDispatchCarriesIdentityAndKey(t *testing.T) {
	tests := []struct {
		name       string
		invocation string
		seq        int
		wantKeys   []string
	}{
		{"with an invocation id", "inv-7", 3, []string{"inv-7/3/0", "inv-7/3/1"}},
		{"without an invocation id", "", 1, []string{"", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			disp := &recordingDispatcher{}
			usage := &MemoryUsageSink{}
			r := runnerWith(t, RunnerOptions{Dispatcher: disp, Usage: usage}, followCap("notify.send", 0))
			call := newCall("notify.send", `{"follow": ["usage.event", "notify.email"]}`)
			call.Caller.Invocation = tc.invocation
			call.Caller.Requested = []string{"notify.send"}
			call.Caller.HasManifest = true
			call.Seq = tc.seq
			reply := r.HostCall(context.Background(), call)
			if reply.Status != abi.StatusOK {
				t.Fatalf("status %v %s", reply.Status, reply.Body)
			}
			closeRunner(t, r)

			got := disp.all()
			if len(got) != 2 {
				t.Fatalf("%d dispatches, want 2", len(got))
			}
			slices.SortFunc(got, func(a, b Dispatch) int { return a.Index - b.Index })
			wantCaller := abi.Caller{Tenant: "acme", Hook: "redact", Module: "abc123", Invocation: tc.invocation, Point: "message.outbound"}
			for i, d := range got {
				if fmt.Sprint(d.Caller) != fmt.Sprint(wantCaller) {
					t.Errorf("dispatch %d caller %+v, want %+v (identity only, no grants)", i, d.Caller, wantCaller)
				}
				if d.Capability != "notify.send" || d.Seq != tc.seq || d.Index != i || d.Attempt != 1 {
					t.Errorf("dispatch %d = %+v", i, d)
				}
				if d.IdempotencyKey != call.IdempotencyKey() && tc.invocation != "" {
					t.Errorf("dispatch %d key %q, want the call's %q", i, d.IdempotencyKey, call.IdempotencyKey())
				}
				if k := d.Key(); k != tc.wantKeys[i] {
					t.Errorf("dispatch %d Key() = %q, want %q", i, k, tc.wantKeys[i])
				}
				if want := []string{"usage.event", "notify.email"}[i]; d.FollowUp.Kind != want {
					t.Errorf("dispatch %d kind %q, want %q", i, d.FollowUp.Kind, want)
				}
				if fmt.Sprint(d.FollowUp.Data) != fmt.Sprintf("map[i:%d]", i) {
					t.Errorf("dispatch %d data %v", i, d.FollowUp.Data)
				}
			}
			recs := usage.Records()
			if len(recs) != 1 || recs[0].FollowUps != 2 || recs[0].FollowUpsDropped != 0 {
				t.Errorf("usage records %+v, want one with 2 follow-ups, none dropped", recs)
			}
			if s := r.DispatchStats(); s != (DispatchStats{Queued: 2, Delivered: 2}) {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestDispatchFailureNeverChangesTheReply: whatever the Dispatcher does, the
// hook's reply (status, body, charge) is the one it gets without follow-ups;
// a failing dispatch is retried within the bound and then reported.
func TestDispatchFailureNeverChangesTheReply(t *testing.T) {
	tests := []struct {
		name         string
		disp         Dispatcher
		opts         func(*DispatchOptions)
		wantAttempts int
		wantFailed   bool
		wantPanic    bool
		wantErr      string
	}{
		{name: "accepts", disp: &recordingDispatcher{}, wantAttempts: 1},
		{name: "fails twice then accepts", disp: &recordingDispatcher{failFirst: 2}, wantAttempts: 3},
		{name: "always fails: default attempts", disp: &recordingDispatcher{failFirst: -1},
			wantAttempts: DefaultDispatchAttempts, wantFailed: true, wantErr: "unavailable"},
		{name: "always fails: 2 attempts", disp: &recordingDispatcher{failFirst: -1},
			opts: func(o *DispatchOptions) { o.MaxAttempts = 2 }, wantAttempts: 2, wantFailed: true, wantErr: "unavailable"},
		{name: "permanent error is not retried", disp: &recordingDispatcher{failFirst: -1, err: fmt.Errorf("bad address: %w", ErrDispatchPermanent)},
			wantAttempts: 1, wantFailed: true, wantErr: "bad address"},
		{name: "panic is contained and not retried", disp: DispatcherFunc(func(context.Context, Dispatch) error { panic("dispatcher bug") }),
			wantAttempts: 1, wantFailed: true, wantPanic: true, wantErr: "dispatcher bug"},
		{name: "attempt past its timeout", disp: DispatcherFunc(func(ctx context.Context, _ Dispatch) error {
			<-ctx.Done()
			return ctx.Err()
		}), opts: func(o *DispatchOptions) { o.MaxAttempts = 2; o.AttemptTimeout = time.Millisecond },
			wantAttempts: 2, wantFailed: true, wantErr: "deadline"},
	}
	// The reply without any dispatcher, for comparison.
	newWorld := func(opts RunnerOptions) (*Runner, *MemoryLedger) {
		ledger := fundedLedger(t, 100)
		return runnerWith(t, opts, followCap("llm.run", 10, &CreditGate{Ledger: ledger})), ledger
	}
	const payload = `{"follow": ["usage.event"], "use": 4, "size": 3}`
	base, _ := newWorld(RunnerOptions{})
	want := base.HostCall(context.Background(), newCall("llm.run", payload))
	if want.Status != abi.StatusOK || want.Charged != 4 {
		t.Fatalf("baseline reply %v %s charged %d", want.Status, want.Body, want.Charged)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &failures{}
			opts := fastDispatch(f)
			if tc.opts != nil {
				tc.opts(&opts)
			}
			logs := &logBuffer{}
			attempts := &atomic.Int64{}
			counted := DispatcherFunc(func(ctx context.Context, d Dispatch) error {
				attempts.Add(1)
				if d.Attempt != int(attempts.Load()) {
					t.Errorf("attempt %d numbered %d", attempts.Load(), d.Attempt)
				}
				return tc.disp.Dispatch(ctx, d)
			})
			r, ledger := newWorld(RunnerOptions{Dispatcher: counted, Dispatch: opts, Logger: logs.logger()})
			got, err := r.Run(context.Background(), newCall("llm.run", payload))
			if err != nil || got.Status != want.Status || string(got.Body) != string(want.Body) || got.Charged != want.Charged {
				t.Errorf("reply %v %s charged %d err %v; want %v %s charged %d", got.Status, got.Body, got.Charged, err, want.Status, want.Body, want.Charged)
			}
			checkBalance(t, ledger, "acme", 96)
			closeRunner(t, r)

			if n := attempts.Load(); n != int64(tc.wantAttempts) {
				t.Errorf("%d attempts, want %d", n, tc.wantAttempts)
			}
			fails := f.all()
			s := r.DispatchStats()
			if !tc.wantFailed {
				if len(fails) != 0 || s.Delivered != 1 || s.Failed != 0 {
					t.Errorf("failures %v, stats %+v; want delivered", fails, s)
				}
				return
			}
			if len(fails) != 1 {
				t.Fatalf("%d failures reported, want 1", len(fails))
			}
			e := fails[0]
			if !errors.Is(e, ErrDispatchFailed) || e.Attempts != tc.wantAttempts || !strings.Contains(e.Error(), tc.wantErr) {
				t.Errorf("failure %v (attempts %d), want %q after %d attempts", e, e.Attempts, tc.wantErr, tc.wantAttempts)
			}
			if e.Dispatch.Caller.Tenant != "acme" || e.Dispatch.Key() != "inv-1/1/0" {
				t.Errorf("failure names %q %q", e.Dispatch.Caller.Tenant, e.Dispatch.Key())
			}
			if (e.Panic != nil) != tc.wantPanic || (tc.wantPanic && len(e.Stack) == 0) {
				t.Errorf("panic %v, stack %d bytes", e.Panic, len(e.Stack))
			}
			if s.Failed != 1 || s.Delivered != 0 || s.Retried != uint64(tc.wantAttempts-1) || s.Pending != 0 {
				t.Errorf("stats %+v", s)
			}
			if !strings.Contains(logs.String(), "follow-up not delivered") || !strings.Contains(logs.String(), `"tenant":"acme"`) {
				t.Errorf("no failure log: %s", logs.String())
			}
		})
	}
}

// TestDispatchOnlyForSettledCalls: follow-ups go out only when the call
// completed and was settled (OK, RESULT_TOO_LARGE), never for a refused or
// failed call.
func TestDispatchOnlyForSettledCalls(t *testing.T) {
	tests := []struct {
		name       string
		payload    string
		mutate     func(*abi.Call)
		ledger     func(*MemoryLedger) Ledger
		wantStatus abi.Status
		wantSent   int
	}{
		{name: "ok", payload: `{"follow": ["a"], "use": 1}`, wantStatus: abi.StatusOK, wantSent: 1},
		{name: "result too large: the work was done and charged", payload: `{"follow": ["a"], "size": 64}`,
			mutate: func(c *abi.Call) { c.MaxResultBytes = 8 }, wantStatus: abi.StatusResultTooLarge, wantSent: 1},
		{name: "not granted", payload: `{"follow": ["a"]}`,
			mutate: func(c *abi.Call) { c.Caller.Granted = nil }, wantStatus: abi.StatusDenied},
		{name: "invalid payload", payload: `{"follow": "a"}`, wantStatus: abi.StatusInvalidRequest},
		{name: "insufficient credit", payload: `{"follow": ["a"]}`,
			ledger: func(*MemoryLedger) Ledger { return NewMemoryLedger() }, wantStatus: abi.StatusInsufficientCredit},
		{name: "execute failed", payload: `{"follow": ["a"], "fail": true}`, wantStatus: abi.StatusCapabilityFailed},
		{name: "execute panicked", payload: `{"follow": ["a"], "panic": true}`, wantStatus: abi.StatusCapabilityFailed},
		{name: "settle failed", payload: `{"follow": ["a"], "use": 1}`,
			ledger: func(l *MemoryLedger) Ledger { return failingSettle{l} }, wantStatus: abi.StatusCapabilityFailed},
		{name: "cancelled before execute", payload: `{"follow": ["a"]}`,
			mutate: func(c *abi.Call) { c.Caller.Invocation = "cancelled" }, wantStatus: abi.StatusCapabilityFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := fundedLedger(t, 100)
			var ledger Ledger = mem
			if tc.ledger != nil {
				ledger = tc.ledger(mem)
			}
			disp := &recordingDispatcher{}
			f := &failures{}
			usage := &MemoryUsageSink{}
			r := runnerWith(t, RunnerOptions{Dispatcher: disp, Dispatch: fastDispatch(f), Usage: usage}, followCap("svc.do", 5, &CreditGate{Ledger: ledger}))
			call := newCall("svc.do", tc.payload)
			if tc.mutate != nil {
				tc.mutate(call)
			}
			ctx := context.Background()
			if call.Caller.Invocation == "cancelled" {
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			if reply := r.HostCall(ctx, call); reply.Status != tc.wantStatus {
				t.Fatalf("status %v %s, want %v", reply.Status, reply.Body, tc.wantStatus)
			}
			closeRunner(t, r)
			if n := len(disp.all()); n != tc.wantSent {
				t.Errorf("%d dispatched, want %d", n, tc.wantSent)
			}
			if len(f.all()) != 0 {
				t.Errorf("failures reported for follow-ups that were never due: %v", f.all())
			}
			if recs := usage.Records(); len(recs) != 1 || recs[0].FollowUps != tc.wantSent {
				t.Errorf("usage records %+v, want FollowUps %d", recs, tc.wantSent)
			}
		})
	}
}

// TestDispatchDropsAreReported: what cannot be queued is dropped at once,
// counted in the usage record and the stats, and reported; the reply is
// not delayed nor changed.
func TestDispatchDropsAreReported(t *testing.T) {
	block := make(chan struct{})
	blocking := DispatcherFunc(func(ctx context.Context, _ Dispatch) error {
		select {
		case <-block:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	tests := []struct {
		name        string
		disp        Dispatcher
		opts        DispatchOptions
		follow      []string
		wantDropped int
		wantErr     error
	}{
		{name: "no dispatcher", follow: []string{"a", "b"}, wantDropped: 2, wantErr: ErrNoDispatcher},
		{name: "malformed kind", disp: &recordingDispatcher{}, follow: []string{"ok", "Bad Kind", ""}, wantDropped: 2, wantErr: ErrInvalidFollowUp},
		{name: "over MaxPerCall", disp: &recordingDispatcher{}, opts: DispatchOptions{MaxPerCall: 2},
			follow: []string{"a", "b", "c", "d"}, wantDropped: 2, wantErr: ErrTooManyFollowUps},
		{name: "over the default per call", disp: &recordingDispatcher{},
			follow: slices.Repeat([]string{"a"}, DefaultMaxFollowUps+3), wantDropped: 3, wantErr: ErrTooManyFollowUps},
		// One worker holds the first, the queue holds two, the rest is dropped.
		{name: "queue full", disp: blocking, opts: DispatchOptions{QueueSize: 2, Workers: 1},
			follow: []string{"a", "b", "c", "d", "e", "f"}, wantDropped: 3, wantErr: ErrDispatchQueueFull},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &failures{}
			tc.opts.OnFailure = f.on
			usage := &MemoryUsageSink{}
			logs := &logBuffer{}
			r := runnerWith(t, RunnerOptions{Dispatcher: tc.disp, Dispatch: tc.opts, Usage: usage, Logger: logs.logger()}, followCap("svc.do", 0))
			follow, _ := json.Marshal(tc.follow)
			call := newCall("svc.do", `{"follow": `+string(follow)+`}`)
			if tc.wantErr == ErrDispatchQueueFull {
				// Let the worker take the first before the others arrive.
				first := newCall("svc.do", `{"follow": ["a"]}`)
				first.Caller.Invocation = "inv-0"
				r.HostCall(context.Background(), first)
				deadline := time.Now().Add(5 * time.Second)
				for r.DispatchStats().Pending != 1 || len(r.dispatch.queue) != 0 {
					if time.Now().After(deadline) {
						t.Fatal("the worker never took the first follow-up")
					}
					time.Sleep(time.Millisecond)
				}
				tc.follow = tc.follow[1:] // the first call's one is in the worker
				call = newCall("svc.do", `{"follow": ["b", "c", "d", "e", "f"]}`)
			}
			start := time.Now()
			reply := r.HostCall(context.Background(), call)
			if reply.Status != abi.StatusOK || string(reply.Body) != `""` {
				t.Errorf("reply %v %s", reply.Status, reply.Body)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the call took %v", d)
			}
			recs := usage.Records()
			last := recs[len(recs)-1]
			if last.FollowUps != len(tc.follow) || last.FollowUpsDropped != tc.wantDropped {
				t.Errorf("usage record follow-ups %d dropped %d, want %d, %d", last.FollowUps, last.FollowUpsDropped, len(tc.follow), tc.wantDropped)
			}
			fails := f.all()
			total := 0
			for _, e := range fails {
				total += e.Count
				if !errors.Is(e, tc.wantErr) || !errors.Is(e, ErrDispatchFailed) || e.Attempts != 0 {
					t.Errorf("failure %v, want %v with no attempt", e, tc.wantErr)
				}
			}
			if total != tc.wantDropped {
				t.Fatalf("failures reported for %d follow-ups, want %d: %v", total, tc.wantDropped, fails)
			}
			if tc.wantErr == ErrTooManyFollowUps {
				// One error for all those past the limit, however many.
				if len(fails) != 1 || fails[0].Dispatch.Index != len(tc.follow)-tc.wantDropped {
					t.Errorf("failures %v, want one at index %d", fails, len(tc.follow)-tc.wantDropped)
				}
			}
			// One log line for the call's drops, however many.
			if n := strings.Count(logs.String(), "follow-ups dropped"); n != 1 || !strings.Contains(logs.String(), fmt.Sprintf(`"dropped":%d`, tc.wantDropped)) {
				t.Errorf("%d drop log lines, want 1 counting %d: %s", n, tc.wantDropped, logs.String())
			}
			if s := r.DispatchStats(); s.Dropped != uint64(tc.wantDropped) {
				t.Errorf("stats %+v, want %d dropped", s, tc.wantDropped)
			}
			if tc.wantErr == ErrDispatchQueueFull {
				close(block)
			}
			closeRunner(t, r)
			s := r.DispatchStats()
			if s.Queued != s.Delivered+s.Failed || s.Pending != 0 {
				t.Errorf("after Close: stats %+v", s)
			}
		})
	}
}

// TestDispatchClose: Close drains what is queued; when its context ends
// first, what is left is reported as failed, and follow-ups after Close are
// dropped while calls are still answered.
func TestDispatchClose(t *testing.T) {
	stuck := DispatcherFunc(func(ctx context.Context, _ Dispatch) error {
		<-ctx.Done()
		return ctx.Err()
	})
	f := &failures{}
	reg := NewRegistry()
	reg.MustRegister(followCap("svc.do", 0))
	r := mustRunner(t, reg, RunnerOptions{Dispatcher: stuck, Dispatch: DispatchOptions{Workers: 1, OnFailure: f.on}})
	if reply := r.HostCall(context.Background(), newCall("svc.do", `{"follow": ["a", "b", "c"]}`)); reply.Status != abi.StatusOK {
		t.Fatalf("status %v", reply.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Close(ctx); !errors.Is(err, ErrRunnerClosed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want ErrRunnerClosed and the deadline", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(f.all()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 follow-ups reported after Close gave up", len(f.all()))
		}
		time.Sleep(time.Millisecond)
	}
	for _, e := range f.all() {
		if !errors.Is(e, ErrRunnerClosed) {
			t.Errorf("failure %v, want ErrRunnerClosed", e)
		}
	}
	// After Close: answered, follow-ups dropped and reported.
	call := newCall("svc.do", `{"follow": ["d"]}`)
	call.Seq = 2
	if reply := r.HostCall(context.Background(), call); reply.Status != abi.StatusOK {
		t.Fatalf("status after Close %v", reply.Status)
	}
	if fails := f.all(); len(fails) != 4 || !errors.Is(fails[3], ErrRunnerClosed) || fails[3].Attempts != 0 {
		t.Errorf("failures after Close %v", fails)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if s := r.DispatchStats(); s.Queued != 3 || s.Failed != 3 || s.Dropped != 1 || s.Pending != 0 {
		t.Errorf("stats %+v", s)
	}

	// A runner that never dispatched closes at once.
	idle := mustRunner(t, reg, RunnerOptions{Dispatcher: stuck})
	closeRunner(t, idle)
	none := mustRunner(t, reg, RunnerOptions{})
	closeRunner(t, none)
}

// TestDispatchConcurrent hammers the runner from many goroutines with a
// flaky dispatcher: every follow-up is delivered at least once, exactly one
// success per key, with the caller's identity; run with -race.
func TestDispatchConcurrent(t *testing.T) {
	const goroutines, calls = 8, 50
	var mu sync.Mutex // guards delivered
	delivered := map[string]int{}
	var n atomic.Int64
	flaky := DispatcherFunc(func(_ context.Context, d Dispatch) error {
		if n.Add(1)%3 == 0 {
			return errors.New("flaky")
		}
		if want := "tenant-" + strings.Split(d.Caller.Invocation, "-")[1]; d.Caller.Tenant != want {
			return fmt.Errorf("%w: tenant %q for invocation %q", ErrDispatchPermanent, d.Caller.Tenant, d.Caller.Invocation)
		}
		mu.Lock()
		delivered[d.Caller.Tenant+"|"+d.Key()]++
		mu.Unlock()
		return nil
	})
	f := &failures{}
	r := runnerWith(t, RunnerOptions{Dispatcher: flaky, Dispatch: DispatchOptions{
		QueueSize: goroutines * calls * 2, Backoff: time.Microsecond, MaxBackoff: time.Microsecond, MaxAttempts: 10, OnFailure: f.on}}, followCap("svc.do", 0))
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				call := newCall("svc.do", `{"follow": ["a", "b"]}`)
				call.Caller.Tenant = fmt.Sprintf("tenant-%d", g)
				call.Caller.Invocation = fmt.Sprintf("inv-%d-%d", g, i)
				if reply := r.HostCall(context.Background(), call); reply.Status != abi.StatusOK {
					t.Errorf("status %v", reply.Status)
				}
			}
		})
	}
	wg.Wait()
	closeRunner(t, r)
	if fails := f.all(); len(fails) != 0 {
		t.Fatalf("%d failures, first %v", len(fails), fails[0])
	}
	if len(delivered) != goroutines*calls*2 {
		t.Errorf("%d distinct follow-ups delivered, want %d", len(delivered), goroutines*calls*2)
	}
	for k, c := range delivered {
		if c != 1 {
			t.Errorf("%s delivered %d times", k, c)
		}
	}
	s := r.DispatchStats()
	if s.Queued != goroutines*calls*2 || s.Delivered != s.Queued || s.Pending != 0 || s.Retried == 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestDispatchOnFailurePanicIsContained: a panicking OnFailure (on the call's
// goroutine for a drop) is logged, and the reply stands.
func TestDispatchOnFailurePanicIsContained(t *testing.T) {
	logs := &logBuffer{}
	r := runnerWith(t, RunnerOptions{Logger: logs.logger(), Dispatch: DispatchOptions{OnFailure: func(*DispatchError) { panic("sink bug") }}}, followCap("svc.do", 0))
	reply, err := r.Run(context.Background(), newCall("svc.do", `{"follow": ["a"]}`))
	if err != nil || reply.Status != abi.StatusOK {
		t.Fatalf("reply %v err %v", reply.Status, err)
	}
	if !strings.Contains(logs.String(), "OnFailure panicked") {
		t.Errorf("no log of the panic: %s", logs.String())
	}
}

// TestDispatchBackoff: the waits double from Backoff up to MaxBackoff, each
// drawn in [half, all] of its nominal value.
func TestDispatchBackoff(t *testing.T) {
	q, err := newDispatchQueue(nil, DispatchOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for attempt, nominal := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		6: 3200 * time.Millisecond, 7: 5 * time.Second, 60: 5 * time.Second,
	} {
		for range 50 {
			if w := q.backoff(attempt); w < nominal/2 || w > nominal {
				t.Fatalf("backoff after attempt %d = %v, want in [%v, %v]", attempt, w, nominal/2, nominal)
			}
		}
	}
}

func TestNewRunnerDispatchOptions(t *testing.T) {
	for _, o := range []DispatchOptions{
		{QueueSize: -1}, {Workers: -1}, {MaxAttempts: -1}, {Backoff: -1}, {MaxBackoff: -1}, {AttemptTimeout: -1}, {MaxPerCall: -1},
	} {
		if _, err := NewRunner(NewRegistry(), RunnerOptions{Dispatch: o}); err == nil {
			t.Errorf("NewRunner accepted %+v", o)
		}
	}
}

// TestRunnerAllocationsWithDispatcher: a configured Dispatcher costs nothing
// on a call that returns no follow-up (TestRunnerAllocations' budget).
func TestRunnerAllocationsWithDispatcher(t *testing.T) {
	checkNoopAllocations(t, RunnerOptions{Dispatcher: &recordingDispatcher{}})
}

// TestDispatchExcessCostsNoMoreThanMaxPerCall: a call returning 100,000
// follow-ups costs the runner what MaxPerCall of them cost (one error for
// the excess), not an error each: the hook may choose the count.
func TestDispatchExcessCostsNoMoreThanMaxPerCall(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	q, err := newDispatchQueue(nil, DispatchOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fus := make([]FollowUp, 100_000)
	for i := range fus {
		fus[i] = FollowUp{Kind: "notify.send"}
	}
	var drops []*DispatchError
	allocs := testing.AllocsPerRun(10, func() { drops = q.put(Dispatch{}, fus) })
	n := 0
	for _, e := range drops {
		n += e.Count
	}
	if n != len(fus) || len(drops) != DefaultMaxFollowUps+1 {
		t.Errorf("%d errors for %d follow-ups, want %d for %d", len(drops), n, DefaultMaxFollowUps+1, len(fus))
	}
	if allocs > 2*DefaultMaxFollowUps {
		t.Errorf("%v allocations for a call of %d follow-ups, want at most %d", allocs, len(fus), 2*DefaultMaxFollowUps)
	}
}
