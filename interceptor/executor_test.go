package interceptor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func newExecutor(t *testing.T, ds ...Descriptor) *Executor {
	t.Helper()
	return newExecutorWith(t, newHostCaller(t), ds...)
}

// newExecutorWith is newExecutor with hc answering the host calls.
func newExecutorWith(t *testing.T, hc runtime.HostCaller, ds ...Descriptor) *Executor {
	t.Helper()
	cfg := Config{Modules: map[string][]byte{}}
	for _, d := range ds {
		if _, ok := cfg.Modules[d.Module]; !ok {
			cfg.Modules[d.Module] = buildHook(t, d.Module)
		}
		cfg.Interceptors = append(cfg.Interceptors, d)
	}
	x, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), HostCaller: hc, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close(context.Background()) })
	return x
}

// Responses of one session that run at once must each leave their taint:
// the key-value store has no compare-and-swap, so the executor serialises a
// session's executions. Without it, concurrent read-modify-writes of the
// taint lose secrets, and their relay is let through. Traffic without a
// sessionId (a stdio client that sends none: its MCP session has no id) is
// one session, the hooks' key "taint/", serialised as a named one; it was
// not (no lock for "").
func TestSessionStateUnderConcurrency(t *testing.T) {
	for _, tt := range []struct {
		name string
		ictx *InvocationContext
	}{{"named", &InvocationContext{SessionID: "busy"}}, {"unnamed", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			x := newExecutor(t, Descriptor{Name: "guard", Type: TypeValidation, Events: []string{"*"}, Module: "cross-boundary-guard", Grants: []string{"kv.get", "kv.set"}})
			const n = 12
			secret := func(i int) string { return fmt.Sprintf("ghp_Concurrent%02dSecretToken0123", i) }
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseResponse, Context: tt.ictx,
						Payload: map[string]any{"name": "read_file", "content": secret(i)}})
					if e != nil || r.Status != StatusSuccess {
						t.Errorf("response %d: %v %+v", i, e, r)
					}
				}(i)
			}
			wg.Wait()
			for i := 0; i < n; i++ {
				r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseRequest, Context: tt.ictx,
					Payload: map[string]any{"name": "fetch", "arguments": map[string]any{"body": secret(i)}}})
				if e != nil || r.Status != StatusValidationFailed {
					t.Errorf("relay of secret %d: %v status %s, want validation_failed", i, e, r.Status)
				}
			}
		})
	}
}

// A failing interceptor keeps running: the chains' breakers are off, so one
// session's failures never decide for the others.
func TestNoBreakerAcrossSessions(t *testing.T) {
	x := newExecutor(t, Descriptor{Name: "crash", Type: TypeValidation, Events: []string{"*"}, Module: "behaviors",
		Settings: map[string]any{"behavior": "crash"}, FailOpen: true})
	for i := 0; i < 8; i++ {
		r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseRequest,
			Context: &InvocationContext{SessionID: fmt.Sprint("s", i)}, Payload: map[string]any{}})
		if e != nil || r.Status != StatusSuccess || len(r.Results) != 1 {
			t.Fatalf("run %d: %v %+v", i, e, r)
		}
		if got := r.Results[0].Info["failure"]; got == nil || got == "circuit_open" {
			t.Fatalf("run %d: failure %v, want the hook's own (it ran; no breaker skipped it)", i, got)
		}
		if r.Results[0].Severity != "warn" || r.ValidationSummary.Warnings != 1 {
			t.Errorf("run %d: a fail-open failure is a warning: %+v", i, r.Results[0])
		}
	}
}

// The chains an Executor keeps are bounded: a client naming ever new
// "interceptors" selections (each its own chain) makes the cache start
// again past MaxChains, never grow past it, and every run still answers.
func TestChainCacheBounded(t *testing.T) {
	const n = 9 // 2^9-1 = 511 selections, each a chain of its own
	var ds []Descriptor
	for i := 0; i < n; i++ {
		ds = append(ds, Descriptor{Name: fmt.Sprint("v", i), Type: TypeValidation, Events: []string{"*"}, Phases: PhaseRequest,
			Module: "behaviors", Settings: map[string]any{"behavior": "allow-all"}})
	}
	x := newExecutor(t, ds...)
	peak := 0
	for sel := 1; sel <= MaxChains+40; sel++ {
		var only []string
		for i := 0; i < n; i++ {
			if sel&(1<<i) != 0 {
				only = append(only, ds[i].Name)
			}
		}
		r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseRequest, Payload: map[string]any{}, Only: only})
		if e != nil || r.Status != StatusSuccess || len(r.Results) != len(only) {
			t.Fatalf("selection %v: %v %+v", only, e, r)
		}
		x.mu.Lock()
		peak = max(peak, len(x.chains))
		x.mu.Unlock()
	}
	if peak > MaxChains {
		t.Fatalf("the executor kept %d chains at once, past MaxChains %d", peak, MaxChains)
	}
	if peak < MaxChains {
		t.Fatalf("the executor kept at most %d chains: the test never reached MaxChains %d", peak, MaxChains)
	}
}

// The security hooks keep a key per session and never learn that a session
// ended. In a store that refuses new keys once a scope is full
// (builtin.MemoryKV), every session after the first MaxKeysPerScope had its
// state refused: the fail-closed guard then blocked all of its traffic, so
// the sessions of one client (or a long-running server's ordinary
// traffic) denied everyone else's. A SessionKV forgets the session idle
// longest instead: new sessions run, a session in use keeps its taint, and
// the scope stays bounded.
func TestSessionStateNeverFillsTheStore(t *testing.T) {
	const bound = 6
	kv := &SessionKV{MaxKeysPerScope: bound}
	x := newExecutorWith(t, newHostCallerKV(t, kv), Descriptor{Name: "guard", Type: TypeValidation, Events: []string{"*"},
		Module: "cross-boundary-guard", Grants: []string{"kv.get", "kv.set"}})
	chainIn := func(session, phase string, payload map[string]any) *ChainResult {
		t.Helper()
		r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: phase, Payload: payload,
			Context: &InvocationContext{SessionID: session}})
		if e != nil {
			t.Fatalf("session %s: %v", session, e)
		}
		return r
	}
	secret := "ghp_VictimSessionReadThisToken01"
	if r := chainIn("victim", PhaseResponse, map[string]any{"name": "read_file", "content": secret}); r.Status != StatusSuccess {
		t.Fatalf("victim's response: %+v", r)
	}
	for i := 0; i < 4*bound; i++ {
		if r := chainIn(fmt.Sprint("s", i), PhaseRequest, map[string]any{"name": "fetch", "arguments": map[string]any{}}); r.Status != StatusSuccess {
			t.Fatalf("request of new session %d (past %d sessions' state): %s %+v, want success", i, bound, r.Status, r.AbortedAt)
		}
		if i%2 == 0 { // the victim's session stays in use
			if r := chainIn("victim", PhaseRequest, map[string]any{"name": "read_file", "arguments": map[string]any{}}); r.Status != StatusSuccess {
				t.Fatalf("victim's request: %+v", r)
			}
		}
	}
	if r := chainIn("victim", PhaseRequest, map[string]any{"name": "fetch", "arguments": map[string]any{"body": secret}}); r.Status != StatusValidationFailed {
		t.Fatalf("victim's relay of its secret: %s, want validation_failed (its taint kept)", r.Status)
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for scope, sc := range kv.scopes {
		if sc.keys.Len() > bound {
			t.Errorf("scope %v holds %d keys, past %d", scope, sc.keys.Len(), bound)
		}
	}
}

// A timeoutMs past what a time.Duration holds bounds nothing: it
// overflowed to a negative duration, and every run of it timed out at once.
func TestHugeTimeoutIsNoBound(t *testing.T) {
	x := newExecutor(t, Descriptor{Name: "allow", Type: TypeValidation, Events: []string{"*"}, Module: "behaviors",
		Settings: map[string]any{"behavior": "allow-all"}})
	for _, ms := range []int64{math.MaxInt64, math.MaxInt64 / 1000, math.MaxInt64/int64(time.Millisecond) + 1} {
		r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseRequest, Payload: map[string]any{}, Timeout: ms})
		if e != nil || r.Status != StatusSuccess {
			t.Errorf("timeoutMs %d: %v %+v, want success", ms, e, r)
		}
		if _, e := x.Invoke(context.Background(), InvokeParams{Name: "allow", Event: "tools/call", Phase: PhaseRequest, Payload: map[string]any{}, Timeout: ms}); e != nil {
			t.Errorf("invoke, timeoutMs %d: %v", ms, e)
		}
	}
}

// The security hooks pass a large request: the patterns run only over
// strings that hold their needle ("gh", "AKIA", ...). Run through every
// pattern's automaton, 200 KB of "x" took more than the default 400 M fuel
// (50 KB of it 165 M), and the fail-closed hooks blocked it. A tainted secret at its end
// is still found.
func TestGuardLargeRequest(t *testing.T) {
	x := newExecutor(t,
		Descriptor{Name: "guard", Type: TypeValidation, Events: []string{"*"}, Module: "cross-boundary-guard", Grants: []string{"kv.get", "kv.set"}},
		Descriptor{Name: "redactor", Type: TypeMutation, Events: []string{"*"}, Module: "secretless-redactor", Grants: []string{"kv.get", "kv.set"}})
	ic := &InvocationContext{SessionID: "large"}
	secret := "ghp_LargeRequestSecretToken000001"
	if r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseResponse, Context: ic,
		Payload: map[string]any{"name": "read_file", "content": secret}}); e != nil || r.Status != StatusSuccess {
		t.Fatalf("response: %v %+v", e, r)
	}
	body := strings.Repeat("x", 200<<10)
	r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseRequest, Context: ic,
		Payload: map[string]any{"name": "write_file", "arguments": map[string]any{"content": body}}})
	if e != nil || r.Status != StatusSuccess {
		t.Fatalf("a 200 KB request without a secret: %v %s %+v", e, r.Status, r.AbortedAt)
	}
	r, e = x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseRequest, Context: ic, Only: []string{"guard"},
		Payload: map[string]any{"name": "fetch", "arguments": map[string]any{"content": body + secret}}})
	if e != nil || r.Status != StatusValidationFailed {
		t.Fatalf("a 200 KB relay of the secret: %v %s, want validation_failed", e, r.Status)
	}
}

// The guard's state stays under the store's value limit (64 KiB): past it
// the state could not be written, the hook failed, and the fail-closed
// guard blocked every response of the session that carried a secret (a
// server returning some hundreds of tokens, or the same ones under many
// long server names, did it). The oldest secrets go instead, and a new one
// is still kept and blocks its relay.
func TestGuardStateFitsTheStore(t *testing.T) {
	x := newExecutor(t, Descriptor{Name: "guard", Type: TypeValidation, Events: []string{"*"}, Module: "cross-boundary-guard", Grants: []string{"kv.get", "kv.set"}})
	ic := &InvocationContext{SessionID: "big"}
	var toks []string
	for i := 0; i < 600; i++ {
		toks = append(toks, fmt.Sprintf("ghp_BigStateToken%06dxxxxxxxxxx", i))
	}
	for i, server := range []string{"", strings.Repeat("a", 128), strings.Repeat("b", 128), strings.Repeat("c", 128), strings.Repeat("d", 128)} {
		c := *ic
		c.Server = server
		r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseResponse, Context: &c,
			Payload: map[string]any{"name": "read_file", "content": strings.Join(toks, " ")}})
		if e != nil || r.Status != StatusSuccess {
			t.Fatalf("response %d, 600 secrets: %v %s %+v", i, e, r.Status, r.AbortedAt)
		}
	}
	newest := "ghp_TheNewestSecretTokenRead0001"
	r, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseResponse, Context: ic,
		Payload: map[string]any{"name": "read_file", "content": newest}})
	if e != nil || r.Status != StatusSuccess {
		t.Fatalf("response with a new secret: %v %s %+v", e, r.Status, r.AbortedAt)
	}
	r, e = x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseRequest, Context: ic,
		Payload: map[string]any{"name": "fetch", "arguments": map[string]any{"b": newest}}})
	if e != nil || r.Status != StatusValidationFailed {
		t.Fatalf("relay of the newest secret: %v %s, want validation_failed", e, r.Status)
	}
}

// TestAskKeepsNoApproval: a validator that asks (a wasmhooks hook may) fails
// validation, and nothing is kept for a human to resolve: MCP has no way to
// resolve it, so each ask kept its run (and payload, up to the 4 MiB of a
// request) in the chain's memory for as long as the server ran.
func TestAskKeepsNoApproval(t *testing.T) {
	x := newExecutor(t, Descriptor{Name: "asker", Type: TypeValidation, Events: []string{"*"}, Module: "behaviors", Settings: map[string]any{"behavior": "ask-all"}})
	ctx := context.Background()
	res, e := x.Chain(ctx, ChainParams{Event: "tools/call", Phase: PhaseRequest, Payload: map[string]any{"name": "t"}})
	if e != nil || res.Status != StatusValidationFailed || res.AbortedAt == nil || !strings.HasPrefix(res.AbortedAt.Reason, "approval required") {
		t.Fatalf("Chain = %+v, %v", res, e)
	}
	list := []*Descriptor{x.byName["asker"]}
	in, _ := x.input("tools/call", PhaseRequest, map[string]any{"name": "t"}, nil)
	out, err := x.run(ctx, PhaseRequest, list, false, in)
	if err != nil || out.Approval == nil {
		t.Fatalf("run = %+v, %v", out, err)
	}
	c, err := x.chainFor(ctx, PhaseRequest, list, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(ctx, out.Approval.ID, chain.Resolution{Decision: chain.Approve}); !errors.Is(err, chain.ErrUnknownApproval) {
		t.Fatalf("the ask's approval was kept: Resolve = %v", err)
	}
}

// TestChainBuiltWithoutTheLock: a chain is built (milliseconds: 4.5 ms for
// two hooks) without the executor's lock, which every call takes to find
// its chain: a client naming new selections (past MaxChains, each call's
// chain is new) made every other client's calls wait for its builds.
func TestChainBuiltWithoutTheLock(t *testing.T) {
	x := newExecutor(t, Descriptor{Name: "a", Type: TypeValidation, Events: []string{"*"}, Module: "behaviors", Settings: map[string]any{"behavior": "allow-all"}})
	locked := false
	newChain = func(ctx context.Context, cfg chain.Config, opts chain.Options) (*chain.Chain, error) {
		if x.mu.TryLock() {
			x.mu.Unlock()
		} else {
			locked = true
		}
		return chain.New(ctx, cfg, opts)
	}
	t.Cleanup(func() { newChain = chain.New })
	// New built the chains of invoke (active); a chain execution's is new.
	res, e := x.Chain(context.Background(), ChainParams{Event: "tools/call", Phase: PhaseRequest, Payload: map[string]any{"name": "t"}})
	if e != nil || res.Status != StatusSuccess {
		t.Fatalf("Chain = %+v, %v", res, e)
	}
	if locked {
		t.Fatal("a chain was built holding the executor's lock")
	}
}

// TestWaitForSessionGivesUp: a call waiting for its session's previous call
// gives up when its client goes (its context ends), with a stable reason and
// without running; it waited for ever, to run once the previous call ended.
func TestWaitForSessionGivesUp(t *testing.T) {
	x := newExecutor(t, Descriptor{Name: "guard", Type: TypeValidation, Events: []string{"*"}, Module: "cross-boundary-guard", Grants: []string{"kv.get", "kv.set"}})
	ictx := &InvocationContext{SessionID: "busy"}
	unlock := x.sessions.Lock(sessionOf(ictx)) // the session's previous call, still running
	defer unlock()
	ctx, cancel := context.WithCancel(context.Background())
	type answer struct {
		r *ChainResult
		e *Error
	}
	got := make(chan answer, 1)
	go func() {
		r, e := x.Chain(ctx, ChainParams{Event: "tools/call", Phase: PhaseRequest, Context: ictx, Payload: map[string]any{"name": "read_file"}})
		got <- answer{r, e}
	}()
	cancel()
	select {
	case a := <-got:
		if a.r != nil || a.e == nil || a.e.Data["reason"] != "cancelled" {
			t.Fatalf("result %+v, error %+v: want an error with reason cancelled", a.r, a.e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call still waits for the session after its client went")
	}
}
