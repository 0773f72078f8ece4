package capability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/wasmhooks/wasmhooks/abi"
)

// Defaults of RunnerOptions.
const (
	// DefaultMaxPayloadBytes bounds a payload when
	// RunnerOptions.MaxPayloadBytes is zero.
	DefaultMaxPayloadBytes = abi.DefaultMaxPayloadBytes
	// DefaultMaxDepth bounds payload nesting when RunnerOptions.MaxDepth
	// is zero.
	DefaultMaxDepth = abi.DefaultMaxJSONDepth
	// DefaultSettleTimeout bounds settling or releasing one hold when
	// RunnerOptions.SettleTimeout is zero.
	DefaultSettleTimeout = 10 * time.Second
)

// maxMessageBytes bounds the message of an error body a hook receives.
const maxMessageBytes = 512

// RunnerOptions configures a Runner. The zero value is valid: no logging, no
// usage records, 1 MiB payloads nested at most 64 deep, no spend cap, no
// dispatcher (follow-up work is dropped and reported).
// NewRunner copies what it needs, so the options may be reused; the Logger
// and Usage sink must be safe for concurrent use.
type RunnerOptions struct {
	// Logger receives the operator's view of failures: provider errors,
	// panics with their stacks, ledger errors. Nil discards.
	Logger *slog.Logger

	// Usage receives a UsageRecord for every call. Nil keeps none.
	Usage UsageSink

	// MaxPayloadBytes is the largest payload accepted, in bytes; a larger
	// one gets REQUEST_TOO_LARGE. Zero means DefaultMaxPayloadBytes (1 MiB).
	MaxPayloadBytes int

	// MaxDepth is the deepest nesting of arrays and objects accepted in a
	// payload. Zero means DefaultMaxDepth (64).
	MaxDepth int

	// MaxCreditPerInvocation caps the credit one invocation may reserve
	// and spend across all its host calls, in credit units; a call that
	// would go over gets QUOTA_EXCEEDED. It defends a tenant against a
	// hook that loops cheap billable calls. Zero means no cap.
	MaxCreditPerInvocation int64

	// SettleTimeout bounds each Settle and Release of a hold, which run
	// even when the call's context is cancelled. Zero means
	// DefaultSettleTimeout (10 s).
	SettleTimeout time.Duration

	// Dispatcher receives the follow-up work (Result.FollowUps) of every
	// call that was settled, after its reply is decided, from a bounded
	// queue; see DispatchOptions and the package documentation. Nil drops
	// follow-ups and reports them (ErrNoDispatcher). Call Runner.Close to
	// drain the queue.
	Dispatcher Dispatcher

	// Dispatch configures the queue, the workers and the retries of the
	// dispatch step. The zero value gives the defaults.
	Dispatch DispatchOptions
}

// Runner answers host calls: every call goes through the same pipeline
// (resolve, grant, validate, gate, execute, dispatch; see the package
// documentation). It satisfies the runtime's HostCaller interface.
//
// A Runner is safe for concurrent use by multiple goroutines.
type Runner struct {
	reg           *Registry
	log           *slog.Logger
	usage         UsageSink
	limits        abi.JSONLimits
	settleTimeout time.Duration
	spend         *spendCap // nil when there is no cap
	flights       *inflight // the calls being answered, by idempotency key
	dispatch      *dispatchQueue
}

// NewRunner returns a Runner serving the capabilities of reg. It returns an
// error if reg is nil or an option is negative.
func NewRunner(reg *Registry, opts RunnerOptions) (*Runner, error) {
	if reg == nil {
		return nil, errors.New("capability: NewRunner: nil registry")
	}
	if opts.MaxPayloadBytes < 0 || opts.MaxDepth < 0 || opts.MaxCreditPerInvocation < 0 || opts.SettleTimeout < 0 {
		return nil, errors.New("capability: NewRunner: negative option")
	}
	r := &Runner{
		reg:           reg,
		log:           opts.Logger,
		usage:         opts.Usage,
		limits:        abi.JSONLimits{MaxBytes: opts.MaxPayloadBytes, MaxDepth: opts.MaxDepth},
		settleTimeout: opts.SettleTimeout,
		flights:       newInflight(),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.limits.MaxBytes == 0 {
		r.limits.MaxBytes = DefaultMaxPayloadBytes
	}
	if r.limits.MaxDepth == 0 {
		r.limits.MaxDepth = DefaultMaxDepth
	}
	if r.settleTimeout == 0 {
		r.settleTimeout = DefaultSettleTimeout
	}
	if opts.MaxCreditPerInvocation > 0 {
		r.spend = newSpendCap(opts.MaxCreditPerInvocation)
	}
	var err error
	if r.dispatch, err = newDispatchQueue(opts.Dispatcher, opts.Dispatch, r.log); err != nil {
		return nil, err
	}
	return r, nil
}

// HostCall answers one host call. It never panics and never returns host
// details in the body: error bodies are abi.Error objects whose messages are
// safe for the hook. Reply.Charged is the credit actually charged.
func (r *Runner) HostCall(ctx context.Context, call *abi.Call) abi.Reply {
	reply, _ := r.Run(ctx, call)
	return reply
}

// Run is HostCall that also returns the operator's view of a failure: nil
// for StatusOK, else an error wrapping one of the package's sentinels
// (ErrUnknownCapability, ErrNotGranted, ErrInvalidRequest, ...) or typed
// errors (*DeniedError, *InvalidRequestError, *ExecuteError). The error may
// carry host details and must not be shown to the hook; the Reply never
// carries any.
func (r *Runner) Run(ctx context.Context, call *abi.Call) (reply abi.Reply, err error) {
	if call == nil {
		call = &abi.Call{}
	}
	c := &callRun{r: r, call: call}
	if r.usage != nil { // the clock is read only for the usage record
		c.start = time.Now()
	}
	c.rec = UsageRecord{
		Time:       c.start,
		Tenant:     call.Caller.Tenant,
		Hook:       call.Caller.Hook,
		Module:     call.Caller.Module,
		Invocation: call.Caller.Invocation,
		Seq:        call.Seq,
	}
	defer func() {
		if p := recover(); p != nil { // a bug in the runner itself
			err = &ExecuteError{Capability: c.name, Stage: "runner", Err: fmt.Errorf("panic: %v", p), Panic: p, Stack: debug.Stack()}
			reply = abi.ErrorReply(abi.StatusCapabilityFailed, failedMessage(c.name))
		}
		c.releaseAll(ctx) // a safety net: normally every hold is resolved by now
		if c.entered {
			// Every hold is resolved: a duplicate waiting for this
			// call now finds its key's reservation resolved.
			r.flights.leave(c.fkey)
		}
		c.rec.Status = reply.Status
		c.rec.Charged = reply.Charged
		if r.usage != nil {
			c.rec.Duration = time.Since(c.start)
		}
		c.finish(ctx, reply, err)
	}()
	return c.run(ctx)
}

// callRun is the state of one call through the pipeline. It is used by one
// goroutine.
type callRun struct {
	r     *Runner
	call  *abi.Call
	start time.Time // zero when the runner keeps no usage records
	name  string    // the capability name once it is well-formed
	rec   UsageRecord
	holds []heldHold // in the order the gates admitted

	// entered is true once the call is the flight of fkey (see inflight).
	entered bool
	fkey    flightKey
}

// heldHold is a Hold with the name of its gate and whether it is resolved.
type heldHold struct {
	gate     string
	hold     Hold
	resolved bool
}

func (c *callRun) fail(s abi.Status, msg string, err error) (abi.Reply, error) {
	return abi.ErrorReply(s, clip(msg, maxMessageBytes)), err
}

func (c *callRun) run(ctx context.Context) (abi.Reply, error) {
	call := c.call

	// 1. Resolve.
	if len(call.Name) > abi.MaxNameBytes {
		return c.fail(abi.StatusRequestTooLarge,
			fmt.Sprintf("capability name is %d bytes, over the limit of %d", len(call.Name), abi.MaxNameBytes),
			fmt.Errorf("%w: name of %d bytes", ErrRequestTooLarge, len(call.Name)))
	}
	if !ValidName(call.Name) {
		return c.fail(abi.StatusUnknownCapability, "invalid capability name",
			fmt.Errorf("%w: malformed name", ErrUnknownCapability))
	}
	c.name = call.Name
	c.rec.Capability = c.name
	e := c.r.reg.lookup(c.name)
	if e == nil {
		return c.fail(abi.StatusUnknownCapability, fmt.Sprintf("no capability named %q", c.name),
			fmt.Errorf("%w: %q", ErrUnknownCapability, c.name))
	}

	// 2. Grant.
	if !slices.Contains(call.Caller.Granted, c.name) {
		return c.deny(&DeniedError{Gate: "grant", Status: abi.StatusDenied,
			Reason: fmt.Sprintf("capability %q is not granted to this hook", c.name), Err: ErrNotGranted})
	}
	if call.Caller.HasManifest && !slices.Contains(call.Caller.Requested, c.name) {
		return c.deny(&DeniedError{Gate: "grant", Status: abi.StatusDenied,
			Reason: fmt.Sprintf("capability %q is not requested in this hook's manifest", c.name), Err: ErrNotGranted})
	}

	// 3. Validate. The value ParseJSON returns is what the schema checks
	// and what Cost, the gates and Execute see: one parse, no disagreement.
	if len(call.Payload) > c.r.limits.MaxBytes {
		return c.fail(abi.StatusRequestTooLarge,
			fmt.Sprintf("payload is %d bytes, over the limit of %d", len(call.Payload), c.r.limits.MaxBytes),
			fmt.Errorf("%w: payload of %d bytes", ErrRequestTooLarge, len(call.Payload)))
	}
	payload, perr := abi.ParseJSON(call.Payload, c.r.limits)
	if perr != nil {
		ire := &InvalidRequestError{Capability: c.name, Reason: "not strict JSON", Err: perr}
		msg := "payload is not strict JSON"
		var je *abi.JSONError
		if errors.As(perr, &je) {
			ire.Reason = je.Reason
			msg = fmt.Sprintf("payload is not strict JSON: %s (at byte %d)", clip(je.Reason, 200), je.Offset)
		}
		return c.fail(abi.StatusInvalidRequest, msg, ire)
	}
	// A schema that accepts everything ({} or true, decided at Register)
	// could only say yes: the strict parse above is all the checking.
	if verr := c.validate(e, payload); verr != nil {
		if _, ok := verr.(*ExecuteError); ok {
			return c.fail(abi.StatusCapabilityFailed, failedMessage(c.name), verr)
		}
		path, reason := schemaFailure(verr)
		where := "at the top level"
		if path != "" {
			where = "at " + clip(path, 200)
		}
		return c.fail(abi.StatusInvalidRequest,
			fmt.Sprintf("payload does not match the schema of %s %s: %s", c.name, where, reason),
			&InvalidRequestError{Capability: c.name, Path: path, Reason: reason, Err: verr})
	}

	// 4. Gate.
	req := &Request{
		Capability: c.name,
		Caller:     call.Caller,
		Payload:    payload,
		Seq:        call.Seq,
	}
	if call.Caller.Invocation != "" {
		req.IdempotencyKey = call.IdempotencyKey()
	}
	if e.cap.Cost != nil {
		if err := c.protect("cost", func() error {
			req.Cost = e.cap.Cost(payload)
			if req.Cost < 0 {
				return fmt.Errorf("negative cost %d", req.Cost)
			}
			return nil
		}); err != nil {
			return c.failed(err, "cost")
		}
	}
	// One call per idempotency key at a time: a duplicate of a call in
	// flight waits here, before any gate, for the first to finish, and
	// then meets its resolved reservation; it never shares the first's
	// pending hold and never executes alongside it.
	if req.IdempotencyKey != "" {
		c.fkey = flightKey{tenant: call.Caller.Tenant, key: req.IdempotencyKey}
		if err := c.r.flights.enter(ctx, c.fkey); err != nil {
			return c.fail(abi.StatusCapabilityFailed,
				fmt.Sprintf("capability %s was not run: the invocation was cancelled", c.name),
				fmt.Errorf("%w: waiting for the same call in flight: %w", ErrCancelled, err))
		}
		c.entered = true
	}
	// The spend cap, if any, is the first gate.
	if c.r.spend != nil {
		if err := c.admit(ctx, c.r.spend, req); err != nil {
			return c.gateRefused(c.r.spend, err)
		}
	}
	for _, g := range e.cap.Gates {
		if err := c.admit(ctx, g, req); err != nil {
			return c.gateRefused(g, err)
		}
	}
	c.rec.Reserved = req.Cost
	if cerr := ctx.Err(); cerr != nil {
		c.releaseAll(ctx)
		c.rec.Reserved = 0
		return c.fail(abi.StatusCapabilityFailed,
			fmt.Sprintf("capability %s was not run: the invocation was cancelled", c.name),
			fmt.Errorf("%w: %w", ErrCancelled, cerr))
	}

	// 5. Execute.
	var res *Result
	xerr := c.protect("execute", func() error {
		var err error
		res, err = e.cap.Execute(ctx, req)
		if err != nil {
			err = &ExecuteError{Capability: c.name, Stage: "execute", Err: err}
		}
		return err
	})
	if xerr != nil {
		c.releaseAll(ctx)
		if res != nil {
			c.rec.Consumed = max(res.Usage.Credit, 0)
			c.rec.Uncharged = c.rec.Consumed
			c.rec.Units = res.Usage.clone().Units
		}
		if ae, ok := abi.AsError(xerr); ok && deliberate(ae.Status) {
			return c.fail(ae.Status, ae.Message, xerr)
		}
		return c.fail(abi.StatusCapabilityFailed, failedMessage(c.name), xerr)
	}
	if res == nil {
		res = &Result{}
	}

	// 6. Dispatch: encode, settle (release on failure), report.
	var body []byte
	if err := c.protect("encode", func() error {
		var err error
		body, err = encodeResult(res.Value)
		return err
	}); err != nil {
		c.releaseAll(ctx)
		return c.failed(err, "encode")
	}
	usage := res.Usage.clone()
	consumed := max(usage.Credit, 0)
	usage.Credit = consumed
	c.rec.Consumed = consumed
	c.rec.Units = usage.Units
	charged, serr := c.settleAll(ctx, usage)
	c.rec.Uncharged = max(consumed-charged, 0)
	if serr != nil {
		// The work was done but could not be billed: the result is not
		// delivered. See RATIONALE.md#why-is-a-failed-call-not-charged-and-what-if-settlement-fails.
		reply, err := c.failed(serr, "settle")
		reply.Charged = charged
		return reply, err
	}
	// The call completed and was settled: its follow-up work goes out
	// (also with RESULT_TOO_LARGE, whose work was done and charged). It is
	// queued, never delivered here; see dispatch.go.
	if len(res.FollowUps) > 0 {
		c.rec.FollowUps = len(res.FollowUps)
		c.rec.FollowUpsDropped = c.r.dispatch.enqueue(ctx, c, res.FollowUps)
	}
	if limit := call.MaxResultBytes; limit > 0 && len(body) > limit {
		// The work was done, so the consumption stands. See
		// RATIONALE.md#why-does-result_too_large-still-settle.
		reply, _ := c.fail(abi.StatusResultTooLarge,
			fmt.Sprintf("result of %s is %d bytes, over the limit of %d", c.name, len(body), limit),
			nil)
		reply.Charged = charged
		return reply, fmt.Errorf("%w: %s returned %d bytes, limit %d", ErrResultTooLarge, c.name, len(body), limit)
	}
	return abi.Reply{Status: abi.StatusOK, Body: body, Charged: charged}, nil
}

// deny answers with a grant or gate refusal.
func (c *callRun) deny(de *DeniedError) (abi.Reply, error) {
	return c.fail(de.Status, de.Reason, de)
}

// gateRefused maps a gate's error to a reply.
func (c *callRun) gateRefused(g Gate, err error) (abi.Reply, error) {
	var de *DeniedError
	switch {
	case errors.As(err, &de):
		if de.Gate == "" {
			de.Gate = g.Name()
		}
		s := de.Status
		switch s {
		case abi.StatusDenied, abi.StatusInsufficientCredit, abi.StatusRateLimited, abi.StatusQuotaExceeded:
		default:
			s = abi.StatusDenied
		}
		msg := de.Reason
		if msg == "" {
			msg = fmt.Sprintf("the %s gate refused the call to %s", de.Gate, c.name)
		}
		return c.fail(s, msg, err)
	case errors.Is(err, ErrInsufficientCredit):
		return c.fail(abi.StatusInsufficientCredit, fmt.Sprintf("not enough credit for %s", c.name),
			&DeniedError{Gate: g.Name(), Status: abi.StatusInsufficientCredit, Reason: "not enough credit", Err: err})
	case errors.Is(err, ErrRateLimited):
		return c.fail(abi.StatusRateLimited, fmt.Sprintf("too many calls to %s; retry later", c.name),
			&DeniedError{Gate: g.Name(), Status: abi.StatusRateLimited, Reason: "rate limited", Err: err})
	default: // the gate could not decide: fail closed
		if _, ok := err.(*ExecuteError); !ok {
			err = &ExecuteError{Capability: c.name, Stage: "gate", Err: fmt.Errorf("%s gate: %w", g.Name(), err)}
		}
		return c.fail(abi.StatusCapabilityFailed, failedMessage(c.name), err)
	}
}

// failed answers CAPABILITY_FAILED for an error of the given stage.
func (c *callRun) failed(err error, stage string) (abi.Reply, error) {
	if _, ok := err.(*ExecuteError); !ok {
		err = &ExecuteError{Capability: c.name, Stage: stage, Err: err}
	}
	return c.fail(abi.StatusCapabilityFailed, failedMessage(c.name), err)
}

// deliberate reports whether a capability may answer with status s itself.
// The others belong to the runner and the runtime.
func deliberate(s abi.Status) bool {
	switch s {
	case abi.StatusInvalidRequest, abi.StatusDenied, abi.StatusInsufficientCredit,
		abi.StatusCapabilityFailed, abi.StatusQuotaExceeded, abi.StatusRateLimited:
		return true
	}
	return false
}

func failedMessage(name string) string {
	if name == "" {
		return "capability failed"
	}
	return "capability " + name + " failed"
}

// admit asks g to admit req and keeps the hold it gives. When g refuses,
// every hold taken so far is released and the refusal returned.
func (c *callRun) admit(ctx context.Context, g Gate, req *Request) error {
	var h Hold
	err := c.protect("gate", func() error {
		var err error
		h, err = g.Admit(ctx, req, req.Cost)
		return err
	})
	if err != nil {
		c.releaseAll(ctx)
		return err
	}
	if h != nil {
		c.holds = append(c.holds, heldHold{gate: g.Name(), hold: h})
	}
	return nil
}

// asExecuteError returns the *ExecuteError in err's chain, or nil. It is a
// function of its own so that the target errors.As needs is allocated only
// when there is an error to look into.
func asExecuteError(err error) *ExecuteError {
	var xe *ExecuteError
	if errors.As(err, &xe) {
		return xe
	}
	return nil
}

// validate checks payload against e's schema. A schema that accepts every
// value ({} or true) is not run: it could only say yes.
func (c *callRun) validate(e *entry, payload any) error {
	if e.anything {
		return nil
	}
	return c.protect("validate", func() error { return e.schema.Validate(payload) })
}

// maxPooledEncodeBytes is the largest encode buffer kept for reuse; a larger
// result's buffer is left to the garbage collector.
const maxPooledEncodeBytes = 64 << 10

// encodeBufs holds *[]byte scratch buffers for encodeResult.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// encodeResult encodes v as abi.Marshal does (the same bytes: abi.AppendJSON
// is held to Marshal by abi's tests) into a scratch buffer and returns a copy
// of exactly its length, which the reply owns (the runtime may keep a body
// parked for the guest). A buffer that grew too large to pool is returned
// itself. Values AppendJSON does not handle go to Marshal.
func encodeResult(v any) ([]byte, error) {
	bp := encodeBufs.Get().(*[]byte)
	b, ok := abi.AppendJSON((*bp)[:0], v)
	if !ok {
		encodeBufs.Put(bp)
		return abi.Marshal(v)
	}
	if cap(b) > maxPooledEncodeBytes {
		encodeBufs.Put(bp) // with the buffer it had
		return b, nil
	}
	out := make([]byte, len(b))
	copy(out, b)
	*bp = b[:0]
	encodeBufs.Put(bp)
	return out, nil
}

// protect runs f, turning a panic into an *ExecuteError with the stack.
func (c *callRun) protect(stage string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &ExecuteError{Capability: c.name, Stage: stage, Err: fmt.Errorf("panic: %v", p), Panic: p, Stack: debug.Stack()}
		}
	}()
	return f()
}

// resolveCtx returns the context holds are resolved with: never cancelled
// by the call's context, bounded by the settle timeout.
func (c *callRun) resolveCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.r.settleTimeout)
}

// settleAll settles every unresolved hold with u and returns the sum charged.
// A hold that fails to settle is not released afterwards: it may have been
// charged, and only the ledger knows. The operator reconciles from the log.
func (c *callRun) settleAll(ctx context.Context, u Usage) (int64, error) {
	var total int64
	var errs []error
	for i := range c.holds {
		h := &c.holds[i]
		if h.resolved {
			continue
		}
		h.resolved = true
		var charged int64
		err := c.protect("settle", func() error {
			sctx, cancel := c.resolveCtx(ctx)
			defer cancel()
			var err error
			charged, err = h.hold.Settle(sctx, u)
			return err
		})
		if err != nil {
			c.r.log.ErrorContext(ctx, "capability: settling a hold failed; reconcile the ledger",
				c.attrs(slog.String("gate", h.gate), slog.Any("err", err))...)
			errs = append(errs, fmt.Errorf("%s gate: %w", h.gate, err))
			continue
		}
		total += max(charged, 0)
	}
	return total, errors.Join(errs...)
}

// releaseAll releases every unresolved hold, in reverse order of admission.
func (c *callRun) releaseAll(ctx context.Context) {
	for i := len(c.holds) - 1; i >= 0; i-- {
		h := &c.holds[i]
		if h.resolved {
			continue
		}
		h.resolved = true
		err := c.protect("release", func() error {
			rctx, cancel := c.resolveCtx(ctx)
			defer cancel()
			return h.hold.Release(rctx)
		})
		if err != nil {
			c.r.log.ErrorContext(ctx, "capability: releasing a hold failed; reconcile the ledger",
				c.attrs(slog.String("gate", h.gate), slog.Any("err", err))...)
		}
	}
}

func (c *callRun) attrs(extra ...any) []any {
	a := []any{
		slog.String("capability", c.name),
		slog.String("tenant", c.call.Caller.Tenant),
		slog.String("hook", c.call.Caller.Hook),
		slog.String("invocation", c.call.Caller.Invocation),
		slog.Int("seq", c.call.Seq),
	}
	return append(a, extra...)
}

// finish logs the outcome for the operator and emits the usage record. The
// log attributes are built only when the logger wants the record: on the hot
// path (an answered call at Info) that saves most of the runner's own cost.
func (c *callRun) finish(ctx context.Context, reply abi.Reply, err error) {
	log := c.r.log
	var xe *ExecuteError
	if err != nil {
		xe = asExecuteError(err)
	}
	level, msg := slog.LevelInfo, "capability: call refused"
	switch {
	case err == nil && reply.Status == abi.StatusOK:
		level, msg = slog.LevelDebug, "capability: call answered"
	case xe != nil && xe.Panic != nil:
		level, msg = slog.LevelError, "capability: panic recovered"
	case xe != nil:
		level, msg = slog.LevelWarn, "capability: call failed"
	}
	if log.Enabled(ctx, level) {
		attrs := c.attrs(slog.String("status", reply.Status.Code()), slog.Int64("charged", reply.Charged))
		if err != nil {
			attrs = append(attrs, slog.Any("err", err))
		}
		if xe != nil && xe.Panic != nil {
			attrs = append(attrs, slog.String("stack", string(xe.Stack)))
		}
		log.Log(ctx, level, msg, attrs...)
	}
	if c.r.usage == nil {
		return
	}
	if uerr := c.r.usage.Record(context.WithoutCancel(ctx), c.rec); uerr != nil {
		log.ErrorContext(ctx, "capability: usage record lost", c.attrs(slog.String("status", reply.Status.Code()), slog.Int64("charged", reply.Charged), slog.Any("err", uerr))...)
	}
}

// schemaFailure turns a validator error into the failing instance path and
// a reason that names what is wrong without echoing the payload's values.
func schemaFailure(err error) (path, reason string) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "", "does not match the schema"
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	path = leaf.InstanceLocation
	kw := ""
	for _, seg := range slices.Backward(strings.Split(leaf.KeywordLocation, "/")) {
		if knownKeyword(seg) {
			kw = seg
			break
		}
	}
	msg := leaf.Message
	switch kw {
	case "type", "required", "minLength", "maxLength", "minItems", "maxItems",
		"minProperties", "maxProperties", "enum", "const", "uniqueItems",
		"additionalItems", "minContains", "maxContains", "pattern",
		"dependentRequired", "dependencies", "additionalProperties":
		return path, msg
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		if i := strings.Index(msg, " but found"); i >= 0 {
			msg = msg[:i]
		}
		return path, msg
	case "multipleOf":
		if i := strings.Index(msg, "not multipleOf "); i >= 0 {
			return path, "must be a multiple of " + msg[i+len("not multipleOf "):]
		}
	case "format":
		if i := strings.LastIndex(msg, " is not valid "); i >= 0 {
			return path, "is not a valid " + msg[i+len(" is not valid "):]
		}
	case "":
		if msg == "not allowed" {
			return path, "no value is allowed here"
		}
	}
	if kw == "" {
		return path, "does not match the schema"
	}
	return path, fmt.Sprintf("fails %q", kw)
}

func knownKeyword(s string) bool {
	switch s {
	case "type", "required", "minLength", "maxLength", "minItems", "maxItems",
		"minProperties", "maxProperties", "enum", "const", "uniqueItems",
		"additionalItems", "minContains", "maxContains", "pattern",
		"dependentRequired", "dependencies", "additionalProperties",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
		"multipleOf", "format", "not", "anyOf", "oneOf", "allOf", "then", "else",
		"contentEncoding", "contentMediaType", "contentSchema", "propertyNames",
		"unevaluatedProperties", "unevaluatedItems", "contains", "prefixItems", "items":
		return true
	}
	return false
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
