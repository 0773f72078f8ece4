package chain

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Sentinel errors.
var (
	// ErrClosed is returned by a Chain that was closed.
	ErrClosed = errors.New("chain: closed")
	// ErrInvalidInput wraps problems with an Input (not with a hook).
	ErrInvalidInput = errors.New("chain: invalid input")
	// ErrUnknownApproval is returned for an approval id that is not
	// pending (never created, already resolved, or expired and applied).
	ErrUnknownApproval = errors.New("chain: no such pending approval")
	// ErrInvalidResolution wraps problems with a Resolution; the approval
	// stays pending.
	ErrInvalidResolution = errors.New("chain: invalid resolution")
	// ErrAudit wraps a failure to store an audit record. The run stops
	// without a verdict: a verdict that cannot be audited is not given.
	ErrAudit = errors.New("chain: audit record not stored")
)

// MinApprovalKeyBytes is the shortest Options.ApprovalKey accepted: 32
// bytes, the size of the HMAC-SHA256 it keys.
const MinApprovalKeyBytes = 32

// Engine is what a Chain asks of the runtime: load modules, check limits
// against the runtime's ceilings and defaults, prepare each binding's
// module, point and limits once, and run an invocation. *runtime.Runtime
// implements it; tests give a fake whose InvokePrepared produces failures the
// runtime does not (yet) produce. The Chain never closes it.
type Engine interface {
	// Load compiles and validates a module (runtime.Runtime.Load).
	Load(ctx context.Context, wasm []byte) (*runtime.Module, error)
	// EffectiveLimits checks a binding's limits and fills in the
	// defaults (runtime.Runtime.EffectiveLimits).
	EffectiveLimits(l runtime.Limits) (runtime.Limits, error)
	// Prepare checks a binding's module, point and limits together
	// (runtime.Runtime.Prepare), when the configuration is built: its
	// invocations are not checked again.
	Prepare(m *runtime.Module, point string, points *abi.PointRegistry, l runtime.Limits) (*runtime.Prepared, error)
	// InvokePrepared runs one invocation, writing its report into res
	// (runtime.Runtime.InvokePrepared: a *abi.Failure error comes with
	// the report in res; any other error with no usable report). The
	// chain sends the traffic as req.ContextObject and the settings as
	// req.SettingsObject (Context and Settings nil), and leaves the point
	// and limits to p; the context's bytes are reused once the call
	// returns, so an Engine that keeps them past it copies them.
	InvokePrepared(ctx context.Context, p *runtime.Prepared, req runtime.Request, res *runtime.Result) error
}

var _ Engine = (*runtime.Runtime)(nil)

// Options configures a Chain. Runtime is required; every other zero value
// works.
type Options struct {
	// Runtime loads and runs the hooks: a *runtime.Runtime (or a fake
	// Engine in tests). Required. The Chain does not close it.
	Runtime Engine
	// HostCaller serves the hooks' host calls (a *capability.Runner,
	// typically), shared by every binding; each binding's Grants and
	// Limits travel with its requests. Nil answers every host call
	// UNKNOWN_CAPABILITY.
	HostCaller runtime.HostCaller
	// Audit receives one record per verdict: an audit.Log over any
	// audit.Store (audit.FileSink, a database's), audit.TenantLogs for a
	// chain per tenant. Nil means a new audit.MemorySink (which grows
	// without bound: for tests and the CLI).
	Audit audit.Sink
	// AuditValues puts the before and after values of modified fields in
	// audit records. False records only their digests, so the audit log
	// never keeps what a redaction removed.
	AuditValues bool
	// Approvals keeps pending approvals. Nil means a new MemoryApprovals.
	Approvals ApprovalStore
	// ApprovalKey seals every approval the chain stores (HMAC-SHA256);
	// an approval whose seal does not verify under it is refused on
	// resume. At least 32 bytes, held by the platform and never by the
	// approval store: whoever holds it can forge approvals. Nil means a
	// random key for this Chain, so its approvals can be resumed only by
	// it; a store shared with another process (a restart, the CLI) needs
	// the same key on both sides.
	ApprovalKey []byte
	// TracerProvider makes the chain's OpenTelemetry spans. Nil means
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Logger receives structured logs, hook output among them. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock (breakers, approvals, audit times). Nil means
	// time.Now.
	Now func() time.Time
	// Points registers the platform's own hook points beside the built-in
	// ones (abi.NewPointRegistry checks them: names starting with "x.",
	// at most abi.MaxRegisteredPoints). Bindings, runs and field checks
	// use them as they use the built-in points.
	Points []abi.Point
}

// Chain runs the bindings of a configuration over agent traffic. Its
// configuration can be swapped with Reload while runs are in flight. It is
// safe for concurrent use by multiple goroutines.
type Chain struct {
	engine Engine
	// caller serves the hooks' host calls: Options.HostCaller with a span
	// per call. The runtime reports the calls themselves (Result.Calls).
	caller    *tracedCaller
	sink      audit.Sink
	values    bool
	approvals ApprovalStore
	// approvalKey seals approvals (Options.ApprovalKey).
	approvalKey []byte
	tracer      trace.Tracer
	log         *slog.Logger
	now         func() time.Time
	// wallClock is true when now is time.Now (Options.Now unset): a
	// step's end is then the run's start moved by the monotonic time to
	// the hook's return (perRun.endOf), with no clock read of its own.
	wallClock bool
	// tracing is false when tracer is OpenTelemetry's no-op one: spans
	// are then not started at all (noSpan stands for them), which spares
	// a context and the attributes per step.
	tracing  bool
	breakers breakers
	// points resolves point names: the built-in points and Options.Points.
	points *abi.PointRegistry

	cur      atomic.Pointer[snapshot] // the configuration in force; nil once closed
	reloadMu sync.Mutex               // serialises Reload and Close; guards version, closed
	version  uint64
	closed   bool
}

// New builds a Chain with the configuration cfg. It returns a *ConfigError
// if cfg is refused.
func New(ctx context.Context, cfg Config, opts Options) (*Chain, error) {
	if opts.Runtime == nil {
		return nil, errors.New("chain: Options.Runtime is required")
	}
	c := &Chain{
		engine: opts.Runtime, sink: opts.Audit, values: opts.AuditValues,
		approvals: opts.Approvals, log: opts.Logger, now: opts.Now,
	}
	if len(opts.Points) > 0 {
		reg, err := abi.NewPointRegistry(opts.Points...)
		if err != nil {
			return nil, fmt.Errorf("chain: Options.Points: %w", err)
		}
		c.points = reg
	}
	switch {
	case opts.ApprovalKey == nil:
		c.approvalKey = make([]byte, 32)
		if _, err := rand.Read(c.approvalKey); err != nil {
			return nil, fmt.Errorf("chain: making an approval key: %w", err)
		}
	case len(opts.ApprovalKey) < MinApprovalKeyBytes:
		return nil, fmt.Errorf("chain: Options.ApprovalKey has %d bytes, want at least %d", len(opts.ApprovalKey), MinApprovalKeyBytes)
	default:
		c.approvalKey = append([]byte(nil), opts.ApprovalKey...)
	}
	if c.sink == nil {
		c.sink = audit.NewMemorySink()
	}
	if c.approvals == nil {
		c.approvals = NewMemoryApprovals()
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	c.tracer = tp.Tracer("github.com/wasmhooks/wasmhooks/chain")
	_, noTracing := c.tracer.(noop.Tracer)
	c.tracing = !noTracing
	c.caller = &tracedCaller{next: opts.HostCaller, tracer: c.tracer}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now, c.wallClock = time.Now, true
	}
	if err := c.Reload(ctx, cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload builds a new configuration from cfg (loading its modules and
// compiling its settings schemas) and swaps it in atomically. Runs in flight
// finish on the configuration they started with; modules no longer bound are
// closed when the last of those runs ends. If cfg is refused, Reload returns a
// *ConfigError saying why and the configuration in force stays.
func (c *Chain) Reload(ctx context.Context, cfg Config) error {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	if c.closed {
		return ErrClosed
	}
	s, err := c.build(ctx, cfg)
	if err != nil {
		c.log.Warn("chain: configuration refused; the one in force stays", "error", err)
		return err
	}
	c.version++
	s.version = c.version
	live := map[string]bool{}
	for _, b := range s.byName {
		live[b.key] = true
	}
	c.breakers.keep(live)
	old := c.cur.Swap(s)
	c.log.Info("chain: configuration in force", "version", s.version, "config", s.digest, "bindings", len(s.byName))
	if old != nil {
		old.release(ctx)
	}
	return nil
}

// Close stops the chain: later calls return ErrClosed. Runs in flight finish;
// the modules are closed when the last one ends. Close does not close the
// Runtime, the audit sink or the approval store.
func (c *Chain) Close(ctx context.Context) error {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if old := c.cur.Swap(nil); old != nil {
		old.release(ctx)
	}
	return nil
}

// acquire returns the configuration in force with a reference held, or nil
// once the chain is closed.
func (c *Chain) acquire() *snapshot {
	for {
		s := c.cur.Load()
		if s == nil {
			return nil
		}
		if s.tryAcquire() {
			return s
		}
		// s was swapped out and released between Load and tryAcquire;
		// the next Load sees its successor.
	}
}

// BindingInfo describes a binding as configured, for inspection.
type BindingInfo struct {
	Name     string     `json:"name"`
	Module   string     `json:"module"`
	Digest   string     `json:"digest"`
	Point    string     `json:"point"`
	Phase    Phase      `json:"phase"`
	Priority int        `json:"priority"`
	Fail     FailPolicy `json:"fail"`
}

// ConfigInfo describes the configuration in force.
type ConfigInfo struct {
	// Version counts the configurations this Chain has had, from 1.
	Version uint64 `json:"version"`
	// Digest identifies the configuration's content.
	Digest string `json:"digest"`
	// Points maps each point that has bindings to them, in run order.
	Points map[string][]BindingInfo `json:"points"`
}

// Info describes the configuration in force; ok is false once closed.
func (c *Chain) Info() (info ConfigInfo, ok bool) {
	s := c.acquire()
	if s == nil {
		return ConfigInfo{}, false
	}
	defer s.release(context.Background())
	info = ConfigInfo{Version: s.version, Digest: s.digest, Points: map[string][]BindingInfo{}}
	for p, list := range s.points {
		for _, b := range list {
			info.Points[p] = append(info.Points[p], BindingInfo{
				Name: b.Name, Module: b.Module, Digest: b.digest, Point: b.Point, Phase: b.Phase, Priority: b.Priority, Fail: b.fail,
			})
		}
	}
	return info, true
}

// Input is the traffic a chain run sees.
type Input struct {
	// Tenant owns the traffic. Required.
	Tenant string
	// Point is the hook point. Required.
	Point string
	// Context is the traffic at the point (ABI.md documents each point's
	// fields). Nil means {}. It is not modified. Its strings and keys must be
	// UTF-8 (strings.ToValidUTF8 makes them so): Run refuses one that is
	// not, as the platform's JSON does, since its hooks would read U+FFFD
	// where the bytes it hands back are.
	Context map[string]any
	// Run identifies the run in the trace, logs and audit. Empty means a
	// random id.
	Run string
}

// Verdict is the outcome of a chain run.
type Verdict string

// Verdicts.
const (
	// Allow lets the traffic through, with Outcome.Context (changed when
	// Outcome.Modified).
	Allow Verdict = "allow"
	// Block stops the traffic.
	Block Verdict = "block"
	// Pending holds the traffic until Outcome.Approval is resolved.
	Pending Verdict = "pending"
)

// Who decided what a step applied.
const (
	ByHook       = "hook"
	ByFailPolicy = "fail_policy"
	ByApproval   = "approval"
	// ByShortCircuit: the binding did not run, because a guard before it
	// ended the run with a short_circuit (ABI 1.2).
	ByShortCircuit = "short_circuit"
)

// noSpan is the span of a chain that does not trace (Chain.tracing): it
// records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// Outcome is the result of a chain run (or of resuming one).
type Outcome struct {
	// Run identifies the run.
	Run    string `json:"run"`
	Tenant string `json:"tenant"`
	Point  string `json:"point"`
	// Config is the digest of the configuration the run ended on.
	Config string `json:"config"`
	// Verdict is allow, block or pending.
	Verdict Verdict `json:"verdict"`
	// Modified reports whether Context differs from the input.
	Modified bool `json:"modified"`
	// Binding names the binding that blocked or asked.
	Binding string `json:"binding,omitempty"`
	// By says who blocked or asked: "hook", "fail_policy", "approval", or
	// "config" (a ToolApproval's ask).
	By string `json:"by,omitempty"`
	// Reason is for the agent: why the traffic was blocked or held.
	Reason string `json:"reason,omitempty"`
	// UserMessage is for the end user.
	UserMessage string `json:"user_message,omitempty"`
	// DoNotReplyAgain asks the platform to stop automatic replies in the
	// conversation; set if any applied decision asked for it.
	DoNotReplyAgain bool `json:"do_not_reply_again,omitempty"`
	// Failure is the hook failure a fail-closed policy blocked on.
	Failure *abi.Failure `json:"failure,omitempty"`
	// Context is the traffic after the run: as the transformers left it,
	// or as it was when a guard blocked or asked.
	Context map[string]any `json:"context"`
	// Approval is the pending approval when Verdict is pending.
	Approval *Approval `json:"approval,omitempty"`
	// Notifications lists the notifies the run applied, in run order
	// (resumed runs included): the traffic went on, and each asks the
	// platform to tell a human. Whatever the verdict, they happened.
	Notifications []Notification `json:"notifications,omitempty"`
	// ShortCircuit names the guard whose short_circuit ended the run with
	// allow; the bindings after it are in Trace as skipped
	// (By ByShortCircuit).
	ShortCircuit string `json:"short_circuit,omitempty"`
	// Trace lists every step of the run, resumed runs included.
	Trace []Step `json:"trace"`
	// sealed holds, for each audit record this call appended, in order,
	// what the record holds beyond its step in Trace (Records). The JSON
	// form has the records as "audit" (MarshalJSON).
	sealed []sealed
}

// sealed is what an audit record holds beyond the fields it shares with its
// step (stepFields) and with its Outcome (run, tenant, point, and config:
// every record of one call is made under the configuration the Outcome
// names).
type sealed struct {
	step          int // its step's index in Outcome.Trace
	seq           uint64
	time          time.Time
	input, output string
	diff          []audit.Change
	prev, hash    string
	mac           string
}

// Records returns the audit records this call appended, in the order they
// were appended, as the sink stored them (field for field, so each has the
// stored hash). The Outcome keeps each fact once: a record's binding,
// decision, reason, host calls, latency and the other fields it shares with
// its step come from that step in Trace, and the rest (sequence number,
// time, digests, diff, links) is kept apart. A caller that
// changes Trace changes what Records returns. It is never nil.
func (o *Outcome) Records() []audit.Record {
	out := make([]audit.Record, len(o.sealed))
	for i, s := range o.sealed {
		r := &out[i]
		*r = audit.Record{
			Seq: s.seq, Time: s.time, Run: o.Run, Tenant: o.Tenant, Point: o.Point, Config: o.Config,
			Input: s.input, Output: s.output, Diff: s.diff, Prev: s.prev, Hash: s.hash, MAC: s.mac,
		}
		if s.step >= 0 && s.step < len(o.Trace) {
			stepFields(r, &o.Trace[s.step])
		}
	}
	return out
}

// MarshalJSON encodes o with its Records as "audit", after "trace".
func (o Outcome) MarshalJSON() ([]byte, error) {
	type plain Outcome // no MarshalJSON: the fields as they are
	return json.Marshal(struct {
		plain
		Audit []audit.Record `json:"audit"`
	}{plain(o), o.Records()})
}

// Step is one binding's part in a run (or one approval's resolution).
type Step struct {
	Binding  string `json:"binding"`
	Module   string `json:"module"`
	Phase    Phase  `json:"phase"`
	Priority int    `json:"priority"`
	// Invocation is the invocation id the hook ran with.
	Invocation string `json:"invocation,omitempty"`
	// Decision is the hook's own decision; nil when it failed, was
	// skipped, or the step is a resolution.
	Decision *abi.Decision `json:"decision"`
	// Wire is the wire shape Decision came in, when not the canonical
	// one: "top-level", "outcome", "legacy" (a legacy {"abort": ...}) or
	// "guardrail" (seed 002's words); see abi.Shape.
	Wire abi.Shape `json:"wire,omitempty"`
	// Failure says why the hook reached no decision.
	Failure *abi.Failure `json:"failure,omitempty"`
	// FailPolicy is the policy that decided after a failure.
	FailPolicy FailPolicy `json:"fail_policy,omitempty"`
	// Breaker is the breaker's state when it was not closed: "open" (the
	// hook was skipped) or "half_open" (this run was the trial). After
	// the run, BreakerNow says where it moved.
	Breaker    string `json:"breaker,omitempty"`
	BreakerNow string `json:"breaker_now,omitempty"`
	// Applied is what the step did to the traffic: continue, modify, block,
	// ask or notify (a continue that tells a human).
	Applied abi.Action `json:"applied"`
	// By says who decided it: hook, fail_policy or approval.
	By string `json:"by"`
	// Ignored says what part of the hook's decision its phase does not
	// allow, or why an ask did not pause.
	Ignored string `json:"ignored,omitempty"`
	// Changed lists the fields a modify changed.
	Changed []string `json:"changed,omitempty"`
	// Approval is the approval an ask created or a resolution resolved.
	Approval string `json:"approval,omitempty"`
	// Resolution is approved, denied, edited or expired, for a resolution;
	// Actor and Reason are who resolved it and their note. For a
	// ToolApproval's ask (By "config"), Reason is the rule's reason; for a
	// binding a short_circuit skipped, which guard skipped it.
	Resolution string `json:"resolution,omitempty"`
	Actor      string `json:"actor,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// HostCalls lists the hook's host calls.
	HostCalls []audit.HostCall `json:"host_calls"`
	// CreditCharged is the credit they were charged.
	CreditCharged int64 `json:"credit_charged"`
	// FuelUsed is the fuel the hook used (runtime.Result.FuelUsed); 0
	// when it did not run.
	FuelUsed uint64 `json:"fuel_used,omitempty"`
	// LatencyUS is how long the hook took, in microseconds: its
	// invocation, from when the runtime took the request to when the guest
	// returned, host calls included (runtime.Result.Duration); 0 when no
	// hook ran (an open breaker, a request the runtime refused, a
	// ToolApproval, a short circuit). For an approval's resolution: how
	// long resolving it took.
	LatencyUS int64 `json:"latency_us"`
	// Logs holds what the hook wrote to stdout and stderr, never
	// interpreted.
	Logs []runtime.LogLine `json:"logs,omitempty"`
	// LogBytesDropped counts output over the hook's log limit.
	LogBytesDropped int `json:"log_bytes_dropped,omitempty"`
	// Audit is the hash of the step's audit record.
	Audit string `json:"audit"`
	// Shadow is what an audit-mode binding (Binding.Mode) would have
	// applied; nil for an active binding. Applied is then continue.
	Shadow *Shadow `json:"shadow,omitempty"`
}

// Shadow is the would-be result of an audit-mode binding's step.
type Shadow struct {
	// Applied is what the step would have applied: continue, modify,
	// block (by the hook or its fail policy) or ask.
	Applied abi.Action `json:"applied"`
	// Changed lists the fields a would-be modify changes, and Context is
	// the context it would have left.
	Changed []string       `json:"changed,omitempty"`
	Context map[string]any `json:"context,omitempty"`
}

// lostUTF8 refuses a context holding a string (or a key) that is not
// UTF-8: its hooks would read U+FFFD where the bytes are, and the caller,
// given the context back unchanged, would pass on the bytes they did not
// see (a guard looking for "forbidden" passes "forb\xffidden", which a reader
// that drops the byte reads as forbidden). The platform server and the MCP
// server read strict JSON, which refuses such strings already; this is the
// Go API's door. It looks at the context's encoding, which marks each lost
// byte (abi.LostUTF8), so a valid context costs a search of its bytes. A
// context that has no such encoding (Marshal's bytes are not strict JSON,
// as when a json.RawMessage holds bytes that are not UTF-8, which Marshal
// passes on as they are) is looked at field by field.
func lostUTF8(d *audit.Digests) error {
	obj, ok := d.Object()
	if ok && !abi.LostUTF8(obj.Bytes()) {
		return nil
	}
	m := d.Map()
	for _, key := range slices.Sorted(maps.Keys(m)) {
		enc, err := abi.Marshal(m[key])
		if !utf8.ValidString(key) || err == nil && (abi.LostUTF8(enc) || !utf8.Valid(enc)) {
			return invalidUTF8(key)
		}
	}
	if ok {
		return invalidUTF8("")
	}
	return nil
}

// invalidUTF8 is lostUTF8's refusal of field.
func invalidUTF8(field string) error {
	return fmt.Errorf("%w: field %q holds a string that is not UTF-8 (strings.ToValidUTF8 makes it valid)", ErrInvalidInput, field)
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run runs the bindings at in.Point over in.Context, in order, and returns
// the outcome: allow (with the context as the transformers left it), block,
// or pending (an approval to resolve with Resolve). A hook failure is never
// an error here: its binding's fail policy decides and the trace says so.
// Run returns an error, and no outcome, for a bad input, a closed chain, the
// caller's context ending, or an audit record that could not be stored.
func (c *Chain) Run(ctx context.Context, in Input) (*Outcome, error) {
	if in.Tenant == "" {
		return nil, fmt.Errorf("%w: tenant is required", ErrInvalidInput)
	}
	if _, ok := c.points.Lookup(in.Point); !ok {
		return nil, fmt.Errorf("%w: unknown hook point %q", ErrInvalidInput, in.Point)
	}
	if in.Context == nil {
		in.Context = map[string]any{}
	}
	if in.Run == "" {
		in.Run = newID()
	}
	s := c.acquire()
	if s == nil {
		return nil, ErrClosed
	}
	defer s.release(ctx)
	cur := audit.AcquireDigests() // the input's digests serve its first step too
	cur.Reset(in.Context)
	if err := lostUTF8(cur); err != nil {
		cur.Release()
		return nil, err
	}
	started := c.now()
	st := &RunState{
		Run: in.Run, Tenant: in.Tenant, Point: in.Point, Config: s.digest,
		Context: in.Context, Input: cur.Digest(), Started: started.UTC(),
	}
	return c.execute(ctx, s, st, "chain.run", cur, started)
}
