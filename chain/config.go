package chain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Phase is where a binding runs in the chain and what it may do.
// See RATIONALE.md#why-three-phases.
type Phase string

// The three phases, in the order they run.
const (
	// Observer bindings run first and always; they see the traffic as it
	// arrived and cannot change anything: a modify, block or ask from an
	// observer is ignored and reported, and a failure never blocks.
	Observer Phase = "observer"
	// Transformer bindings run second; they may continue or modify (only
	// the point's changeable fields). A block or ask is ignored and
	// reported.
	Transformer Phase = "transformer"
	// Guard bindings run last, on the traffic as the transformers left it;
	// they may continue, block or ask. A modify is ignored and reported.
	Guard Phase = "guard"
)

func (p Phase) rank() int {
	switch p {
	case Observer:
		return 0
	case Transformer:
		return 1
	case Guard:
		return 2
	}
	return -1
}

// FailPolicy is what a binding's failure decides.
type FailPolicy string

// Fail policies.
const (
	// FailOpen continues as if the hook had answered continue, and records
	// the failure.
	FailOpen FailPolicy = "open"
	// FailClosed blocks, with a reason that names the failure (never the
	// hook's own words, so it cannot be confused with a deliberate block).
	FailClosed FailPolicy = "closed"
)

// DefaultFailPolicy returns the fail policy of a binding at the built-in
// point in phase that does not set one: open for observers (they cannot
// block), closed for guards, and for transformers the point's own
// (abi.Point.Fail): closed where the traffic leaves the agent's trust
// boundary (message.outbound, tool.before, llm.before, memory.write), open
// where it stays inside the agent. See
// RATIONALE.md#why-these-default-fail-policies. A platform's point sets its
// own in abi.Point.Fail.
func DefaultFailPolicy(point string, phase Phase) FailPolicy {
	p, _ := abi.LookupPoint(point)
	return defaultFail(p, phase)
}

// defaultFail is DefaultFailPolicy for a point, built-in or registered.
func defaultFail(p abi.Point, phase Phase) FailPolicy {
	switch phase {
	case Observer:
		return FailOpen
	case Guard:
		return FailClosed
	}
	if p.Fail == string(FailOpen) {
		return FailOpen
	}
	return FailClosed
}

// ExpiryPolicy is what an approval that nobody resolved in time decides.
type ExpiryPolicy string

// Expiry policies.
const (
	ExpireDeny    ExpiryPolicy = "deny"
	ExpireApprove ExpiryPolicy = "approve"
)

// expiryPolicy resolves a configured expiry policy: empty means ExpireDeny;
// ok is false for a policy that is not one of the two.
func expiryPolicy(p ExpiryPolicy) (_ ExpiryPolicy, ok bool) {
	switch p {
	case "":
		return ExpireDeny, true
	case ExpireDeny, ExpireApprove:
		return p, true
	}
	return p, false
}

// DefaultApprovalTimeout is how long an approval waits when the binding does
// not say.
const DefaultApprovalTimeout = 15 * time.Minute

// ApprovalPolicy configures the approvals a guard's ask creates.
type ApprovalPolicy struct {
	// Timeout is how long an approval waits for a resolution. Zero means
	// DefaultApprovalTimeout (15 minutes).
	Timeout time.Duration
	// OnExpiry decides an approval nobody resolved in time. Empty means
	// ExpireDeny.
	OnExpiry ExpiryPolicy
}

// Binding binds a hook module at a point of the chain.
type Binding struct {
	// Name identifies the binding; unique in a Config. It is the hook's
	// name in its invocations (meta.hook), in the trace, the audit log and
	// the key-value scope. Letters, digits, '.', '_' and '-', at most 64.
	Name string
	// Module names the module in Config.Modules.
	Module string
	// Point is the hook point, such as "message.outbound".
	Point string
	// Phase is observer, transformer or guard.
	Phase Phase
	// Priority orders bindings within a phase: lower runs first; equal
	// priorities run in the order of Config.Bindings.
	Priority int
	// Settings are the hook's settings, validated against its manifest's
	// settings_schema when the configuration is built. Nil means {}.
	Settings map[string]any
	// Grants lists the capabilities granted to the hook. A host call also
	// needs the hook's manifest to ask for the capability.
	Grants []string
	// Fail is the binding's fail policy. Empty means
	// DefaultFailPolicy(Point, Phase). An observer cannot fail closed.
	Fail FailPolicy
	// Limits bound each invocation; zero fields mean the runtime's
	// defaults.
	Limits runtime.Limits
	// Approval configures the approvals the binding's asks create (guards
	// only).
	Approval ApprovalPolicy
	// Lookahead is the look-ahead, in characters (Unicode code points),
	// the binding needs at a streaming point (abi.IsStreamPoint): a
	// Stream releases text only once every binding at its point has seen
	// at least this many characters after it (or the end of the reply).
	// Zero means DefaultLookahead; at most MaxLookahead. Only bindings at
	// streaming points may set it. See Stream.
	Lookahead int
	// Mode is ModeActive (empty means active) or ModeAudit: an audit
	// binding runs and its would-be decision and change are recorded (the
	// step's Shadow, the audit record's Ignored), but it never alters or
	// blocks the traffic, and a failure never blocks whatever the fail
	// policy (which still says whether it is a warning or an error).
	Mode Mode
}

// Mode is whether a binding's decisions apply (MCP interceptors' "mode").
type Mode string

// Binding modes.
const (
	ModeActive Mode = "active"
	ModeAudit  Mode = "audit"
)

// BreakerConfig configures the circuit breakers: one per binding and tenant.
// See RATIONALE.md#why-a-circuit-breaker.
type BreakerConfig struct {
	// Failures is how many failures in a row open a breaker. Zero means 5;
	// negative disables the breakers.
	Failures int
	// Backoff is how long a breaker stays open the first time. Zero means
	// 30 s. Each failed trial doubles it, up to MaxBackoff.
	Backoff time.Duration
	// MaxBackoff bounds the backoff. Zero means 5 minutes.
	MaxBackoff time.Duration
}

func (b BreakerConfig) withDefaults() BreakerConfig {
	if b.Failures == 0 {
		b.Failures = 5
	}
	if b.Backoff == 0 {
		b.Backoff = 30 * time.Second
	}
	if b.MaxBackoff == 0 {
		b.MaxBackoff = 5 * time.Minute
	}
	if b.MaxBackoff < b.Backoff {
		b.MaxBackoff = b.Backoff
	}
	return b
}

// Config is a chain configuration: the modules and how they are bound. Chain
// copies what it needs, so a Config may be reused or changed afterwards.
type Config struct {
	// Modules maps a module name to the module's bytes.
	Modules map[string][]byte
	// Bindings lists the bindings; their order breaks priority ties.
	Bindings []Binding
	// Breaker configures the circuit breakers.
	Breaker BreakerConfig
	// ToolApprovals marks tools that need a human's approval at
	// tool.before, without a guard hook (seed 002's requires_approval).
	ToolApprovals []ToolApproval
}

// ConfigError reports why a configuration was refused. A refused Reload
// leaves the configuration in force unchanged.
type ConfigError struct {
	// Problems lists every problem found, each naming its binding or
	// module.
	Problems []string
	// Errs holds the typed errors behind some of the problems (a module's
	// load error, a *SettingsSchemaError, settings that do not match it
	// (ErrInvalidSettings), a limit the runtime refuses), for
	// errors.Is and errors.As.
	Errs []error
}

func (e *ConfigError) Error() string {
	return "chain: configuration refused: " + strings.Join(e.Problems, "; ")
}

// Unwrap returns Errs.
func (e *ConfigError) Unwrap() []error { return e.Errs }

// bound is a binding ready to run: its module loaded, its settings
// validated, its defaults applied. It is immutable.
type bound struct {
	Binding
	index  int // position in Config.Bindings
	module *runtime.Module
	// prepared is module at the binding's point under its limits, checked
	// once (Engine.Prepare): what its invocations run.
	prepared *runtime.Prepared
	digest   string
	point    abi.Point
	fail     FailPolicy
	key      string // name@digest: what a breaker is kept for
	timeout  time.Duration
	onExpiry ExpiryPolicy
	// limits are the limits the binding's invocations run under
	// (Runtime.EffectiveLimits of Binding.Limits): what the configuration
	// digest covers.
	limits runtime.Limits
	// inputMax is the binding's effective input limit, and envelope the
	// bytes its invocation document holds besides the context, the tenant
	// and the invocation id: a transformer's modify before it is bounded by
	// them (see room in run.go).
	inputMax, envelope int
	// settingsObject is Settings encoded, once, when the configuration
	// is built: what every invocation's document carries (nil for
	// settings that do not encode, which normalise does not let by).
	settingsObject *abi.Object
	// spanStart starts the binding's chain.hook spans: their attributes
	// are the binding's, made once rather than per run.
	spanStart []trace.SpanStartOption
	// rule is set for a ToolApproval's guard, which runs no module.
	rule *toolRule
	// lastBreaker is the breaker the binding's last step looked up
	// (breakers.of).
	lastBreaker atomic.Pointer[lastBreaker]
}

// snapshot is one immutable configuration. Runs hold a reference while they
// use it; its modules are closed when the last reference goes.
type snapshot struct {
	version uint64
	digest  string
	breaker BreakerConfig
	points  map[string][]*bound
	byName  map[string]*bound
	modules []*runtime.Module
	refs    atomic.Int64 // the chain's reference plus one per run in flight
}

func (s *snapshot) tryAcquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *snapshot) release(ctx context.Context) {
	if s.refs.Add(-1) == 0 {
		ctx = context.WithoutCancel(ctx)
		for _, m := range s.modules {
			_ = m.Close(ctx)
		}
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// build validates cfg, loads its modules and returns the snapshot. On any
// problem it closes what it loaded and returns a *ConfigError listing them
// all.
func (c *Chain) build(ctx context.Context, cfg Config) (*snapshot, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var errs []error
	badErr := func(err error, format string, args ...any) {
		errs = append(errs, err)
		bad(format, args...)
	}

	br := cfg.Breaker
	if br.Backoff < 0 || br.MaxBackoff < 0 {
		bad("breaker: negative backoff")
	}
	br = br.withDefaults()

	// Load each module that a binding names, once.
	type loaded struct {
		mod    *runtime.Module
		schema *settingsSchema
		err    bool
	}
	mods := map[string]*loaded{}
	var modules []*runtime.Module
	closeAll := func() {
		for _, m := range modules {
			_ = m.Close(context.WithoutCancel(ctx))
		}
	}
	names := make([]string, 0, len(cfg.Modules))
	for name := range cfg.Modules {
		names = append(names, name)
	}
	sort.Strings(names)
	used := map[string]bool{}
	for _, b := range cfg.Bindings {
		used[b.Module] = true
	}
	for _, name := range names {
		if !used[name] {
			c.log.Warn("chain: module not bound by any binding; not loaded", "module", name)
			continue
		}
		l := &loaded{}
		mods[name] = l
		m, err := c.engine.Load(ctx, cfg.Modules[name])
		if err != nil {
			badErr(err, "module %q: %v", name, err)
			l.err = true
			continue
		}
		modules = append(modules, m)
		l.mod = m
		if l.schema, err = compileSettingsSchema(m.Manifest()); err != nil {
			badErr(err, "module %q: %v", name, err)
			l.err = true
		}
	}

	s := &snapshot{breaker: br, points: map[string][]*bound{}, byName: map[string]*bound{}}
	for i, b := range cfg.Bindings {
		what := fmt.Sprintf("binding %d (%q)", i, b.Name)
		if !nameRE.MatchString(b.Name) {
			bad("%s: the name must be 1-64 letters, digits, '.', '_' or '-'", what)
			continue
		}
		if _, dup := s.byName[b.Name]; dup {
			bad("%s: duplicate binding name", what)
			continue
		}
		point, ok := c.points.Lookup(b.Point)
		if !ok {
			bad("%s: unknown hook point %q", what, b.Point)
			continue
		}
		if b.Phase.rank() < 0 {
			bad("%s: unknown phase %q (want observer, transformer or guard)", what, b.Phase)
			continue
		}
		if !point.AllowsPhase(string(b.Phase)) {
			bad("%s: point %s does not allow %s bindings (it allows %s)", what, b.Point, b.Phase, strings.Join(point.Phases, ", "))
			continue
		}
		l, ok := mods[b.Module]
		if !ok {
			bad("%s: unknown module %q", what, b.Module)
			continue
		}
		fail := b.Fail
		switch fail {
		case "":
			fail = defaultFail(point, b.Phase)
		case FailOpen, FailClosed:
		default:
			bad("%s: unknown fail policy %q (want open or closed)", what, b.Fail)
			continue
		}
		if b.Phase == Observer && fail == FailClosed {
			bad("%s: an observer cannot fail closed (observers cannot block)", what)
			continue
		}
		if b.Mode != "" && b.Mode != ModeActive && b.Mode != ModeAudit {
			bad("%s: unknown mode %q (want active or audit)", what, b.Mode)
			continue
		}
		if b.Approval.Timeout < 0 {
			bad("%s: negative approval timeout", what)
			continue
		}
		if b.Lookahead != 0 && !abi.IsStreamPoint(b.Point) {
			bad("%s: lookahead is for streaming points only (%s is not one)", what, b.Point)
			continue
		}
		if b.Lookahead < 0 || b.Lookahead > MaxLookahead {
			bad("%s: lookahead %d out of range (0 for the default %d, at most %d)", what, b.Lookahead, DefaultLookahead, MaxLookahead)
			continue
		}
		onExpiry, ok := expiryPolicy(b.Approval.OnExpiry)
		if !ok {
			bad("%s: unknown approval expiry policy %q (want deny or approve)", what, onExpiry)
			continue
		}
		// The runtime's own check, against its ceiling (MaxMemoryPages)
		// and defaults: a limit it would refuse at every invocation is
		// refused now.
		lim, err := c.engine.EffectiveLimits(b.Limits)
		if err != nil {
			badErr(err, "%s: limits: %v", what, err)
			continue
		}
		settings, err := normalise(b.Settings)
		if err != nil {
			bad("%s: settings: %v", what, err)
			continue
		}
		nb := &bound{Binding: b, index: i, point: point, fail: fail, onExpiry: onExpiry, timeout: b.Approval.Timeout, limits: lim}
		if nb.timeout == 0 {
			nb.timeout = DefaultApprovalTimeout
		}
		nb.Settings = settings
		if o, err := abi.ObjectFromMap(settings); err == nil {
			nb.settingsObject = &o
		}
		nb.Grants = append([]string(nil), b.Grants...)
		nb.inputMax, nb.envelope = lim.MaxInputBytes, envelopeBytes(b.Point, b.Name, settings, nb.settingsObject)
		s.byName[b.Name] = nb
		if l.err {
			continue // the module's problem is already reported
		}
		if man := l.mod.Manifest(); !man.AllowsPoint(b.Point) {
			bad("%s: module %q's manifest does not allow point %s (it allows %s)", what, b.Module, b.Point, strings.Join(man.Points, ", "))
			continue
		}
		prepared, err := c.engine.Prepare(l.mod, b.Point, c.points, b.Limits)
		if err != nil {
			// Memory below the module's declared minimum.
			badErr(err, "%s: limits: %v", what, err)
			continue
		}
		if err := l.schema.validate(settings); err != nil {
			badErr(err, "%s: %v", what, err)
			continue
		}
		if man := l.mod.Manifest(); man != nil {
			for _, g := range nb.Grants {
				if !man.Requests(g) {
					c.log.Warn("chain: grant the hook's manifest does not ask for; host calls to it will be denied",
						"binding", b.Name, "capability", g)
				}
			}
		}
		nb.module, nb.prepared, nb.digest = l.mod, prepared, l.mod.Digest()
		nb.key = b.Name + "@" + nb.digest
		nb.spanStart = []trace.SpanStartOption{trace.WithAttributes(
			attribute.String("wasmhooks.binding", b.Name),
			attribute.String("wasmhooks.phase", string(b.Phase)),
			attribute.Int("wasmhooks.priority", b.Priority),
			attribute.String("wasmhooks.module", nb.digest),
		)}
		s.points[b.Point] = append(s.points[b.Point], nb)
	}
	c.buildToolApprovals(cfg, s, bad)
	if len(problems) > 0 {
		closeAll()
		return nil, &ConfigError{Problems: problems, Errs: errs}
	}
	for _, list := range s.points {
		order(list)
	}
	s.modules = modules
	s.digest = configDigest(cfg, s)
	s.refs.Store(1)
	return s, nil
}

// order sorts the bindings of one point into the order they run. This is the
// one place the order is defined: by phase (observers, then transformers,
// then guards), then by priority ascending, then by position in
// Config.Bindings (a stable sort keeps insertion order for equal
// priorities).
func order(list []*bound) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Phase.rank() != b.Phase.rank() {
			return a.Phase.rank() < b.Phase.rank()
		}
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		return a.index < b.index
	})
}

// normalise returns a deep copy of v in the form abi.ParseJSON produces
// (json.Number numbers), refusing what strict JSON refuses. The snapshot then
// owns its settings, whatever the caller does with its map.
func normalise(v map[string]any) (map[string]any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	b, err := abi.Marshal(v)
	if err != nil {
		return nil, err
	}
	out, err := abi.ParseJSON(b, abi.JSONLimits{})
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

// configDigest identifies a configuration: the bindings as bound (with
// their modules' digests and resolved defaults, their limits as they run, in
// runtime.Limits' JSON form) and the breaker settings. A pending approval
// records it to tell whether it resumes on the same configuration.
func configDigest(cfg Config, s *snapshot) string {
	type entry struct {
		Name, Module, Point, Phase string
		Priority                   int
		Settings                   map[string]any
		Grants                     []string
		Fail                       string
		Limits                     runtime.Limits
		Timeout                    time.Duration
		OnExpiry                   string
		Lookahead                  int    `json:",omitempty"`
		Mode                       string `json:",omitempty"`
	}
	doc := struct {
		Bindings      []entry
		Breaker       BreakerConfig
		ToolApprovals []entry `json:",omitempty"`
	}{Breaker: s.breaker}
	for _, b := range s.byName {
		if b.rule != nil { // its digest covers its tools, reason and policy
			doc.ToolApprovals = append(doc.ToolApprovals, entry{Name: b.Name, Module: b.digest, Priority: b.Priority, Point: b.Point, Phase: string(b.Phase)})
		}
	}
	sort.Slice(doc.ToolApprovals, func(i, j int) bool { return doc.ToolApprovals[i].Name < doc.ToolApprovals[j].Name })
	for _, b := range cfg.Bindings {
		nb := s.byName[b.Name]
		doc.Bindings = append(doc.Bindings, entry{
			Name: nb.Name, Module: nb.digest, Point: nb.Point, Phase: string(nb.Phase), Priority: nb.Priority,
			Settings: nb.Settings, Grants: nb.Grants, Fail: string(nb.fail), Timeout: nb.timeout, OnExpiry: string(nb.onExpiry),
			Limits: nb.limits, Lookahead: nb.Lookahead, Mode: string(nb.Mode),
		})
	}
	b, _ := abi.Marshal(doc)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
