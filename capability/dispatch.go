package capability

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// The dispatch step: a capability returns follow-up work (Result.FollowUps)
// and, once the call is settled, the runner hands each piece to the
// platform's Dispatcher from a bounded queue served by a few workers, with
// bounded retries. The hook's call never waits for a delivery. See
// RATIONALE.md#why-is-follow-up-work-queued-and-not-sent-during-the-call.

// Defaults of DispatchOptions.
const (
	// DefaultDispatchQueue is how many follow-ups may wait for delivery
	// when DispatchOptions.QueueSize is zero.
	DefaultDispatchQueue = 1024
	// DefaultDispatchWorkers is how many follow-ups are delivered at once
	// when DispatchOptions.Workers is zero.
	DefaultDispatchWorkers = 4
	// DefaultDispatchAttempts is how many times a follow-up is offered to
	// the Dispatcher when DispatchOptions.MaxAttempts is zero.
	DefaultDispatchAttempts = 5
	// DefaultDispatchBackoff is the wait before the first retry when
	// DispatchOptions.Backoff is zero.
	DefaultDispatchBackoff = 100 * time.Millisecond
	// DefaultDispatchMaxBackoff caps the wait between two attempts when
	// DispatchOptions.MaxBackoff is zero.
	DefaultDispatchMaxBackoff = 5 * time.Second
	// DefaultDispatchAttemptTimeout bounds one attempt when
	// DispatchOptions.AttemptTimeout is zero.
	DefaultDispatchAttemptTimeout = 10 * time.Second
	// DefaultMaxFollowUps is how many follow-ups one call may return when
	// DispatchOptions.MaxPerCall is zero.
	DefaultMaxFollowUps = 16
)

// Errors of the dispatch step. A *DispatchError wraps ErrDispatchFailed and
// one of the others (or the Dispatcher's last error).
var (
	// ErrDispatchFailed means a follow-up was not delivered: it was
	// dropped before the queue, or every attempt failed.
	ErrDispatchFailed = errors.New("capability: follow-up not dispatched")

	// ErrDispatchQueueFull means the dispatch queue was full when the call
	// ended; the follow-up was dropped.
	ErrDispatchQueueFull = errors.New("capability: dispatch queue full")

	// ErrNoDispatcher means a capability returned follow-ups to a runner
	// without a Dispatcher; they were dropped.
	ErrNoDispatcher = errors.New("capability: no dispatcher")

	// ErrTooManyFollowUps means a call returned more follow-ups than
	// DispatchOptions.MaxPerCall; the excess was dropped.
	ErrTooManyFollowUps = errors.New("capability: too many follow-ups")

	// ErrInvalidFollowUp means a follow-up's Kind is not 1 to 128 bytes of
	// [a-z0-9_.-]; it was dropped.
	ErrInvalidFollowUp = errors.New("capability: invalid follow-up kind")

	// ErrRunnerClosed means the follow-up came after Runner.Close, or was
	// still waiting when Close gave up.
	ErrRunnerClosed = errors.New("capability: runner closed")

	// ErrDispatchPermanent marks a Dispatcher error that retrying cannot cure (the
	// follow-up is malformed for the platform): a Dispatcher returns an
	// error wrapping it and the runner reports the follow-up at once
	// instead of retrying.
	ErrDispatchPermanent = errors.New("capability: permanent dispatch failure")
)

// FollowUp is one piece of work a capability asks the platform to do after
// the call: a usage event, a notification, an asynchronous job. The runner
// does not interpret it; it delivers it to the Dispatcher with the call's
// identity. It is a plain value; the runner does not copy Data, so a
// capability must not modify Data after Execute returns.
type FollowUp struct {
	// Kind names the work so that the Dispatcher can route it, such as
	// "usage.event" or "notify.email": 1 to 128 bytes of [a-z0-9_.-], as a
	// capability name. A follow-up with a malformed Kind is dropped and
	// reported (ErrInvalidFollowUp).
	Kind string
	// Data is the work's content. It should be a JSON-encodable value
	// (the conformance kit checks it), so that a durable queue can store
	// it; the in-memory queue passes it as is.
	Data any
}

// Dispatch is one follow-up as the Dispatcher receives it: the work and who
// it is for. It is a plain value, the Dispatcher's to keep (FollowUp.Data
// is shared by every attempt and must be treated as read-only).
type Dispatch struct {
	// Caller is the identity of the hook whose call returned the work:
	// Tenant, Hook, Module, Invocation and Point. Granted, Requested and
	// HasManifest are left empty: they are the hook's permissions, not
	// its identity.
	Caller abi.Caller
	// Capability is the capability that returned the work.
	Capability string
	// Seq is the call's sequence number in its invocation.
	Seq int
	// IdempotencyKey is the call's key ("invocation/seq"), or "" when the
	// call had no invocation id. With Index it identifies the follow-up;
	// see Key.
	IdempotencyKey string
	// Index is the follow-up's position in Result.FollowUps, from 0.
	Index int
	// Attempt numbers the deliveries of this follow-up from 1. A
	// Dispatcher sees Attempt > 1 only after it failed the attempt before.
	Attempt int
	// FollowUp is the work.
	FollowUp FollowUp
}

// Key returns the follow-up's idempotency key, "invocation/seq/index",
// unique per tenant: delivery is at least once, so a Dispatcher (or what it
// feeds) deduplicates on (Caller.Tenant, Key). It is "" when the call had no
// invocation id, and such follow-ups cannot be deduplicated.
func (d Dispatch) Key() string {
	if d.IdempotencyKey == "" {
		return ""
	}
	return d.IdempotencyKey + "/" + strconv.Itoa(d.Index)
}

// Dispatcher delivers follow-up work to the platform. Dispatch is called on
// one of the runner's dispatch workers, never on the hook's call, with a
// context bounded by DispatchOptions.AttemptTimeout that is cancelled when
// Runner.Close gives up. It returns nil once the work is accepted (queued,
// stored, sent); an error makes the runner retry later, unless it wraps
// ErrDispatchPermanent. A panic is recovered and reported, and not retried.
//
// Delivery is at least once: the same Dispatch (same Tenant and Key) may
// arrive more than once, for example after an attempt that timed out but had
// succeeded. Implementations must be safe for concurrent use by multiple
// goroutines.
type Dispatcher interface {
	Dispatch(ctx context.Context, d Dispatch) error
}

// DispatcherFunc adapts a function to a Dispatcher.
type DispatcherFunc func(ctx context.Context, d Dispatch) error

// Dispatch implements Dispatcher.
func (f DispatcherFunc) Dispatch(ctx context.Context, d Dispatch) error { return f(ctx, d) }

// DispatchOptions configures the dispatch step. It is a plain value that
// NewRunner copies; OnFailure must be safe for concurrent use. The zero
// value gives the defaults: a queue of 1024 follow-ups served by 4 workers, 5 attempts per
// follow-up with a backoff from 100 ms doubling to at most 5 s (each wait
// drawn between half and all of it), 10 s per attempt, at most 16
// follow-ups per call.
type DispatchOptions struct {
	// QueueSize is how many follow-ups may wait for a worker. When the
	// queue is full a new follow-up is dropped (never the call's reply
	// delayed) and reported with ErrDispatchQueueFull. Zero means
	// DefaultDispatchQueue (1024).
	QueueSize int

	// Workers is how many follow-ups are delivered at once. Zero means
	// DefaultDispatchWorkers (4).
	Workers int

	// MaxAttempts is how many times a follow-up is offered to the
	// Dispatcher before it is reported as failed. Zero means
	// DefaultDispatchAttempts (5).
	MaxAttempts int

	// Backoff is the wait before the first retry; each later wait doubles
	// it, up to MaxBackoff. Each wait is drawn uniformly between half and
	// all of its nominal value, so that retries of many follow-ups do not
	// arrive together. Zero means DefaultDispatchBackoff (100 ms).
	Backoff time.Duration

	// MaxBackoff caps the wait between two attempts. Zero means
	// DefaultDispatchMaxBackoff (5 s).
	MaxBackoff time.Duration

	// AttemptTimeout bounds one call of Dispatcher.Dispatch through its
	// context. Zero means DefaultDispatchAttemptTimeout (10 s).
	AttemptTimeout time.Duration

	// MaxPerCall is how many follow-ups one call may return; the excess is
	// dropped and reported with ErrTooManyFollowUps, in one DispatchError
	// (see DispatchError.Count). Zero means
	// DefaultMaxFollowUps (16).
	MaxPerCall int

	// OnFailure, if set, is told of every follow-up that was not
	// delivered (those past MaxPerCall together, in one error):
	// dropped before the queue (on the call's goroutine) or
	// failed after its attempts (on a worker). It must be quick and safe
	// for concurrent use; a panic in it is recovered and logged. Use it to
	// keep a dead-letter record.
	OnFailure func(*DispatchError)
}

// DispatchError reports a follow-up that was not delivered. It wraps
// ErrDispatchFailed and Err. It is not modified after it is reported.
type DispatchError struct {
	// Dispatch is the follow-up, as last offered (Attempt is 0 when it
	// was never offered).
	Dispatch Dispatch
	// Attempts is how many times the Dispatcher was called.
	Attempts int
	// Count is how many follow-ups the error stands for: 1, except for
	// ErrTooManyFollowUps, reported once per call for every follow-up
	// past MaxPerCall (Dispatch is the first of them, at Index
	// MaxPerCall), so that reporting them costs no more than MaxPerCall.
	Count int
	// Err is why: ErrDispatchQueueFull, ErrNoDispatcher,
	// ErrTooManyFollowUps, ErrInvalidFollowUp, ErrRunnerClosed, or the
	// Dispatcher's last error.
	Err error
	// Panic is the recovered value when the Dispatcher panicked, else nil.
	Panic any
	// Stack is the goroutine stack at the panic, else nil.
	Stack []byte
}

// Error implements error.
func (e *DispatchError) Error() string {
	d := &e.Dispatch
	what := fmt.Sprintf("follow-up %s #%d", d.FollowUp.Kind, d.Index)
	if e.Count > 1 {
		what = fmt.Sprintf("%d follow-ups from #%d", e.Count, d.Index)
	}
	return fmt.Sprintf("capability: %s of %s (tenant %q, key %q) not dispatched after %d attempts: %v",
		what, d.Capability, d.Caller.Tenant, d.Key(), e.Attempts, e.Err)
}

// Unwrap returns ErrDispatchFailed and Err.
func (e *DispatchError) Unwrap() []error { return []error{ErrDispatchFailed, e.Err} }

// DispatchStats counts the runner's follow-ups since NewRunner. It is a
// plain value, a snapshot whose counters are read one by one. Every
// follow-up a settled call returned ends up in exactly one of Delivered,
// Failed and Dropped, or is still Pending.
type DispatchStats struct {
	// Queued is how many follow-ups entered the queue.
	Queued uint64
	// Delivered is how many the Dispatcher accepted.
	Delivered uint64
	// Retried is how many attempts failed and were tried again.
	Retried uint64
	// Failed is how many left the queue undelivered: attempts exhausted,
	// a permanent error, a panic, or Close giving up.
	Failed uint64
	// Dropped is how many never entered the queue: full, closed, no
	// dispatcher, over MaxPerCall or a malformed Kind.
	Dropped uint64
	// Pending is how many are queued or being delivered now.
	Pending int64
}

// dispatchQueue is the runner's dispatch step. Its counters are atomics;
// mu guards closed and the queue's closing.
type dispatchQueue struct {
	d           Dispatcher // nil: every follow-up is dropped
	opts        DispatchOptions
	log         *slog.Logger
	queue       chan Dispatch // nil without a Dispatcher
	stop        context.Context
	abort       context.CancelFunc // cancels stop: Close gave up
	start       sync.Once          // starts the workers at the first follow-up
	workers     sync.WaitGroup
	workersDone chan struct{} // closed when every worker has returned

	mu     sync.RWMutex // guards closed; held for reading around every send on queue
	closed bool

	queued, delivered, retried, failed, dropped atomic.Uint64
	pending                                     atomic.Int64
}

func newDispatchQueue(d Dispatcher, o DispatchOptions, log *slog.Logger) (*dispatchQueue, error) {
	if o.QueueSize < 0 || o.Workers < 0 || o.MaxAttempts < 0 || o.Backoff < 0 ||
		o.MaxBackoff < 0 || o.AttemptTimeout < 0 || o.MaxPerCall < 0 {
		return nil, errors.New("capability: NewRunner: negative dispatch option")
	}
	// Zero means the default (negatives were refused above).
	o.QueueSize = cmp.Or(o.QueueSize, DefaultDispatchQueue)
	o.Workers = cmp.Or(o.Workers, DefaultDispatchWorkers)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, DefaultDispatchAttempts)
	o.MaxPerCall = cmp.Or(o.MaxPerCall, DefaultMaxFollowUps)
	o.Backoff = cmp.Or(o.Backoff, DefaultDispatchBackoff)
	o.MaxBackoff = cmp.Or(o.MaxBackoff, DefaultDispatchMaxBackoff)
	o.AttemptTimeout = cmp.Or(o.AttemptTimeout, DefaultDispatchAttemptTimeout)
	q := &dispatchQueue{d: d, opts: o, log: log, workersDone: make(chan struct{})}
	q.stop, q.abort = context.WithCancel(context.Background())
	if d != nil {
		q.queue = make(chan Dispatch, o.QueueSize)
	}
	return q, nil
}

// enqueue queues the follow-ups of a settled call and returns how many it
// dropped. It never blocks on the Dispatcher. Each drop goes to OnFailure;
// the operator's log gets one line per call, whatever the number of drops,
// so that a capability returning thousands cannot flood it.
func (q *dispatchQueue) enqueue(ctx context.Context, c *callRun, fus []FollowUp) (dropped int) {
	caller := c.call.Caller
	base := Dispatch{
		Caller: abi.Caller{Tenant: caller.Tenant, Hook: caller.Hook, Module: caller.Module,
			Invocation: caller.Invocation, Point: caller.Point},
		Capability: c.name,
		Seq:        c.call.Seq,
	}
	if caller.Invocation != "" {
		base.IdempotencyKey = c.call.IdempotencyKey()
	}
	drops := q.put(base, fus)
	if len(drops) == 0 {
		return 0
	}
	n := 0
	for _, e := range drops {
		n += e.Count
	}
	q.dropped.Add(uint64(n))
	defer func() {
		// Only the operator's log handler can panic here (OnFailure's
		// panics are contained by notify); the reply must stand.
		if recover() != nil {
			dropped = n
		}
	}()
	if q.log.Enabled(ctx, slog.LevelWarn) {
		counts := map[string]int{}
		for _, e := range drops {
			counts[e.Err.Error()] += e.Count
		}
		q.log.WarnContext(ctx, "capability: follow-ups dropped",
			slog.String("capability", c.name),
			slog.String("tenant", caller.Tenant),
			slog.String("hook", caller.Hook),
			slog.String("invocation", caller.Invocation),
			slog.Int("seq", c.call.Seq),
			slog.Int("returned", len(fus)),
			slog.Int("dropped", n),
			slog.Any("reasons", counts))
	}
	for _, e := range drops {
		q.notify(ctx, e)
	}
	return n
}

// put queues what it can of fus, without blocking, and returns the rest:
// one error per follow-up within MaxPerCall, and one for all those past it,
// so that the work and memory stay bounded by MaxPerCall.
func (q *dispatchQueue) put(base Dispatch, fus []FollowUp) (drops []*DispatchError) {
	if len(fus) > q.opts.MaxPerCall {
		d := base
		d.Index = q.opts.MaxPerCall
		d.FollowUp = fus[d.Index]
		drops = append(drops, &DispatchError{Dispatch: d, Err: ErrTooManyFollowUps, Count: len(fus) - q.opts.MaxPerCall})
		fus = fus[:q.opts.MaxPerCall]
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	for i, f := range fus {
		d := base
		d.Index = i
		d.FollowUp = f
		var why error
		switch {
		case !ValidName(f.Kind):
			why = ErrInvalidFollowUp
		case q.d == nil:
			why = ErrNoDispatcher
		case q.closed:
			why = ErrRunnerClosed
		}
		if why == nil {
			q.start.Do(q.startWorkers) // under mu: never after Close
			q.pending.Add(1)
			select {
			case q.queue <- d:
				q.queued.Add(1)
				continue
			default:
				q.pending.Add(-1)
				why = ErrDispatchQueueFull
			}
		}
		drops = append(drops, &DispatchError{Dispatch: d, Err: why, Count: 1})
	}
	return drops
}

func (q *dispatchQueue) startWorkers() {
	for range q.opts.Workers {
		q.workers.Go(q.work)
	}
	go func() {
		q.workers.Wait()
		close(q.workersDone)
	}()
}

// work delivers follow-ups until the queue is closed and empty.
func (q *dispatchQueue) work() {
	for d := range q.queue {
		q.deliver(d)
		q.pending.Add(-1)
	}
}

// deliver offers d to the Dispatcher until it accepts, MaxAttempts is
// reached, the error is permanent or the Dispatcher panics, or Close gives
// up; every outcome but acceptance is reported.
func (q *dispatchQueue) deliver(d Dispatch) {
	var last error
	for attempt := 1; ; attempt++ {
		if q.stop.Err() != nil {
			q.fail(&DispatchError{Dispatch: d, Count: 1, Attempts: attempt - 1, Err: errors.Join(ErrRunnerClosed, last)})
			return
		}
		d.Attempt = attempt
		p, stack, err := q.attempt(d)
		switch {
		case err == nil:
			q.delivered.Add(1)
			return
		case p != nil:
			q.fail(&DispatchError{Dispatch: d, Count: 1, Attempts: attempt, Err: err, Panic: p, Stack: stack})
			return
		case errors.Is(err, ErrDispatchPermanent), attempt >= q.opts.MaxAttempts:
			q.fail(&DispatchError{Dispatch: d, Count: 1, Attempts: attempt, Err: err})
			return
		}
		last = err
		q.retried.Add(1)
		t := time.NewTimer(q.backoff(attempt))
		select {
		case <-t.C:
		case <-q.stop.Done():
			t.Stop()
		}
	}
}

// attempt makes one call of the Dispatcher, recovering a panic.
func (q *dispatchQueue) attempt(d Dispatch) (p any, stack []byte, err error) {
	ctx, cancel := context.WithTimeout(q.stop, q.opts.AttemptTimeout)
	defer cancel()
	defer func() {
		if p = recover(); p != nil {
			stack = debug.Stack()
			err = fmt.Errorf("dispatcher panic: %v", p)
		}
	}()
	return nil, nil, q.d.Dispatch(ctx, d)
}

// backoff returns the wait after the given failed attempt: Backoff doubled
// attempt-1 times, capped at MaxBackoff, drawn in [half, all] of it.
func (q *dispatchQueue) backoff(attempt int) time.Duration {
	w := q.opts.Backoff
	for i := 1; i < attempt && w < q.opts.MaxBackoff; i++ {
		w *= 2
	}
	w = min(w, q.opts.MaxBackoff)
	half := w / 2
	return half + rand.N(w-half+1)
}

// fail reports a follow-up that left the queue undelivered: a log line and
// OnFailure.
func (q *dispatchQueue) fail(e *DispatchError) {
	q.failed.Add(1)
	ctx := context.Background()
	if q.log.Enabled(ctx, slog.LevelError) {
		d := &e.Dispatch
		attrs := []any{
			slog.String("capability", d.Capability),
			slog.String("tenant", d.Caller.Tenant),
			slog.String("hook", d.Caller.Hook),
			slog.String("invocation", d.Caller.Invocation),
			slog.Int("seq", d.Seq),
			slog.String("kind", d.FollowUp.Kind),
			slog.String("key", d.Key()),
			slog.Int("attempts", e.Attempts),
			slog.Any("err", e.Err),
		}
		if e.Panic != nil {
			attrs = append(attrs, slog.String("stack", string(e.Stack)))
		}
		q.log.Log(ctx, slog.LevelError, "capability: follow-up not delivered", attrs...)
	}
	q.notify(ctx, e)
}

// notify tells OnFailure, containing its panic.
func (q *dispatchQueue) notify(ctx context.Context, e *DispatchError) {
	if q.opts.OnFailure == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			q.log.ErrorContext(ctx, "capability: OnFailure panicked", slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
	}()
	q.opts.OnFailure(e)
}

// close stops accepting follow-ups and waits for the queue to drain, or
// for ctx; then it aborts the deliveries left.
func (q *dispatchQueue) close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		if q.queue != nil {
			close(q.queue)
		}
		q.start.Do(func() { close(q.workersDone) }) // no worker ever started
	}
	q.mu.Unlock()
	select {
	case <-q.workersDone:
		q.abort()
		return nil
	case <-ctx.Done():
		q.abort()
		return fmt.Errorf("%w: %d follow-ups left undelivered: %w", ErrRunnerClosed, q.pending.Load(), ctx.Err())
	}
}

func (q *dispatchQueue) stats() DispatchStats {
	return DispatchStats{
		Queued:    q.queued.Load(),
		Delivered: q.delivered.Load(),
		Retried:   q.retried.Load(),
		Failed:    q.failed.Load(),
		Dropped:   q.dropped.Load(),
		Pending:   q.pending.Load(),
	}
}

// Close stops the dispatch step: follow-ups of calls answered after Close
// are dropped and reported (ErrRunnerClosed), and Close waits until the
// queued ones are delivered or have failed. If ctx is done first, it cancels
// the deliveries in progress and returns an error wrapping ErrRunnerClosed
// and ctx's error; the workers then report every follow-up left as failed
// (ErrRunnerClosed), without waiting for a Dispatcher that ignores its
// context. Host calls are still answered after Close. Close is safe to call
// more than once.
func (r *Runner) Close(ctx context.Context) error {
	return r.dispatch.close(ctx)
}

// DispatchStats returns the runner's follow-up counters.
func (r *Runner) DispatchStats() DispatchStats {
	return r.dispatch.stats()
}
