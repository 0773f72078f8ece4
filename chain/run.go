package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// RunState is where a run is: everything needed to continue it, on this
// process or on another one after a restart. It travels inside a pending
// Approval and encodes to JSON.
type RunState struct {
	Run    string `json:"run"`
	Tenant string `json:"tenant"`
	Point  string `json:"point"`
	// Config is the digest of the configuration the run was on.
	Config string `json:"config"`
	// Next is the position, in the point's run order, of the next binding
	// to run.
	Next int `json:"next"`
	// Context is the traffic as it stands.
	Context map[string]any `json:"context"`
	// Input is the digest of the traffic as the run received it.
	Input string `json:"input"`
	// Modified and DoNotReplyAgain accumulate over the run.
	Modified        bool `json:"modified,omitempty"`
	DoNotReplyAgain bool `json:"do_not_reply_again,omitempty"`
	// Approved lists bindings whose ask a human already approved in this
	// run; used when a run restarts on a changed configuration.
	Approved []string `json:"approved,omitempty"`
	// ShortCircuit is the guard whose short_circuit (ABI 1.2) skips the
	// guards after it in this run; a ToolApproval after it still applies
	// (shortcircuit.go).
	ShortCircuit string `json:"short_circuit,omitempty"`
	// Notifications lists the notifies applied so far.
	Notifications []Notification `json:"notifications,omitempty"`
	// Trace is the run's trace so far.
	Trace []Step `json:"trace"`
	// Started is when the run started.
	Started time.Time `json:"started"`
}

// execute runs st's remaining bindings on s and returns the outcome. cur,
// if not nil, holds the digests of st.Context; steps releases it. started
// is c.now() when the run started, or the zero time (see steps).
func (c *Chain) execute(ctx context.Context, s *snapshot, st *RunState, spanName string, cur *audit.Digests, started time.Time) (*Outcome, error) {
	span := noSpan
	if c.tracing {
		ctx, span = c.tracer.Start(ctx, spanName, trace.WithAttributes(
			attribute.String("wasmhooks.run", st.Run),
			attribute.String("wasmhooks.tenant", st.Tenant),
			attribute.String("wasmhooks.point", st.Point),
			attribute.String("wasmhooks.config", s.digest),
		))
	}
	defer span.End()
	out, err := c.steps(ctx, s, st, cur, started)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	if span.IsRecording() { // a span that records nothing would drop them
		span.SetAttributes(attribute.String("wasmhooks.verdict", string(out.Verdict)))
		if out.Binding != "" {
			span.SetAttributes(attribute.String("wasmhooks.decided_by", out.Binding))
		}
	}
	if c.log.Enabled(context.Background(), slog.LevelDebug) { // as Logger.Debug asks
		c.log.Debug("chain: verdict", "run", st.Run, "tenant", st.Tenant, "point", st.Point, "verdict", out.Verdict, "binding", out.Binding, "by", out.By)
	}
	return out, nil
}

// steps runs st's remaining bindings. cur, if not nil, holds the digests of
// st.Context; steps releases it.
func (c *Chain) steps(ctx context.Context, s *snapshot, st *RunState, cur *audit.Digests, started time.Time) (*Outcome, error) {
	list := s.points[st.Point]
	if st.Next >= len(list) {
		if cur != nil {
			cur.Release()
		}
		return c.outcome(s, st, Allow, nil), nil
	}
	// cur holds the digests of st.Context, next those of the context a
	// modify makes: each context is encoded once, and the digests of the
	// fields a modify changed come from those encodings.
	if cur == nil {
		cur = audit.AcquireDigests()
		cur.Reset(st.Context)
	}
	var next *audit.Digests
	defer func() {
		cur.Release()
		if next != nil {
			next.Release()
		}
	}()
	seals := make([]sealed, 0, len(list)-st.Next)
	rec := records.Get().(*audit.Record) // each step's record in turn
	defer func() {
		*rec = audit.Record{}
		records.Put(rec)
	}()
	st.Trace = slices.Grow(st.Trace, len(list)-st.Next)
	per := perRun{run: st.Run, left: len(list) - st.Next}
	if c.wallClock {
		per.started = started
	}
	defer per.release()
	for st.Next < len(list) {
		b := list[st.Next]
		st.Next++
		// The step is made in its place in the trace (capacity for it was
		// grown above), not copied there: a Step is some 400 bytes.
		index := len(st.Trace)
		st.Trace = st.Trace[:index+1]
		step := &st.Trace[index]
		var (
			dec     *abi.Decision
			nextCtx = st.Context
			at      time.Time // when the step ended; zero: the record reads the clock
			err     error
		)
		if b.rule != nil { // a ToolApproval (toolapproval.go): no hook runs
			tool, ok := b.rule.matches(st.Context)
			if !ok {
				st.Trace = st.Trace[:index]
				continue // not a tool it names: no step
			}
			*step, dec = c.ruleStep(b, st, tool)
		} else if st.ShortCircuit != "" && b.Phase == Guard {
			*step = skippedStep(b, st.ShortCircuit) // shortcircuit.go
		} else {
			if dec, nextCtx, at, err = c.step(ctx, s, b, st, step, index, cur, &next, &per); err != nil {
				st.Trace = st.Trace[:index]
				return nil, err
			}
		}
		if b.Mode == ModeAudit {
			shadow(step, nextCtx)
			nextCtx = st.Context
		}
		var ap *Approval
		if step.Applied == abi.ActionAsk {
			ap = c.newApproval(b, st, dec)
			step.Approval = ap.ID
		}
		after := cur
		if step.Applied == abi.ActionModify {
			after = next // step spliced the modify into it
		}
		sl, err := c.record(ctx, rec, at, s.digest, st, index, step, cur, after)
		if err != nil {
			st.Trace = st.Trace[:index]
			return nil, err
		}
		seals = append(seals, sl)
		if after != cur {
			cur, next = after, cur
		}
		switch step.Applied {
		case abi.ActionNotify:
			st.Notifications = append(st.Notifications, notification(b, step, dec))
		case abi.ActionModify:
			st.Context, st.Modified = nextCtx, true
		case abi.ActionBlock:
			return c.blocked(s, st, b.Name, step, dec, seals), nil
		case abi.ActionAsk:
			ap.State = *st
			if ap.Seal, err = c.seal(ap); err != nil {
				return nil, fmt.Errorf("chain: sealing approval: %w", err)
			}
			if err := c.approvals.Put(ctx, ap); err != nil {
				return nil, fmt.Errorf("chain: storing approval: %w", err)
			}
			out := c.outcome(s, st, Pending, seals)
			out.Binding, out.By, out.Approval = b.Name, step.By, ap
			if dec != nil {
				out.Reason, out.UserMessage = dec.Reason, dec.UserMessage
			}
			return out, nil
		}
		if dec != nil && dec.DoNotReplyAgain && b.Phase == Guard && step.Ignored == "" && b.Mode != ModeAudit {
			st.DoNotReplyAgain = true
		}
		if shortCircuits(b, step, dec) {
			st.ShortCircuit = b.Name
		}
	}
	return c.outcome(s, st, Allow, seals), nil
}

func (c *Chain) outcome(s *snapshot, st *RunState, v Verdict, seals []sealed) *Outcome {
	trace := st.Trace
	if trace == nil {
		trace = []Step{}
	}
	return &Outcome{
		Run: st.Run, Tenant: st.Tenant, Point: st.Point, Config: s.digest, Verdict: v,
		Modified: st.Modified, DoNotReplyAgain: st.DoNotReplyAgain, Context: st.Context,
		Notifications: st.Notifications, ShortCircuit: st.ShortCircuit, Trace: trace, sealed: seals,
	}
}

func (c *Chain) blocked(s *snapshot, st *RunState, binding string, step *Step, dec *abi.Decision, seals []sealed) *Outcome {
	out := c.outcome(s, st, Block, seals)
	out.Binding, out.By = binding, step.By
	switch {
	case step.By == ByFailPolicy:
		out.Failure = step.Failure
		out.Reason = policyReason(binding, step.Failure, FailClosed)
	case dec != nil:
		out.Reason, out.UserMessage = dec.Reason, dec.UserMessage
		out.DoNotReplyAgain = out.DoNotReplyAgain || dec.DoNotReplyAgain
	}
	return out
}

// shadow turns the step of an audit binding (Binding.Mode) into a continue:
// what it would have applied, the fields it would have changed and the
// context it would have left go to step.Shadow (the trace), and a would-be
// modify, block or ask is named in step.Ignored (the trace and the audit
// record). A failure is kept, with its fail policy: under closed it is an
// error the caller reports, under open a warning; neither blocks.
func shadow(step *Step, next map[string]any) {
	sh := &Shadow{Applied: step.Applied, Changed: step.Changed}
	if step.Applied == abi.ActionModify {
		sh.Context = next
	}
	step.Shadow = sh
	if step.Applied != abi.ActionContinue {
		note := fmt.Sprintf("audit mode: would %s; not applied", step.Applied)
		if step.Ignored != "" {
			note = step.Ignored + "; " + note
		}
		step.Ignored = note
	}
	step.Applied, step.Changed = abi.ActionContinue, nil
}

// policyReason is the reason a fail policy gives. It names the failure so it
// can never be read as the hook's own words.
func policyReason(binding string, f *abi.Failure, p FailPolicy) string {
	code := "unknown"
	if f != nil {
		code = string(f.Code)
	}
	if p == FailClosed {
		return fmt.Sprintf("binding %s failed (%s); fail-closed policy blocks", binding, code)
	}
	return fmt.Sprintf("binding %s failed (%s); fail-open policy continues", binding, code)
}

// step runs one binding and decides what it applies. It makes the step in
// *step (index is its place in the trace) and returns the hook's decision
// (nil on failure), the context after the step, and when it ended
// (per.endOf). cur holds st.Context (the hook gets its bytes);
// when the step applies a modify, *nextD holds the context after it (the
// step acquires it if it is nil: most runs modify nothing).
func (c *Chain) step(ctx context.Context, s *snapshot, b *bound, st *RunState, step *Step, index int, cur *audit.Digests, nextD **audit.Digests, per *perRun) (*abi.Decision, map[string]any, time.Time, error) {
	*step = Step{Binding: b.Name, Module: b.digest, Phase: b.Phase, Priority: b.Priority, HostCalls: []audit.HostCall{}}
	span := noSpan
	if c.tracing {
		ctx, span = c.tracer.Start(ctx, "chain.hook", b.spanStart...)
	}
	defer span.End()
	// The step reads the clock once, at its end (end): its breaker's
	// outcome and its audit record's time share that reading, its latency
	// is the runtime's (Result.Duration), and a closed breaker reads none
	// (a clock read is dear on some virtual machines).
	log := stepLog{c: c, st: st, b: b}

	br := c.breakers.of(b, st.Tenant)
	p := br.allow(c.now, s.breaker)
	var (
		res  *runtime.Result
		fail *abi.Failure
		dec  *abi.Decision
		next = st.Context
		end  time.Time // c.now() once the step decided
	)
	if !p.run {
		step.Breaker = BreakerOpen
		fail = &abi.Failure{Code: abi.FailCircuitOpen, Message: fmt.Sprintf(
			"not run: the binding failed %d times in a row for this tenant; the breaker lets a trial through after %s",
			p.fails, p.until.UTC().Format(time.RFC3339))}
	} else {
		if p.trial {
			step.Breaker = BreakerHalfOpen
		}
		step.Invocation = per.invocationID(index)
		res = per.result()
		// A continue is written into the run's next Decision.
		res.Decision = per.decision()
		refused := false // the runtime refused the request: the hook did not run
		req := runtime.Request{
			Tenant: st.Tenant, Hook: b.Name, Context: st.Context, Settings: b.Settings,
			Grants: b.Grants, HostCaller: c.caller, InvocationID: step.Invocation,
		}
		// The traffic goes as the bytes the chain holds, encoded once per
		// context; the settings as encoded when the configuration was
		// built.
		if obj, ok := cur.Object(); ok {
			req.Context, req.ContextObject = nil, obj
		}
		if b.settingsObject != nil {
			req.Settings, req.SettingsObject = nil, *b.settingsObject
		}
		err := c.engine.InvokePrepared(ctx, b.prepared, req, res)
		if _, failed := err.(*abi.Failure); err != nil && !failed {
			res = nil // no report: not the hook's failure, or a refusal
		}
		switch {
		case res != nil:
			fail = res.Failure
		case ctx.Err() != nil || errors.Is(err, runtime.ErrClosed):
			// Not the hook's failure, and no verdict: the caller gave
			// up, or the runtime is gone.
			br.abort(p)
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			return nil, nil, time.Time{}, err
		default:
			// The runtime refused the request (the context grew past
			// the input limit, say): the binding reached no decision.
			fail = &abi.Failure{Code: runtime.Code(err), Message: err.Error()}
			refused = errors.Is(err, runtime.ErrInvalidRequest)
		}
		if fail == nil {
			// What the decision applies is decided before the breaker
			// hears of the run: a modify the steps after it could not
			// take is this binding's failure, not theirs.
			dec = res.Decision
			step.Decision, step.By = dec, ByHook
			if dec.Shape != abi.ShapeCanonical {
				step.Wire = dec.Shape
			}
			step.Applied, step.Ignored = permitted(b.Phase, dec)
			if step.Applied == abi.ActionAsk && contains(st.Approved, b.key) {
				step.Applied, step.By = abi.ActionContinue, ByApproval
				step.Ignored = "ask already approved earlier in this run"
			}
			if step.Applied == abi.ActionModify {
				// The modify is spliced into the bytes of the context:
				// the fields it left keep theirs.
				size, before := -1, -1
				var spliced bool
				if *nextD == nil {
					*nextD = audit.AcquireDigests()
				}
				nextD := *nextD
				if next, step.Changed, spliced = nextD.ResetMerge(cur, dec.Context); spliced {
					o, _ := nextD.Object()
					in, _ := cur.Object()
					size, before = o.Len(), in.Len()
				} else {
					next, step.Changed = merge(st.Context, dec.Context)
					nextD.Reset(next)
				}
				if len(step.Changed) == 0 {
					// Every field was set to the value it had.
					step.Applied = abi.ActionContinue
					next = st.Context
				} else if fail = c.checkModify(s, b, st, next, step.Changed, size, before); fail != nil {
					next, step.Changed, dec = st.Context, nil, nil
					step.Decision, step.Ignored, step.Wire = nil, "", ""
				}
			}
		}
		end = per.endOf(c, res)
		if refused {
			// Refused before the hook ran (traffic over its input
			// limit, say): nothing about the hook's health, and any
			// sender can cause it, so the breaker does not count it;
			// five oversized messages would otherwise open it and
			// leave the binding unrun for every message after them.
			br.abort(p)
		} else if moved := br.done(p, fail != nil, end, s.breaker); moved != "" {
			step.BreakerNow = moved
			if moved == BreakerOpen {
				log.log(slog.LevelWarn, "chain: breaker opened; the binding's fail policy applies without running it until the backoff ends", "fail_policy", b.fail)
			} else {
				log.log(slog.LevelInfo, "chain: breaker closed")
			}
		}
	}
	if res != nil {
		step.HostCalls = hostCalls(res.Calls)
		step.CreditCharged = res.CreditCharged
		step.FuelUsed = res.FuelUsed
		step.LatencyUS = res.Duration.Microseconds()
		step.Logs = res.Logs
		step.LogBytesDropped = res.LogBytesDropped
		for _, l := range res.Logs {
			// Attributed to the binding and escaped by the handler;
			// never parsed. See SECURITY.md.
			log.log(slog.LevelInfo, "chain: hook output", "module", b.digest, "stream", l.Stream, "text", l.Text)
		}
	}

	if fail != nil {
		step.Failure, step.FailPolicy, step.By = fail, b.fail, ByFailPolicy
		step.Applied = abi.ActionContinue
		if b.fail == FailClosed {
			step.Applied = abi.ActionBlock
		}
		log.log(slog.LevelWarn, "chain: hook failed", "code", fail.Code, "message", fail.Message, "fail_policy", b.fail)
		span.SetStatus(codes.Error, string(fail.Code))
		span.SetAttributes(attribute.String("wasmhooks.failure", string(fail.Code)))
	} else if step.Ignored != "" && step.By == ByHook {
		log.log(slog.LevelWarn, "chain: decision ignored", "phase", b.Phase, "action", dec.Action, "ignored", step.Ignored)
	}
	if end.IsZero() {
		end = c.now()
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("wasmhooks.applied", string(step.Applied)), attribute.String("wasmhooks.by", step.By))
	}
	return dec, next, end, nil
}

// perRun holds what a run's steps allocate together rather than one by one:
// the Decisions the runtime writes their continues into (the runtime
// allocates any other decision), and their invocation ids, made as one
// string.
type perRun struct {
	run  string
	left int // the bindings the run has yet to run, the current one included

	decisions []abi.Decision // made on the first call, one per binding left

	res *runtime.Result // what the run's invocations report into, in turn

	// started is c.now() when the run started, with its monotonic
	// reading; the zero time when the chain's clock is Options.Now or
	// the run resumes (endOf then reads the clock).
	started time.Time

	ids   string     // the ids of the trace indexes from, from+1, ...
	from  int        // the trace index of the first id in ids
	ends  [16]uint16 // ends[i] is where the id of from+i ends in ids
	n     int        // how many ids ids holds
	tried bool       // ids was made
}

// decision returns a zero Decision from the run's array.
func (p *perRun) decision() *abi.Decision {
	if len(p.decisions) == 0 {
		p.decisions = make([]abi.Decision, max(p.left, 1))
	}
	d := &p.decisions[0]
	p.decisions = p.decisions[1:]
	p.left--
	return d
}

// result returns the Result the run's invocations report into, from the
// pool on the first call: the runtime resets it at each invocation, and the
// step takes what it keeps (the host calls copied, the Decision one of the
// run's own).
func (p *perRun) result() *runtime.Result {
	if p.res == nil {
		p.res = results.Get().(*runtime.Result)
	}
	return p.res
}

// release gives the run's Result back to the pool.
func (p *perRun) release() {
	if p.res != nil {
		putResult(p.res)
		p.res = nil
	}
}

// endOf returns when a step whose invocation res reported ended: the run's
// start moved by the monotonic time from it to the hook's return
// (runtime.Result.Ended), which spares a wall-clock read per step; or
// c.now() when there is no such pair of readings.
func (p *perRun) endOf(c *Chain, res *runtime.Result) time.Time {
	if res == nil || p.started.IsZero() || res.Ended.IsZero() {
		return c.now()
	}
	return p.started.Add(res.Ended.Sub(p.started))
}

// invocationID returns the invocation id of the step at index in the run's
// trace: the run's id, a dot and the index. The ids of this and the next
// steps (as many as the bindings left, at most len(ends)) are made as one
// string on the first call.
func (p *perRun) invocationID(index int) string {
	if !p.tried && p.left > 1 {
		p.tried = true
		var buf [512]byte
		b := buf[:0]
		for p.n < min(p.left, len(p.ends)) {
			at := len(b)
			b = append(b, p.run...)
			b = append(b, '.')
			b = strconv.AppendInt(b, int64(index+p.n), 10)
			if len(b) > 1<<16-1 {
				b = b[:at]
				break
			}
			p.ends[p.n] = uint16(len(b))
			p.n++
		}
		p.ids, p.from = string(b), index
	}
	if i := index - p.from; p.n > 0 && i >= 0 && i < p.n {
		start := uint16(0)
		if i > 0 {
			start = p.ends[i-1]
		}
		return p.ids[start:p.ends[i]]
	}
	return p.run + "." + strconv.Itoa(index)
}

// records holds the Records a run writes its steps' audit records into in
// turn (an audit.Sink keeps a copy, never the pointer).
var records = sync.Pool{New: func() any { return new(audit.Record) }}

// results holds the Results steps invoke into, so that a step allocates
// none. The Decision a step gets is kept in its trace, so a Result goes back
// without one (InvokeInto would reuse it); the array of its Calls is reused
// (hostCalls copies them).
var results = sync.Pool{New: func() any { return new(runtime.Result) }}

func putResult(res *runtime.Result) {
	*res = runtime.Result{Calls: res.Calls[:0]}
	results.Put(res)
}

// stepLog logs for one step with the step's attributes. The logger carrying
// them is made on the first record the handler wants: most steps log
// nothing.
type stepLog struct {
	c  *Chain
	st *RunState
	b  *bound
	l  *slog.Logger // c.log with the step's attributes, once made
}

// log is Logger.Info, Warn, ... at level: with context.Background, as they
// log.
func (s *stepLog) log(level slog.Level, msg string, args ...any) {
	ctx := context.Background()
	if !s.c.log.Enabled(ctx, level) {
		return
	}
	if s.l == nil {
		s.l = s.c.log.With("run", s.st.Run, "tenant", s.st.Tenant, "point", s.st.Point, "binding", s.b.Name)
	}
	s.l.Log(ctx, level, msg, args...)
}

// permitted applies the phase's permissions to a decision: what the step
// applies, and what was ignored. Block, ask, do_not_reply_again and
// short_circuit belong to guards, modify to transformers; continue and
// notify to every phase. See RATIONALE.md#why-three-phases.
func permitted(phase Phase, dec *abi.Decision) (abi.Action, string) {
	a, ignored := permittedAction(phase, dec.Action)
	if dec.ShortCircuit && phase != Guard {
		ignored = joinIgnored(ignored, fmt.Sprintf("%s cannot short_circuit; only guards can", article(phase)))
	}
	if dec.DoNotReplyAgain && phase != Guard {
		why := fmt.Sprintf("%s cannot set do_not_reply_again; only guards can", article(phase))
		return a, joinIgnored(ignored, why)
	}
	return a, ignored
}

func permittedAction(phase Phase, a abi.Action) (abi.Action, string) {
	if a == abi.ActionContinue || a == abi.ActionNotify {
		// A notify changes nothing: every phase may tell a human.
		return a, ""
	}
	switch phase {
	case Transformer:
		if a == abi.ActionModify {
			return a, ""
		}
		return abi.ActionContinue, fmt.Sprintf("a transformer cannot %s; only continue and modify apply", a)
	case Guard:
		if a == abi.ActionBlock || a == abi.ActionAsk {
			return a, ""
		}
		return abi.ActionContinue, fmt.Sprintf("a guard cannot %s; only continue, block and ask apply", a)
	}
	return abi.ActionContinue, fmt.Sprintf("an observer cannot %s; observers cannot change anything", a)
}

func article(p Phase) string {
	if p == Observer {
		return "an observer"
	}
	return "a " + string(p)
}

// checkModify refuses a transformer's modify that the steps after it could
// not take, as the transformer's own failure (its fail policy, its breaker):
// a changed field whose value does not have the point's type for it
// (invalid_output), or a context grown past what a later binding's input
// limit leaves room for (output_too_large; a context that was already past
// it when the transformer got it is not the transformer's failure). next is the context
// after the modify; changed lists the fields it changed; size and before
// are the encoded sizes of next and st.Context, -1 when not known.
func (c *Chain) checkModify(s *snapshot, b *bound, st *RunState, next map[string]any, changed []string, size, before int) *abi.Failure {
	for _, f := range changed {
		if err := b.point.CheckField(f, next[f]); err != nil {
			return &abi.Failure{Code: abi.FailInvalidOutput, Message: "modify: " + err.Error()}
		}
	}
	// The step making the modify holds its place in the trace already.
	room, who, ok := roomAfter(s.points[st.Point][st.Next:], st, len(st.Trace))
	if !ok {
		return nil
	}
	if size < 0 {
		var err error
		if size, err = contextBytes(next); err != nil {
			return &abi.Failure{Code: abi.FailInvalidOutput, Message: "modify: " + err.Error()}
		}
	}
	if size <= room {
		return nil
	}
	// Traffic that came in too large for the later binding fails it
	// whatever the transformer does: only a modify that takes a context
	// that fitted past the bound is the transformer's failure.
	if before < 0 {
		var err error
		if before, err = contextBytes(st.Context); err != nil {
			before = -1
		}
	}
	if before > room {
		return nil
	}
	return &abi.Failure{Code: abi.FailOutputTooLarge, Message: fmt.Sprintf(
		"modify makes the context %d bytes; binding %s after it takes at most %d (its input limit less its invocation envelope)", size, who, room)}
}

// roomAfter returns the most context bytes every binding of later accepts
// (its input limit less its invocation envelope: the rest of the document
// for this tenant and an invocation id of this run), and the binding that
// sets it; ok is false when later is empty. index is the trace position of
// the first of later; the others come after it, each perhaps after an
// approval's resolution step too, so the count is made with the longest id
// they can have.
func roomAfter(later []*bound, st *RunState, index int) (room int, who string, ok bool) {
	if len(later) == 0 {
		return 0, "", false
	}
	// The id is st.Run + "." + the index: the dot and the digits need no
	// escaping.
	var digits [20]byte
	meta := quotedLen(st.Tenant) + quotedLen(st.Run) + 1 + len(strconv.AppendInt(digits[:0], int64(index+2*len(later)), 10))
	for i, lb := range later {
		r := lb.inputMax - lb.envelope - meta
		if i == 0 || r < room {
			room, who = r, lb.Name
		}
	}
	return room, who, true
}

// envelopeBytes is the size of a binding's invocation document without its
// context ({} counted as nothing), tenant and invocation id ("" each counted
// as nothing): what roomAfter subtracts from its input limit.
// The settings' Object, when there is one, stands for them.
func envelopeBytes(point, hook string, settings map[string]any, obj *abi.Object) int {
	inv := abi.Invocation{ABI: abi.Major, Point: point, Settings: settings, Meta: abi.Meta{Hook: hook}}
	var so abi.Object
	if obj != nil {
		inv.Settings, so = nil, *obj
	}
	doc, ok := inv.AppendObjects(nil, abi.Object{}, so)
	if !ok {
		var err error
		if doc, err = inv.Encode(); err != nil {
			return 0 // settings were normalised; they encode
		}
	}
	return len(doc) - len("{}") - 2*len(`""`)
}

// quotedLen is the length of s encoded as a JSON string.
func quotedLen(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b, _ := abi.AppendJSON(nil, s) // escapes: let the encoder count
			return len(b)
		}
	}
	return len(s) + 2
}

// sizeBuffers holds the buffers contextBytes encodes into.
var sizeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// contextBytes is the size of ctx encoded as an invocation carries it.
func contextBytes(ctx map[string]any) (int, error) {
	bp := sizeBuffers.Get().(*[]byte)
	b, ok := abi.AppendJSON((*bp)[:0], ctx)
	if !ok {
		sizeBuffers.Put(bp)
		m, err := abi.Marshal(ctx)
		return len(m), err
	}
	n := len(b)
	if cap(b) <= 256<<10 {
		*bp = b[:0]
		sizeBuffers.Put(bp)
	}
	return n, nil
}

// merge returns ctx with the fields of changes set, and the fields whose
// encoding changed, sorted (as abi.Object.Merge decides: a value that
// encodes as the one it replaces is no change; one that does not encode is
// one). ctx itself is not modified. The steps splice a modify into the
// context's Object (audit.Digests.ResetMerge); this is for a context that
// has none, and for an approver's edit.
func merge(ctx, changes map[string]any) (map[string]any, []string) {
	out := make(map[string]any, len(ctx)+len(changes))
	for k, v := range ctx {
		out[k] = v
	}
	var changed []string
	for k, v := range changes {
		if old, ok := ctx[k]; !ok || !sameEncoding(old, v) {
			changed = append(changed, k)
		}
		out[k] = v
	}
	sort.Strings(changed)
	return out, changed
}

// sameEncoding reports whether a and b encode to the same bytes.
func sameEncoding(a, b any) bool {
	ea, err := abi.Marshal(a)
	if err != nil {
		return false
	}
	eb, err := abi.Marshal(b)
	return err == nil && bytes.Equal(ea, eb)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// record appends the audit record of a step, stores its hash in the step,
// and returns what the record holds beyond the step (see Outcome.Records),
// for the step at index in the run's trace. before and after hold the
// digests of the context before and after the step (the same for a step
// that changed nothing); at is its time (the zero time: c.now()). r is the
// record to fill and append, reused by a run's steps.
func (c *Chain) record(ctx context.Context, r *audit.Record, at time.Time, config string, st *RunState, index int, step *Step, before, after *audit.Digests) (sealed, error) {
	if at.IsZero() {
		at = c.now()
	}
	*r = audit.Record{
		Time: at.UTC(), Run: st.Run, Tenant: st.Tenant, Point: st.Point, Config: config,
		Input: before.Digest(), Output: after.Digest(),
	}
	stepFields(r, step)
	if len(step.Changed) > 0 {
		r.Diff = make([]audit.Change, 0, len(step.Changed))
	}
	for _, f := range step.Changed {
		ch := audit.Change{Field: f}
		if v, d, ok := before.Field(f); ok {
			ch.Before = d
			if c.values {
				ch.BeforeValue = v
			}
		}
		if v, d, ok := after.Field(f); ok {
			ch.After = d
			if c.values {
				ch.AfterValue = v
			}
		}
		r.Diff = append(r.Diff, ch)
	}
	if err := c.appendRecord(ctx, r, st, step.Binding); err != nil {
		return sealed{}, err
	}
	step.Audit = r.Hash
	return sealed{step: index, seq: r.Seq, time: r.Time, input: r.Input, output: r.Output,
		diff: r.Diff, prev: r.Prev, hash: r.Hash, mac: r.MAC}, nil
}

// stepFields sets the fields an audit record shares with its step: the
// record of a step is made from it, here, when it is appended and again
// when Outcome.Records gives it back.
func stepFields(r *audit.Record, step *Step) {
	r.Binding, r.Phase, r.Module = step.Binding, string(step.Phase), step.Module
	r.Decision, r.By, r.Ignored = string(step.Applied), step.By, step.Ignored
	r.Approval, r.Resolution, r.Actor = step.Approval, step.Resolution, step.Actor
	r.LatencyUS, r.HostCalls, r.CreditCharged = step.LatencyUS, step.HostCalls, step.CreditCharged
	r.Wire = string(step.Wire)
	if len(r.HostCalls) == 0 {
		r.HostCalls = nil
	}
	r.HookAction, r.Reason = "", ""
	if step.Decision != nil {
		r.HookAction = string(step.Decision.Action)
		r.Reason = step.Decision.Reason
	}
	if step.Reason != "" {
		r.Reason = step.Reason
	}
	r.Failure = nil
	if step.Failure != nil {
		f := *step.Failure // the record keeps its own copy
		r.Failure = &f
		r.Reason = policyReason(step.Binding, step.Failure, step.FailPolicy)
	}
}

// appendRecord appends r to the chain's sink.
func (c *Chain) appendRecord(ctx context.Context, r *audit.Record, st *RunState, binding string) error {
	err := c.sink.Append(ctx, r)
	if err == nil {
		return nil // errors.As's target would escape: a step would allocate it
	}
	var ckpt *audit.CheckpointError
	if errors.As(err, &ckpt) {
		// The record is stored; only the checkpoint after it is not.
		// Treating it as lost would stop a run whose verdict the log
		// holds, or put back an approval whose resolution it holds.
		c.log.Error("chain: audit checkpoint not written; the record stands", "run", st.Run, "binding", binding, "error", err)
		err = nil
	}
	if err != nil {
		c.log.Error("chain: audit record not stored; the run stops without a verdict", "run", st.Run, "binding", binding, "error", err)
		return fmt.Errorf("%w: %w", ErrAudit, err)
	}
	return nil
}
