package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmhooks/wasmhooks/abi"
)

// Request is one invocation of a hook.
type Request struct {
	// Tenant owns the invocation. Instances, credit and data are scoped by
	// it. Required.
	Tenant string
	// Hook names the binding of the module, as the host knows it: it is
	// the identity the capabilities see (abi.Caller.Hook: the key-value
	// scope, logs) and part of the key of the warm instances, so two hooks
	// of one tenant never share an instance (nor what one's traffic left
	// in its memory). Requests that differ in Settings or Grants should
	// differ in Hook. Empty means the module's digest (Module.Digest):
	// never the manifest's name, which is the module's own claim.
	Hook string
	// Point is the hook point. Empty means "message.outbound".
	Point string
	// Points resolves Point: the built-in points and those a platform
	// registered (abi.PointRegistry). Nil means the built-in points only.
	Points *abi.PointRegistry
	// Context is the traffic the hook sees; its shape depends on Point.
	Context map[string]any
	// Settings are the hook's settings, already validated by the caller
	// against the manifest's settings schema.
	Settings map[string]any
	// ContextObject and SettingsObject are Context and Settings already
	// encoded, for a caller that holds the traffic as an abi.Object (the
	// chain): when Context (Settings) is nil, the object's bytes are
	// copied into the invocation document as they are instead of a map
	// being encoded. The zero Object is {}.
	ContextObject, SettingsObject abi.Object
	// Grants lists the capabilities the operator granted the hook.
	Grants []string
	// Limits bound the invocation. Zero fields mean Config.Limits, then
	// the package defaults.
	Limits Limits
	// HostCaller serves the hook's host calls. Nil means
	// Config.HostCaller.
	HostCaller HostCaller
	// InvocationID identifies the invocation. Empty means a random id.
	InvocationID string
}

// Result reports one invocation.
type Result struct {
	// InvocationID is the invocation's id.
	InvocationID string `json:"invocation"`
	// Decision is the hook's decision in canonical form; nil on failure.
	Decision *abi.Decision `json:"decision"`
	// Failure says why the hook failed; nil when it reached a decision.
	Failure *abi.Failure `json:"failure"`
	// HostCalls counts the host calls made, takes excluded.
	HostCalls int `json:"host_calls"`
	// Calls reports each of those calls in order (len(Calls) ==
	// HostCalls, at most Limits.MaxHostCalls): name, status, charge and
	// duration. InvokeInto reuses its array, as it reuses Decision.
	Calls []HostCall `json:"calls,omitempty"`
	// HostCallBytes counts the bytes the host calls moved.
	HostCallBytes int `json:"host_call_bytes"`
	// CreditCharged is the credit the host calls were charged.
	CreditCharged int64 `json:"credit_charged"`
	// Duration is the wall-clock time of the invocation, from the call
	// to the guest's return (waiting for an instance included; reading
	// the decision after it not).
	Duration time.Duration `json:"-"`
	// Ended is when the guest returned: a reading of the monotonic clock
	// (compare it with time values that have one, as Sub and Before do;
	// its wall reading is the process's start moved by as much, so it
	// drifts from the wall clock if that is set). Zero when the runtime
	// refused the request.
	Ended time.Time `json:"-"`
	// Logs holds what the hook wrote to stdout and stderr.
	Logs []LogLine `json:"logs"`
	// LogBytesDropped counts output bytes over Limits.MaxLogBytes.
	LogBytesDropped int `json:"log_bytes_dropped,omitempty"`
	// FuelUsed is the fuel the invocation used (see Limits.Fuel): the
	// same for the same module and input on every run and every machine
	// (for a hook whose WASI inputs, the clock and random_get, do not
	// change its path). It is the whole budget when the fuel ran out, and
	// 0 with benchmode.Switches.DisableMetering.
	FuelUsed uint64 `json:"fuel_used"`
	// MemoryPages is the size of the instance's memory afterwards.
	MemoryPages uint32 `json:"memory_pages"`
	// Reused reports whether the instance went back to the pool.
	Reused bool `json:"-"`
}

// Invoke runs one invocation of m on a warm instance of m for req.Tenant.
//
// It returns an error without a Result for problems that are not the hook's
// (a bad request, a closed runtime, the caller's context ending). When the
// caller's context ended after the hook started, the error is an
// *AbandonedError that carries the host calls made and the credit they were
// charged: that credit was spent, and must reach the caller's books. When the
// hook fails, it returns both a Result whose Failure is set and that
// *abi.Failure as the error (Code gives any error's code); the caller's fail
// policy decides what follows. An instance that failed in any way is
// discarded, never reused.
func (r *Runtime) Invoke(ctx context.Context, m *Module, req Request) (*Result, error) {
	res := new(Result)
	if err := r.InvokeInto(ctx, m, req, res); err != nil {
		if _, ok := err.(*abi.Failure); !ok {
			return nil, err
		}
		return res, err
	}
	return res, nil
}

// InvokeInto is Invoke writing its report into res, which it overwrites:
// for a caller that reuses one Result, a warm invocation whose hook
// continues allocates nothing on the host (BENCHMARKS.md). The Decision
// res already points to, if any, is reused for the new decision, and so is
// the array of res.Calls, so the caller must not keep either across calls.
// The error is that of Invoke: when it is a *abi.Failure, res holds the
// report; when it is an *AbandonedError, res holds the host-call report
// (HostCalls, Calls, HostCallBytes, CreditCharged) and no decision;
// otherwise res holds nothing of use.
func (r *Runtime) InvokeInto(ctx context.Context, m *Module, req Request, res *Result) error {
	start := monoNow()
	var p Prepared
	if err := r.prepare(m, &req, &p); err != nil {
		*res = Result{Calls: res.Calls[:0]}
		return err
	}
	return r.invoke(ctx, start, &p, nil, req, res)
}

// Prepared is a module made ready to be invoked many times at one hook
// point under one set of limits: the point resolved and allowed by the
// module's manifest, and the limits merged with Config.Limits and the
// defaults and checked (LimitsFor), once, when Prepare makes it, rather than
// at every invocation. The chain prepares each binding when its
// configuration is built. A Prepared is immutable and safe for concurrent
// use; it is valid as long as its module is open.
type Prepared struct {
	m      *Module
	point  abi.Point // resolved
	asked  Limits    // the limits Prepare was given
	limits Limits    // the effective limits
	points *abi.PointRegistry
	// last is the pool the last invocation used (see invoke).
	last atomic.Pointer[pool]
}

// Prepare checks an invocation of m at point (resolved by points; nil means
// the built-in points) under limits l exactly as Invoke checks a request's
// (the point known and allowed by m's manifest, LimitsFor), and returns
// them prepared for InvokePrepared. Its errors wrap ErrInvalidRequest.
func (r *Runtime) Prepare(m *Module, point string, points *abi.PointRegistry, l Limits) (*Prepared, error) {
	p := new(Prepared)
	req := Request{Tenant: "-", Hook: "-", InvocationID: "-", Point: point, Points: points, Limits: l}
	if err := r.prepare(m, &req, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Module returns the prepared module.
func (p *Prepared) Module() *Module { return p.m }

// Point returns the prepared hook point's name.
func (p *Prepared) Point() string { return p.point.Name }

// Limits returns the limits the prepared invocations run under (LimitsFor
// of those Prepare was given).
func (p *Prepared) Limits() Limits { return p.limits }

// InvokePrepared is InvokeInto for a prepared module: the point and the
// limits are p's, checked when p was made. req.Point, req.Points and
// req.Limits must be zero or what Prepare was given (else the request is
// refused with ErrInvalidRequest); the other fields are req's, checked as
// InvokeInto checks them.
func (r *Runtime) InvokePrepared(ctx context.Context, p *Prepared, req Request, res *Result) error {
	start := monoNow()
	if err := r.prepareRequest(p, &req); err != nil {
		*res = Result{Calls: res.Calls[:0]}
		return err
	}
	return r.invoke(ctx, start, p, &p.last, req, res)
}

// invoke runs one invocation of a prepared module for InvokeInto and
// InvokePrepared, from start (a monoNow reading): res holds the Decision to
// reuse, if any, and the array of Calls. last, if not nil, caches the pool
// (Prepared.last; apart from p so that InvokeInto's Prepared stays on its
// stack).
func (r *Runtime) invoke(ctx context.Context, start time.Time, p *Prepared, last *atomic.Pointer[pool], req Request, res *Result) error {
	m, lim, point := p.m, p.limits, p.point
	spare, calls := res.Decision, res.Calls[:0]
	*res = Result{Calls: calls}
	var err error
	caller := req.HostCaller
	if caller == nil {
		caller = r.cfg.HostCaller
	}
	who := abi.Caller{
		Tenant: req.Tenant, Hook: req.Hook, Module: m.Digest(), Invocation: req.InvocationID, Point: req.Point,
		Granted: append([]string(nil), req.Grants...),
	}
	if m.Manifest() != nil {
		who.HasManifest = true
		who.Requested = m.c.requested
	}
	ainv := abi.Invocation{
		ABI: abi.Major, Point: req.Point, Context: req.Context, Settings: req.Settings,
		Meta: abi.Meta{Hook: req.Hook, Invocation: req.InvocationID, Tenant: req.Tenant},
	}

	// The document goes into a pooled buffer: encoding it allocates
	// nothing once the buffers have grown.
	buf := docBuffers.Get().(*[]byte)
	defer putDocBuffer(buf)
	doc, ok := ainv.AppendObjects((*buf)[:0], req.ContextObject, req.SettingsObject)
	if ok {
		*buf = doc
	} else if doc, err = encodeInvocation(ainv, req.ContextObject, req.SettingsObject); err != nil {
		return fmt.Errorf("%w: encoding the invocation: %w", ErrInvalidRequest, err)
	}
	if len(doc) > lim.MaxInputBytes {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, &LimitError{Limit: "input_bytes", Max: uint64(lim.MaxInputBytes), Got: uint64(len(doc))})
	}

	key := poolKey{c: m.c, tenant: req.Tenant, hook: req.Hook, memoryPages: lim.MemoryPages}
	var (
		pl   *pool
		inst *instance
		slow bool // acquire took long enough for start to be stale
	)
	for try := 0; ; try++ {
		// The pool the last invocation of p used, if it is this one's:
		// a chain runs a binding for one tenant after another. A pool
		// closed or pruned since is errPoolGone, and looked up again.
		if last != nil {
			pl = last.Load()
		}
		if try > 0 || pl == nil || pl.key != key {
			if pl, err = r.pool(key); err != nil {
				return err
			}
			if last != nil {
				last.Store(pl)
			}
		}
		inst, slow, err = r.acquire(ctx, pl, lim, monoNanos(start))
		if err != errPoolGone {
			break
		}
		if try == 8 { // pools are only dropped when empty and idle: unreachable
			return ErrClosed
		}
	}
	if err != nil {
		if f, ok := abi.AsFailure(err); ok {
			end := monoNow()
			*res = Result{InvocationID: req.InvocationID, Failure: f, Calls: calls, Duration: end.Sub(start), Ended: end}
			return f
		}
		return err
	}

	inst.inv = invocation{lim: lim, caller: caller, who: who, record: calls}
	inv := &inst.inv
	inv.log.limit = lim.MaxLogBytes
	// The input is parked before the call, as ABI.md says.
	inv.parked, inv.parkedStatus, inv.hasParked = doc, abi.StatusOK, true
	inst.mem.refused.Store(0)
	// The deadline runs from when the instance is ready, as it always
	// did: waiting for one, or its initialisation (under its own
	// InitTimeout), is not the invocation's time. On the warm path that is
	// start, read a few lookups ago.
	begun := start
	if slow {
		begun = monoNow()
	}
	inst.run.begin(ctx, begun.Add(lim.Timeout), lim.Fuel, inv, nil)
	inst.setStack(lim.MaxStackBytes)
	deadline := inst.run.deadline

	cctx, cancel := r.callContext(inst)
	inst.stackSlot[0] = uint64(len(doc))
	callErr := inst.handle.CallWithStack(cctx, inst.stackSlot[:])
	// One look at the clock after the call serves the deadline check, the
	// pool's idle bookkeeping and Duration: a clock read is dear on some
	// virtual machines.
	end := monoNow()
	if callErr == nil {
		if f := inst.run.interruptedAt(end); f != nil {
			// See RATIONALE.md#why-is-a-decision-returned-after-the-deadline-a-timeout.
			// The guest returned, but only after its deadline (a host
			// function that waited, say) or after the caller gave up. A
			// decision that late is not accepted.
			callErr = f
		}
	}
	cancel()
	inst.invocations++

	*res = Result{
		InvocationID:  req.InvocationID,
		HostCalls:     inv.calls,
		Calls:         inv.record,
		HostCallBytes: inv.bytes,
		CreditCharged: inv.charged,
		FuelUsed:      inst.fuelUsed(lim.Fuel),
	}
	var fail *abi.Failure
	if callErr != nil && ctx.Err() != nil && inv.violation == nil && end.Before(deadline) {
		// The caller gave up; that is not the hook's failure.
		inst.run.end()
		r.release(ctx, pl, inst, false, monoNanos(end))
		// The host calls made so far stand (the runner settled them with
		// a context the caller's does not cancel): the report keeps them,
		// with no decision and no failure, and so does the error.
		*res = Result{InvocationID: req.InvocationID, HostCalls: inv.calls, Calls: inv.record, HostCallBytes: inv.bytes,
			CreditCharged: inv.charged, Duration: end.Sub(start), Ended: end}
		return &AbandonedError{InvocationID: req.InvocationID, HostCalls: inv.calls, CreditCharged: inv.charged, Err: ctx.Err()}
	}
	if fail = inv.violation; fail == nil {
		// Out of fuel or stack, whether it trapped or returned.
		fail = inst.exhausted(lim, lim.Fuel, callErr)
	}
	switch {
	case fail != nil:
	case callErr != nil:
		fail = classify(cctx, callErr, inst.mem, inv)
	default:
		res.Decision, fail = r.readDecision(inst, inv, inst.stackSlot[0], point, spare)
	}
	res.Logs = inv.log.flush()
	res.LogBytesDropped = inv.log.dropped
	res.MemoryPages = inst.mem.pages()
	res.Failure = fail
	reuse := fail == nil && res.MemoryPages <= lim.MemoryHighWaterPages
	inst.run.end()
	inst.inv = invocation{} // keep nothing of this invocation alive
	res.Reused = r.release(ctx, pl, inst, reuse, monoNanos(end))
	res.Duration, res.Ended = end.Sub(start), end
	if fail != nil {
		return fail
	}
	return nil
}

// encodeInvocation is the invocation document by Marshal, for the maps
// AppendJSON leaves to it; an object standing for a nil map is decoded
// into the map it came from (its bytes are Marshal's, so they round-trip).
func encodeInvocation(inv abi.Invocation, context, settings abi.Object) ([]byte, error) {
	var err error
	if inv.Context == nil {
		if inv.Context, err = objectMap(context); err != nil {
			return nil, err
		}
	}
	if inv.Settings == nil {
		if inv.Settings, err = objectMap(settings); err != nil {
			return nil, err
		}
	}
	return inv.Encode()
}

// objectMap decodes o, whatever its size and depth (its bytes are Marshal's).
func objectMap(o abi.Object) (map[string]any, error) {
	return o.Map(abi.JSONLimits{MaxBytes: o.Len(), MaxDepth: 1 << 20})
}

// prepare checks req's module, point and limits as Invoke does and makes p
// of them, then checks the rest of req (prepareRequest).
func (r *Runtime) prepare(m *Module, req *Request, p *Prepared) error {
	if m == nil || m.rt != r {
		return fmt.Errorf("%w: module was not loaded by this runtime", ErrInvalidRequest)
	}
	name := req.Point
	if name == "" {
		name = "message.outbound"
	}
	point, ok := req.Points.Lookup(name)
	if !ok {
		return fmt.Errorf("%w: unknown hook point %q", ErrInvalidRequest, name)
	}
	if man := m.Manifest(); !man.AllowsPoint(name) {
		return fmt.Errorf("%w: the hook's manifest does not allow point %q (it allows %s)", ErrInvalidRequest, name, strings.Join(man.Points, ", "))
	}
	lim, err := r.LimitsFor(m, req.Limits)
	if err != nil {
		return err
	}
	*p = Prepared{m: m, point: point, asked: req.Limits, limits: lim, points: req.Points}
	req.Point, req.Points, req.Limits = "", nil, Limits{}
	return r.prepareRequest(p, req)
}

// prepareRequest checks the fields of req that Prepared does not cover, and
// that those it covers are zero or p's; it fills in the defaults (Point,
// Hook, InvocationID).
func (r *Runtime) prepareRequest(p *Prepared, req *Request) error {
	if p == nil || p.m == nil || p.m.rt != r {
		return fmt.Errorf("%w: module was not prepared by this runtime", ErrInvalidRequest)
	}
	if req.Tenant == "" {
		return fmt.Errorf("%w: tenant is required", ErrInvalidRequest)
	}
	if (req.Point != "" && req.Point != p.point.Name) || (req.Points != nil && req.Points != p.points) || (req.Limits != Limits{} && req.Limits != p.asked) {
		return fmt.Errorf("%w: the request's point or limits are not those it was prepared with", ErrInvalidRequest)
	}
	req.Point = p.point.Name
	if req.Hook == "" {
		// Never the manifest's name: a module could claim another's and
		// read its key-value data, or a new name for every upload.
		req.Hook = p.m.Digest()
	}
	if req.InvocationID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		req.InvocationID = hex.EncodeToString(b[:])
	}
	return nil
}

// mergeLimits fills the zero fields of l from d.
func mergeLimits(l, d Limits) Limits {
	if l.MemoryPages == 0 {
		l.MemoryPages = d.MemoryPages
	}
	if l.MemoryHighWaterPages == 0 && l.MemoryPages == d.MemoryPages {
		l.MemoryHighWaterPages = d.MemoryHighWaterPages
	}
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	if l.InitTimeout == 0 {
		l.InitTimeout = d.InitTimeout
	}
	if l.MaxInputBytes == 0 {
		l.MaxInputBytes = d.MaxInputBytes
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = d.MaxOutputBytes
	}
	if l.MaxHostCalls == 0 {
		l.MaxHostCalls = d.MaxHostCalls
	}
	if l.MaxHostCallBytes == 0 {
		l.MaxHostCallBytes = d.MaxHostCallBytes
	}
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = d.MaxRequestBytes
	}
	if l.MaxResultBytes == 0 {
		l.MaxResultBytes = d.MaxResultBytes
	}
	if l.MaxLogBytes == 0 {
		l.MaxLogBytes = d.MaxLogBytes
	}
	if l.Fuel == 0 {
		l.Fuel = d.Fuel
	}
	if l.InitFuel == 0 {
		l.InitFuel = d.InitFuel
	}
	if l.MaxStackBytes == 0 {
		l.MaxStackBytes = d.MaxStackBytes
	}
	return l
}

// canonicalContinue is the canonical encoding of a continue.
const canonicalContinue = `{"action":"continue"}`

// readDecision bounds-checks, copies and decodes the hook's output.
// A continue goes into spare when it is not nil.
func (r *Runtime) readDecision(inst *instance, inv *invocation, ret uint64, point abi.Point, spare *abi.Decision) (*abi.Decision, *abi.Failure) {
	if ret == 0 {
		return nil, &abi.Failure{Code: abi.FailInvalidOutput, Message: abi.HandleExport + " returned 0 (no decision)"}
	}
	ptr, n := abi.UnpackPtrLen(ret)
	if int64(n) > int64(inv.lim.MaxOutputBytes) {
		return nil, &abi.Failure{Code: abi.FailOutputTooLarge, Message: fmt.Sprintf("decision is %d bytes, over the limit of %d", n, inv.lim.MaxOutputBytes)}
	}
	out, ok := readGuestInto(inst.out[:0], inst.mod.Memory(), ptr, n)
	if !ok {
		return nil, &abi.Failure{Code: abi.FailABIViolation, Message: fmt.Sprintf("output [%d, %d+%d) is outside linear memory of %d bytes", ptr, ptr, n, inst.mod.Memory().Size())}
	}
	inst.out = out // DecodeDecision copies what it keeps
	if string(out) == canonicalContinue {
		// The most common decision, already canonical: what DecodeDecision
		// returns for it at every point (decision_test.go checks).
		if spare == nil {
			spare = new(abi.Decision)
		}
		*spare = abi.Decision{Action: abi.ActionContinue, Shape: abi.ShapeCanonical}
		return spare, nil
	}
	d, err := abi.DecodeDecision(out, point, abi.JSONLimits{MaxBytes: inv.lim.MaxOutputBytes})
	if err != nil {
		return nil, &abi.Failure{Code: abi.FailInvalidOutput, Message: err.Error()}
	}
	return d, nil
}

// classify turns the error of a guest call into a Failure. The message keeps
// the first line of wazero's error: the wasm stack trace and any Go stack
// trace stay out of it.
func classify(ctx context.Context, err error, mem *limitedMemory, inv *invocation) *abi.Failure {
	if inv != nil && inv.violation != nil {
		return inv.violation
	}
	if f, ok := abi.AsFailure(err); ok {
		return f
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return &abi.Failure{Code: abi.FailTimeout, Message: "the hook ran past its time limit"}
		case sys.ExitCodeContextCanceled:
			return &abi.Failure{Code: abi.FailTimeout, Message: "the invocation was cancelled"}
		}
		if mem != nil && mem.refused.Load() > 0 {
			return &abi.Failure{Code: abi.FailMemory, Message: fmt.Sprintf("the hook exited with code %d after its memory limit of %d pages was reached", exit.ExitCode(), mem.limit/pageSize)}
		}
		return &abi.Failure{Code: abi.FailTrap, Message: fmt.Sprintf("the hook exited with code %d", exit.ExitCode())}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &abi.Failure{Code: abi.FailTimeout, Message: "the hook ran past its time limit"}
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSuffix(msg, " (recovered by wazero)")
	if mem != nil && mem.refused.Load() > 0 {
		return &abi.Failure{Code: abi.FailMemory, Message: fmt.Sprintf("%s, after its memory limit of %d pages was reached", msg, mem.limit/pageSize)}
	}
	return &abi.Failure{Code: abi.FailTrap, Message: msg}
}
