package interceptor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/internal/keyedlock"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// DefaultTenant is the tenant interceptor traffic runs as unless
// Options.Tenant says otherwise.
const DefaultTenant = "mcp"

// MaxChains bounds the chains an Executor keeps: one per distinct
// (phase, stage, interceptor selection) it has run. Past it the cache is
// emptied (each chain is cheap to rebuild: modules are compiled once per
// runtime). It defends memory against a client that asks for many
// different "interceptors" selections.
const MaxChains = 256

// Options configures an Executor.
type Options struct {
	// Runtime runs the hooks. Required; not closed by the Executor.
	Runtime *runtime.Runtime
	// HostCaller answers the hooks' host calls (a capability.Runner whose
	// registry has kv.get and kv.set for the security hooks).
	HostCaller runtime.HostCaller
	// Audit receives the audit records of every chain the Executor runs
	// (one hash chain). Nil keeps them in one audit.MemorySink, which
	// grows without bound: for tests; a long-running server passes a
	// file sink or Discard.
	Audit audit.Sink
	// Tenant is the tenant the traffic runs as. Empty means
	// DefaultTenant.
	Tenant string
	// Logger receives the chains' logs. Nil means slog.Default().
	Logger *slog.Logger
	// Breaker configures the chains' circuit breakers. The zero value
	// disables them: a breaker is kept per binding and tenant, and every
	// session runs as the one tenant, so one session's failures would
	// decide for all the others (fail-closed: a denial of service;
	// failOpen: a validator skipped for everyone). The SEP's failOpen is
	// per invocation.
	Breaker chain.BreakerConfig
}

// Discard is an audit sink that keeps nothing: for a server run without an
// audit log, whose records would otherwise pile up in memory.
var Discard audit.Sink = discard{}

type discard struct{}

func (discard) Append(context.Context, *audit.Record) error { return nil }

// noApprovals is the approval store of the interceptor chains: it keeps
// nothing. A validator whose hook asks fails validation ("approval
// required"), and MCP has no way to resolve an approval, so one kept would
// hold its run, payload included, for as long as the server runs.
type noApprovals struct{}

func (noApprovals) Put(context.Context, *chain.Approval) error { return nil }
func (noApprovals) Get(_ context.Context, id string) (*chain.Approval, error) {
	return nil, fmt.Errorf("%w: %s", chain.ErrUnknownApproval, id)
}
func (n noApprovals) Take(ctx context.Context, id string) (*chain.Approval, error) {
	return n.Get(ctx, id)
}
func (noApprovals) Release(context.Context, string, *chain.Approval) error { return nil }
func (n noApprovals) Done(ctx context.Context, id string) error {
	_, err := n.Get(ctx, id)
	return err
}
func (noApprovals) Due(context.Context, time.Time) ([]string, error) { return nil, nil }

// Executor runs interceptors: the SEP's list, invoke and chain execution
// over wasmhooks chains. It is safe for concurrent use.
type Executor struct {
	cfg    Config
	opts   Options
	byName map[string]*Descriptor

	mu     sync.Mutex
	chains map[string]*chain.Chain
	closed bool

	sessions sessionLocks
}

// sessionLocks serialises the invocations and chain executions of one
// session: the security hooks read, change and write their per-session
// state in the key-value store, which has no compare-and-swap; two
// responses of a session run at once could each write the taint without
// the other's secret. Sessions run concurrently with each other. Traffic
// without a sessionId is one session too (the hooks key its state by ""),
// serialised as the others.
type sessionLocks = keyedlock.Locks

func sessionOf(c *InvocationContext) string {
	if c == nil {
		return ""
	}
	return c.SessionID
}

// New checks cfg and builds the chain of every interceptor in each of its
// phases, so that a module that does not load or settings that do not
// match the hook's schema are refused now.
func New(ctx context.Context, cfg Config, opts Options) (*Executor, error) {
	if opts.Runtime == nil {
		return nil, errors.New("interceptor: Options.Runtime is required")
	}
	if opts.Tenant == "" {
		opts.Tenant = DefaultTenant
	}
	if opts.Audit == nil {
		opts.Audit = audit.NewMemorySink()
	}
	if opts.Breaker == (chain.BreakerConfig{}) {
		opts.Breaker.Failures = -1
	}
	cfg.Interceptors = append([]Descriptor(nil), cfg.Interceptors...)
	if err := check(&cfg); err != nil {
		return nil, err
	}
	x := &Executor{cfg: cfg, opts: opts, byName: map[string]*Descriptor{}, chains: map[string]*chain.Chain{}}
	for i := range x.cfg.Interceptors {
		d := &x.cfg.Interceptors[i]
		x.byName[d.Name] = d
		for _, p := range d.phases() {
			if _, err := x.chainFor(ctx, p, []*Descriptor{d}, true); err != nil {
				_ = x.Close(ctx)
				return nil, fmt.Errorf("interceptor %q: %w", d.Name, err)
			}
		}
	}
	return x, nil
}

// Close closes the chains.
func (x *Executor) Close(ctx context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	var errs []error
	for k, c := range x.chains {
		errs = append(errs, c.Close(ctx))
		delete(x.chains, k)
	}
	return errors.Join(errs...)
}

// newChain builds a chain: chain.New, which a test replaces.
var newChain = chain.New

// chainFor returns the chain of the interceptors list in phase, in that
// order, building it on first use.
func (x *Executor) chainFor(ctx context.Context, phase string, list []*Descriptor, active bool) (*chain.Chain, error) {
	names := make([]string, len(list))
	for i, d := range list {
		names[i] = d.Name
	}
	key := fmt.Sprintf("%s|%t|%s", phase, active, strings.Join(names, "\x00"))
	x.mu.Lock()
	c, ok := x.chains[key]
	closed := x.closed
	x.mu.Unlock()
	if closed {
		return nil, chain.ErrClosed
	}
	if ok {
		return c, nil
	}
	// Built without the lock, which every call takes to find its chain:
	// a build takes milliseconds. Calls that miss together may each
	// build one (at most MaxCallsInFlight); the first stored is kept.
	cc := chain.Config{Modules: map[string][]byte{}}
	for _, d := range list {
		cc.Modules[d.Module] = x.cfg.Modules[d.Module]
		cc.Bindings = append(cc.Bindings, Binding(d, phase, active))
	}
	cc.Breaker = x.opts.Breaker
	c, err := newChain(ctx, cc, chain.Options{
		Runtime: x.opts.Runtime, HostCaller: x.opts.HostCaller, Audit: x.opts.Audit, Logger: x.opts.Logger,
		Approvals: noApprovals{},
	})
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		_ = c.Close(ctx)
		return nil, chain.ErrClosed
	}
	if other, ok := x.chains[key]; ok {
		_ = c.Close(ctx)
		return other, nil
	}
	if len(x.chains) >= MaxChains {
		for k, old := range x.chains {
			_ = old.Close(ctx) // runs in flight keep their snapshot
			delete(x.chains, k)
		}
	}
	x.chains[key] = c
	return c, nil
}

// run runs in on the chain of list in phase. A chain closed between
// chainFor and Run (the cache was emptied past MaxChains) is built again.
func (x *Executor) run(ctx context.Context, phase string, list []*Descriptor, active bool, in chain.Input) (*chain.Outcome, error) {
	for attempt := 0; ; attempt++ {
		c, err := x.chainFor(ctx, phase, list, active)
		if err != nil {
			return nil, err
		}
		out, err := c.Run(ctx, in)
		if errors.Is(err, chain.ErrClosed) && attempt < 2 {
			continue
		}
		return out, err
	}
}

// List is interceptors/list: the interceptors in configuration order, those
// hooking event if it is not empty.
func (x *Executor) List(event string) ListResult {
	res := ListResult{Interceptors: []Interceptor{}}
	for i := range x.cfg.Interceptors {
		d := &x.cfg.Interceptors[i]
		if event != "" && !hooks(d, event) {
			continue
		}
		res.Interceptors = append(res.Interceptors, describe(d))
	}
	return res
}

func hooks(d *Descriptor, event string) bool {
	for _, e := range d.Events {
		if eventMatches(e, event, "") {
			return true
		}
	}
	return false
}

func checkPhase(phase string) *Error {
	if phase != PhaseRequest && phase != PhaseResponse {
		return &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("phase %q: want request or response", phase)}
	}
	return nil
}

// input is the chain input of payload in phase.
func (x *Executor) input(event, phase string, payload any, ictx *InvocationContext) (chain.Input, *Error) {
	point, field := Point(phase)
	mcp := map[string]any{"event": event, "phase": phase}
	if ictx != nil {
		if ictx.SessionID != "" {
			mcp["sessionId"] = ictx.SessionID
		}
		if ictx.Server != "" {
			mcp["server"] = ictx.Server
		}
	}
	ctx := map[string]any{"tool": event, "mcp": mcp}
	if phase == PhaseRequest {
		obj, ok := payload.(map[string]any)
		if !ok {
			return chain.Input{}, &Error{Code: CodeInvalidParams, Message: "a request's payload must be an object (the request's params)"}
		}
		ctx[field] = obj
	} else {
		ctx["arguments"] = map[string]any{}
		ctx[field] = payload
	}
	return chain.Input{Tenant: x.opts.Tenant, Point: point, Context: ctx}, nil
}

func payloadOf(phase string, ctx map[string]any) any {
	_, field := Point(phase)
	return ctx[field]
}

// withTimeout bounds ctx by ms milliseconds: none when ms is not positive,
// nor past what a time.Duration holds (it would overflow to a negative
// duration, a timeout at once).
func withTimeout(ctx context.Context, ms int64) (context.Context, context.CancelFunc) {
	if ms > 0 && ms <= math.MaxInt64/int64(time.Millisecond) {
		return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
	}
	return context.WithCancel(ctx)
}

// enter starts a request: it makes the chain's input, locks the request's
// session and bounds ctx by its timeout (ms, none when not positive). done
// ends both. A request whose ctx ends while it waits for the session's
// previous call (its client went) gives up, and runs nothing.
func (x *Executor) enter(ctx context.Context, event, phase string, payload any, c *InvocationContext, timeout int64) (in chain.Input, _ context.Context, done func(), e *Error) {
	if in, e = x.input(event, phase, payload, c); e != nil {
		return in, nil, nil, e
	}
	unlock, err := x.sessions.LockContext(ctx, sessionOf(c))
	if err != nil {
		return in, nil, nil, &Error{Code: CodeInternalError, Message: "Interceptor execution cancelled while it waited for the session's previous call",
			Data: map[string]any{"reason": x.reason(err)}}
	}
	ctx, cancel := withTimeout(ctx, timeout)
	return in, ctx, func() { cancel(); unlock() }, nil
}

// Invoke is interceptor/invoke: the named interceptor alone, in active mode,
// over the payload. An unknown name or a bad phase is CodeInvalidParams; a
// hook that reaches no decision (trap, timeout, memory, ...) is
// CodeInternalError with the failure's code in the data.
func (x *Executor) Invoke(ctx context.Context, p InvokeParams) (*Result, *Error) {
	d, ok := x.byName[p.Name]
	if !ok {
		return nil, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("unknown interceptor %q", p.Name)}
	}
	if e := checkPhase(p.Phase); e != nil {
		return nil, e
	}
	in, ctx, done, e := x.enter(ctx, p.Event, p.Phase, p.Payload, p.Context, p.Timeout)
	if e != nil {
		return nil, e
	}
	defer done()
	out, err := x.run(ctx, p.Phase, []*Descriptor{d}, true, in)
	if err != nil {
		code, msg := CodeInternalError, "Interceptor execution failed"
		if ctx.Err() != nil && p.Timeout > 0 {
			code, msg = -32000, "Interceptor execution timeout"
		}
		return nil, &Error{Code: code, Message: msg, Data: map[string]any{"interceptor": d.Name, "reason": x.reason(err), "phase": p.Phase}}
	}
	if len(out.Trace) != 1 {
		return nil, &Error{Code: CodeInternalError, Message: "Interceptor execution failed", Data: map[string]any{"interceptor": d.Name}}
	}
	st := &out.Trace[0]
	if st.Failure != nil {
		return nil, &Error{Code: CodeInternalError, Message: "Interceptor execution failed", Data: map[string]any{
			"interceptor": d.Name, "reason": string(st.Failure.Code), "message": st.Failure.Message, "phase": p.Phase,
		}}
	}
	r := result(d, p.Phase, st, false)
	if d.Type == TypeMutation {
		r.Payload = payloadOf(p.Phase, out.Context)
	}
	return &r, nil
}

// reason is the stable code a chain's error is answered with; the error
// itself is logged. Its text is not the client's to see: it may name a host
// path (the audit file's), and the SEP keeps detailed errors to the logs.
func (x *Executor) reason(err error) string {
	code := string(runtime.Code(err))
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = string(abi.FailTimeout)
	case errors.Is(err, context.Canceled):
		code = "cancelled"
	case errors.Is(err, chain.ErrAudit):
		code = "audit"
	case errors.Is(err, chain.ErrClosed):
		code = string(abi.FailRuntimeClosed)
	case errors.Is(err, chain.ErrInvalidInput):
		code = "invalid_input"
	}
	x.log().Warn("interceptor: a chain failed", "reason", code, "err", err)
	return code
}

func (x *Executor) log() *slog.Logger {
	if x.opts.Logger != nil {
		return x.opts.Logger
	}
	return slog.Default()
}

// result is the wire result of one step of d's binding. In a chain result
// (inChain) an audit binding's step reports its would-be outcome, marked
// mode "audit".
func result(d *Descriptor, phase string, st *chain.Step, inChain bool) Result {
	r := Result{Interceptor: d.Name, Type: d.Type, Phase: phase, DurationMs: float64(st.LatencyUS) / 1000}
	applied := st.Applied
	if st.Shadow != nil {
		applied = st.Shadow.Applied
		if inChain {
			r.Mode = ModeAudit
		}
	}
	if st.Failure != nil {
		sev := "error"
		if d.FailOpen {
			sev = "warn"
		}
		r.Info = map[string]any{"failure": string(st.Failure.Code), "failPolicy": string(st.FailPolicy)}
		if d.Type == TypeValidation {
			f := false
			r.Valid, r.Severity = &f, sev
			r.Messages = []Message{{Message: "interceptor failed: " + string(st.Failure.Code), Severity: sev}}
		} else {
			f := false
			r.Modified = &f
		}
		return r
	}
	switch d.Type {
	case TypeValidation:
		valid := applied != abi.ActionBlock && applied != abi.ActionAsk
		r.Valid = &valid
		if !valid {
			r.Severity = "error"
			msg := ""
			if st.Decision != nil {
				msg = st.Decision.Reason
			}
			r.Messages = []Message{{Message: msg, Severity: "error"}}
		}
	case TypeMutation:
		modified := applied == abi.ActionModify
		r.Modified = &modified
		if st.Shadow != nil && st.Shadow.Context != nil && inChain {
			r.Payload = payloadOf(phase, st.Shadow.Context)
		}
	}
	return r
}

// Chain runs one lifecycle event through every interceptor that hooks it
// (or the named ones), in the SEP's order, and returns the chain result:
// status success with the final payload, or validation_failed /
// mutation_failed / timeout with where it stopped. No mutation applies
// unless the whole chain completes.
func (x *Executor) Chain(ctx context.Context, p ChainParams) (*ChainResult, *Error) {
	if e := checkPhase(p.Phase); e != nil {
		return nil, e
	}
	start := time.Now()
	var only map[string]bool
	if p.Only != nil {
		only = map[string]bool{}
		for _, n := range p.Only {
			if _, ok := x.byName[n]; !ok {
				return nil, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("unknown interceptor %q", n)}
			}
			only[n] = true
		}
	}
	var list []*Descriptor
	for i := range x.cfg.Interceptors {
		d := &x.cfg.Interceptors[i]
		if d.matches(p.Event, p.Phase) && (only == nil || only[d.Name]) {
			list = append(list, d)
		}
	}
	res := &ChainResult{Status: StatusSuccess, Event: p.Event, Phase: p.Phase, Results: []Result{}}
	in, ctx, done, e := x.enter(ctx, p.Event, p.Phase, p.Payload, p.Context, p.Timeout)
	if e != nil {
		return nil, e
	}
	defer done()
	for _, stage := range Stages(list, p.Phase) {
		out, err := x.run(ctx, p.Phase, stage, false, in)
		if err != nil {
			if ctx.Err() != nil && p.Timeout > 0 {
				res.Status = StatusTimeout
				res.AbortedAt = &Aborted{Reason: "chain timeout exceeded", Type: "timeout"}
				break
			}
			return nil, &Error{Code: CodeInternalError, Message: "Interceptor chain failed", Data: map[string]any{"reason": x.reason(err)}}
		}
		byBinding := map[string]*Descriptor{}
		for _, d := range stage {
			byBinding[BindingName(d.Name)] = d
		}
		for i := range out.Trace {
			st := &out.Trace[i]
			d := byBinding[st.Binding]
			if d == nil {
				continue
			}
			r := result(d, p.Phase, st, true)
			if d.Type == TypeValidation {
				switch r.Severity {
				case "error":
					res.ValidationSummary.Errors++
				case "warn":
					res.ValidationSummary.Warnings++
				case "info":
					res.ValidationSummary.Infos++
				}
			}
			res.Results = append(res.Results, r)
		}
		if out.Verdict != chain.Allow {
			d := byBinding[out.Binding]
			ab := &Aborted{Interceptor: out.Binding, Reason: out.Reason, Type: TypeValidation}
			res.Status = StatusValidationFailed
			if d != nil {
				ab.Interceptor = d.Name
				if d.Type == TypeMutation {
					ab.Type, res.Status = TypeMutation, StatusMutationFailed
				}
			}
			if out.Verdict == chain.Pending {
				ab.Reason = "approval required: " + out.Reason
			}
			res.AbortedAt = ab
			break
		}
		in.Context = out.Context
	}
	if res.Status == StatusSuccess {
		res.FinalPayload = payloadOf(p.Phase, in.Context)
	}
	res.TotalDurationMs = float64(time.Since(start).Microseconds()) / 1000
	return res, nil
}
