package runtime

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/benchmode"
	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// Defaults for Limits. See SECURITY.md for what each limit defends against.
const (
	// DefaultMemoryPages is the default linear-memory limit: 512 pages of
	// 64 KiB, 32 MiB. A Go hook uses about 2.5 MiB after init.
	DefaultMemoryPages = 512
	// DefaultTimeout is the default wall-clock limit of one invocation.
	DefaultTimeout = 2 * time.Second
	// DefaultInitTimeout is the default wall-clock limit of creating an
	// instance and running _initialize.
	DefaultInitTimeout = 5 * time.Second
	// DefaultMaxInputBytes bounds the invocation document (1 MiB).
	DefaultMaxInputBytes = abi.DefaultMaxJSONBytes
	// DefaultMaxOutputBytes bounds the decision document (1 MiB).
	DefaultMaxOutputBytes = abi.DefaultMaxJSONBytes
	// DefaultMaxHostCalls bounds host calls per invocation, takes excluded.
	DefaultMaxHostCalls = 64
	// DefaultMaxHostCallBytes bounds the bytes of all host-call names,
	// payloads and results of one invocation (8 MiB).
	DefaultMaxHostCallBytes = 8 << 20
	// DefaultMaxRequestBytes bounds one host-call payload (1 MiB).
	DefaultMaxRequestBytes = abi.DefaultMaxPayloadBytes
	// DefaultMaxResultBytes bounds one host-call result (1 MiB).
	DefaultMaxResultBytes = abi.DefaultMaxPayloadBytes
	// DefaultMaxLogBytes bounds what one invocation may write to stdout
	// and stderr together (64 KiB); the rest is dropped and counted.
	DefaultMaxLogBytes = 64 << 10
	// DefaultFuel is the default fuel of one invocation: 400 million
	// units, one per WebAssembly instruction executed. The example Go hooks
	// use 0.2 to 12 million on a 1 KiB message (Shopify Functions allow 11
	// million instructions per run); guest code runs 0.1 to 18 ns per unit,
	// and the loop-free call tree, the one runaway shape the deadline
	// cannot interrupt, spends it in under 2 s. See
	// RATIONALE.md#why-fuel-and-how-much.
	DefaultFuel = 400_000_000
	// DefaultInitFuel is the default fuel of creating an instance: the
	// start function and _initialize together. A Go hook's runtime and
	// package initialisation use 1 to 2 million.
	DefaultInitFuel = 400_000_000
	// DefaultMaxStackBytes is the default stack budget: 512 KiB of frames
	// as the instrumentation counts them (see Limits.MaxStackBytes),
	// Shopify's limit. The example Go hooks need under 8 KiB; a runaway
	// recursion then costs the host about 1.4 MiB of Go heap.
	DefaultMaxStackBytes = 512 << 10
	// MaxFuel is the largest fuel budget (2^62).
	MaxFuel = 1 << 62
	// MaxStackBytesLimit is the largest stack budget (1 GiB).
	MaxStackBytesLimit = 1 << 30

	// DefaultMaxModuleBytes bounds the size of a module (32 MiB): the
	// module reader's default, which says why.
	DefaultMaxModuleBytes = wasmbin.DefaultMaxModuleBytes
	// DefaultMaxMemoryPages is the runtime-wide ceiling of Limits.MemoryPages
	// (4096 pages, 256 MiB).
	DefaultMaxMemoryPages = 4096
	// DefaultMaxInstancesPerPool bounds the instances of one module for one
	// tenant that run at once.
	DefaultMaxInstancesPerPool = 16
	// DefaultMaxIdlePerPool bounds the warm instances kept per pool.
	DefaultMaxIdlePerPool = 4
	// DefaultCacheModules bounds the compiled modules kept in memory.
	DefaultCacheModules = 128
	// DefaultMaxIdleInstances bounds the warm (idle) instances the whole
	// runtime keeps, across every pool; past it the least recently used is
	// closed.
	DefaultMaxIdleInstances = 256
	// DefaultMaxIdleBytes bounds the memory of the warm (idle) instances
	// the whole runtime keeps (128 MiB): their linear memories as reserved
	// and their tables. Past it the least recently used are closed. A warm
	// Go hook is counted for 4.5 to 7 MiB, so about 28 are kept; 1,000
	// tenants invoking one then hold about 130 MiB of heap (BENCHMARKS.md).
	DefaultMaxIdleBytes = 128 << 20
	// DefaultIdleTTL is how long a warm instance may wait unused before it
	// is closed.
	DefaultIdleTTL = time.Minute
	// DefaultCacheBytes bounds the host memory the compiled modules kept
	// in memory hold, as Load estimates it (see Config.CacheBytes): 1 GiB,
	// about 47 compiled Go hooks of the example hooks' size (21.6 MiB each
	// by the estimate, 7.2 MiB of heap and 9.5 MiB of RSS measured), or
	// 128 small C or Rust ones. Without it, 128 modules at the load limits
	// would hold about 2.7 GiB (21.7 MiB of heap each measured).
	DefaultCacheBytes = 1 << 30
)

// Limits bounds what one invocation of a hook may use. The zero value of every
// field means its default; limits are per hook, set by the operator. Validate
// is its one check; its one JSON form (MarshalJSON, UnmarshalJSON) names each
// field by its json tag, durations as Go duration strings ("2s").
type Limits struct {
	// MemoryPages limits the hook's linear memory, in 64 KiB pages.
	// memory.grow past it fails (returns -1). Zero means
	// DefaultMemoryPages (512, 32 MiB). It may not exceed
	// Config.MaxMemoryPages.
	MemoryPages uint32 `json:"memory_pages,omitempty"`
	// MemoryHighWaterPages: an instance whose memory has grown past this
	// many pages after an invocation is discarded rather than reused
	// (linear memory never shrinks). Zero means 3/4 of MemoryPages.
	MemoryHighWaterPages uint32 `json:"memory_high_water_pages,omitempty"`
	// Timeout is the wall-clock limit of one invocation, instance
	// creation excluded. Zero means DefaultTimeout (2s). Metered guest
	// code is stopped within a fuel slice of it (FuelSlice), host calls
	// and sleeps at it; a decision returned after it is a timeout.
	//
	// Whatever the hook calls, it works at most 50 ms past Timeout, and
	// typically a few milliseconds (SECURITY.md has the figures): guest
	// code reaches the host at every fuel slice, every host function
	// charges fuel for its work and caps it per call (MaxWriteIovecs,
	// MaxWriteBytes, MaxPollSubscriptions, MaxRandomBytes), and the host
	// looks at the clock every HostWorkPerCheck units of host work,
	// metered or not. The longest step between two looks is one bulk
	// memory operation over the largest memory (256 MiB, tens of
	// milliseconds). Waiting for a CPU on an overloaded host comes on top.
	// The bound does not cover a capability that ignores its context (it
	// gets one that ends at the deadline), nor an unmetered runtime with
	// benchmode's NoDeadlineInterrupt, whose guest code nothing stops.
	Timeout time.Duration `json:"timeout,omitempty"`
	// InitTimeout is the wall-clock limit of creating an instance and
	// running _initialize. Zero means DefaultInitTimeout (5s).
	InitTimeout time.Duration `json:"init_timeout,omitempty"`
	// MaxInputBytes bounds the invocation document. Zero means 1 MiB.
	MaxInputBytes int `json:"max_input_bytes,omitempty"`
	// MaxOutputBytes bounds the decision the hook returns. Zero means 1 MiB.
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	// MaxHostCalls bounds the host calls of one invocation (takes are not
	// counted). Zero means 64.
	MaxHostCalls int `json:"max_host_calls,omitempty"`
	// MaxHostCallBytes bounds the bytes of all host-call names, payloads
	// and results of one invocation. Zero means 8 MiB.
	MaxHostCallBytes int `json:"max_host_call_bytes,omitempty"`
	// MaxRequestBytes bounds one host-call payload. Zero means 1 MiB.
	MaxRequestBytes int `json:"max_request_bytes,omitempty"`
	// MaxResultBytes bounds one host-call result. Zero means 1 MiB.
	MaxResultBytes int `json:"max_result_bytes,omitempty"`
	// MaxLogBytes bounds stdout and stderr of one invocation. Zero means
	// 64 KiB.
	MaxLogBytes int `json:"max_log_bytes,omitempty"`
	// Fuel is the deterministic work budget of one invocation, in units of
	// about one WebAssembly instruction (bulk memory and table operations
	// also cost one unit per 64 bytes or 8 elements; a host function call
	// HostFunctionFuel, plus HostIovecFuel an iovec, HostSubscriptionFuel
	// a subscription, HostByteFuel a byte it moves and HostLineFuel a
	// line it logs). Running out fails
	// the invocation with fuel_exhausted, whatever the clock says. Zero
	// means DefaultFuel (400 million); at most MaxFuel.
	Fuel uint64 `json:"fuel,omitempty"`
	// InitFuel is the fuel of creating an instance: the module's start
	// function and _initialize together. Zero means DefaultInitFuel
	// (400 million); at most MaxFuel.
	InitFuel uint64 `json:"init_fuel,omitempty"`
	// MaxStackBytes bounds the guest's call stack, in bytes as the
	// instrumentation counts them: every function that makes calls costs
	// 32 + 8 × (parameters + locals + its maximum operand-stack height)
	// while it runs. Going past it fails the invocation with
	// stack_exhausted. Zero means DefaultMaxStackBytes (512 KiB); at most
	// MaxStackBytesLimit.
	MaxStackBytes int `json:"max_stack_bytes,omitempty"`
}

// WithDefaults returns l with every zero field replaced by its default.
func (l Limits) WithDefaults() Limits {
	l = mergeLimits(l, defaultLimits)
	if l.MemoryHighWaterPages == 0 {
		l.MemoryHighWaterPages = l.MemoryPages * 3 / 4
		if l.MemoryHighWaterPages == 0 {
			l.MemoryHighWaterPages = l.MemoryPages
		}
	}
	return l
}

// defaultLimits holds the default of every field of Limits but
// MemoryHighWaterPages, whose default is 3/4 of MemoryPages.
var defaultLimits = Limits{
	MemoryPages: DefaultMemoryPages, Timeout: DefaultTimeout, InitTimeout: DefaultInitTimeout,
	MaxInputBytes: DefaultMaxInputBytes, MaxOutputBytes: DefaultMaxOutputBytes,
	MaxHostCalls: DefaultMaxHostCalls, MaxHostCallBytes: DefaultMaxHostCallBytes,
	MaxRequestBytes: DefaultMaxRequestBytes, MaxResultBytes: DefaultMaxResultBytes, MaxLogBytes: DefaultMaxLogBytes,
	Fuel: DefaultFuel, InitFuel: DefaultInitFuel, MaxStackBytes: DefaultMaxStackBytes,
}

// Validate reports whether l, with its defaults applied (WithDefaults), is
// within the bounds the runtime accepts under a memory ceiling of maxPages
// (Config.MaxMemoryPages): every limit the runtime refuses at Invoke, this
// refuses. It is the one check of a Limits; callers that build a
// configuration ahead of traffic (chain) call it through
// Runtime.EffectiveLimits or Runtime.LimitsFor, so that a bad limit is
// refused when the configuration is built, not on every invocation.
func (l Limits) Validate(maxPages uint32) error {
	switch {
	case l.MemoryPages > maxPages:
		return &LimitError{Limit: "memory_pages", Max: uint64(maxPages), Got: uint64(l.MemoryPages)}
	case l.MemoryHighWaterPages > l.MemoryPages:
		return fmt.Errorf("runtime: MemoryHighWaterPages %d is over MemoryPages %d", l.MemoryHighWaterPages, l.MemoryPages)
	case l.Timeout < 0 || l.InitTimeout < 0:
		return fmt.Errorf("runtime: negative timeout")
	case l.MaxInputBytes < 0 || l.MaxOutputBytes < 0 || l.MaxHostCalls < 0 || l.MaxHostCallBytes < 0 ||
		l.MaxRequestBytes < 0 || l.MaxResultBytes < 0 || l.MaxLogBytes < 0:
		return fmt.Errorf("runtime: negative limit")
	case l.MaxOutputBytes > 1<<30 || l.MaxInputBytes > 1<<30:
		return fmt.Errorf("runtime: input and output limits must be at most 1 GiB")
	case l.Fuel > MaxFuel || l.InitFuel > MaxFuel:
		return &LimitError{Limit: "fuel", Max: MaxFuel, Got: max(l.Fuel, l.InitFuel)}
	case l.MaxStackBytes < 0 || l.MaxStackBytes > MaxStackBytesLimit:
		return fmt.Errorf("runtime: MaxStackBytes %d is not in [0, %d]", l.MaxStackBytes, MaxStackBytesLimit)
	}
	return nil
}

// Config configures a Runtime. The zero value works.
type Config struct {
	// CacheDir, when set, keeps what Load computes for a module, so that
	// another process or Runtime loading the same bytes does not compute
	// it again. It holds wazero's compiled code (in subdirectories of its
	// own) and, under modules/, the module cache: one file per module and
	// configuration, holding the ModuleInfo and the instrumented module,
	// so that a hit skips validation, the compile-cost check and the
	// instrumentation. Files are named by the module's sha256, in a
	// subdirectory named by a hash of what else the result depends on
	// (the meter's version, the library's release or, for a development
	// build, a hash of the executable, MaxModuleBytes, MaxMemoryPages,
	// whether metering is on). Only modules that load are kept.
	// An entry carries a checksum; one that is truncated, corrupt or made
	// for another module or configuration is ignored and rewritten.
	// Entries are written atomically (a temporary file, mode 0600,
	// renamed; directories 0700), so processes may share the directory;
	// a failure to write is logged and costs only time (a directory
	// wazero cannot write to at New is left out, with a warning, rather
	// than failing every compile). Nothing is
	// removed: the directory grows by about the size of each distinct
	// module loaded, per configuration and version (as wazero's does);
	// delete it, or its old subdirectories, to reclaim the space. Trust it
	// as you trust the binary: wazero's entries are native code. Empty
	// means no disk cache. See
	// RATIONALE.md#why-cache-the-instrumented-module-on-disk.
	CacheDir string
	// MaxModuleBytes refuses larger modules at load. Zero means 32 MiB.
	MaxModuleBytes int
	// MaxMemoryPages is the ceiling of any hook's Limits.MemoryPages, and
	// refuses at load a module whose declared minimum is larger. Zero means
	// DefaultMaxMemoryPages (4096, 256 MiB). At most 65536.
	MaxMemoryPages uint32
	// Limits are the default limits of an invocation whose request leaves
	// them zero. Zero fields mean the package defaults.
	Limits Limits
	// MaxInstancesPerPool bounds the instances of one module for one tenant
	// that run at once; more callers wait. Zero means 16.
	MaxInstancesPerPool int
	// MaxIdlePerPool bounds the warm instances kept per pool. Zero means 4;
	// negative means none are kept.
	MaxIdlePerPool int
	// MaxIdleInstances bounds the warm (idle) instances kept by the whole
	// runtime, across every pool: when one more would be kept, the least
	// recently used idle instance, of whatever pool, is closed. Zero means
	// DefaultMaxIdleInstances (256); negative means none are kept.
	// See SECURITY.md.
	MaxIdleInstances int
	// MaxIdleBytes bounds the memory of the warm instances kept by the
	// whole runtime: each counts its linear memory as reserved, its tables
	// (elements × 8 bytes) and what wazero keeps for its passive element
	// segments and data segments. Past it the least recently used idle
	// instances are closed; an instance that alone is over it is not
	// kept. Zero means DefaultMaxIdleBytes (128 MiB); negative means none
	// are kept. wazero's fixed structures of an instance (0.2 MiB for a
	// Go hook) are not counted. See SECURITY.md.
	MaxIdleBytes int64
	// IdleTTL is how long a warm instance may wait unused: older ones are
	// closed, when an instance is acquired or released and by one
	// background goroutine that Close stops. Zero means DefaultIdleTTL
	// (1 minute); negative means idle instances never expire (the counts
	// above still bound them).
	IdleTTL time.Duration
	// CacheModules bounds the compiled modules kept in memory (LRU, keyed
	// by sha256). Zero means 128.
	CacheModules int
	// CacheBytes bounds the host memory of the compiled modules kept in
	// memory, as estimated from what each declares (see
	// compiledHostBytes): past it the least recently used are evicted,
	// whatever their count. An evicted module stays alive while a Module
	// loaded from it is open. Zero means DefaultCacheBytes (1 GiB).
	CacheBytes int64
	// HostCaller serves host calls when a Request names none. Nil means
	// every host call is answered UNKNOWN_CAPABILITY.
	HostCaller HostCaller
	// Logger receives operator logs. Nil means slog.Default().
	Logger *slog.Logger
	// Interpreter selects wazero's interpreter instead of its compiler;
	// for platforms without a compiler and for differential tests.
	Interpreter bool

	// disableMetering and noDeadlineInterrupt are the benchmark-only
	// switches benchmode.Switches documents, set through package
	// internal/benchmode only.
	disableMetering     bool
	noDeadlineInterrupt bool
}

func init() {
	benchmode.Register(func(cfg any, s benchmode.Switches) {
		c := cfg.(*Config)
		c.disableMetering, c.noDeadlineInterrupt = s.DisableMetering, s.NoDeadlineInterrupt
	}, func(cfg any) benchmode.Switches {
		c := cfg.(*Config)
		return benchmode.Switches{DisableMetering: c.disableMetering, NoDeadlineInterrupt: c.noDeadlineInterrupt}
	})
}

func (c Config) withDefaults() Config {
	c.MaxModuleBytes = cmp.Or(c.MaxModuleBytes, DefaultMaxModuleBytes)
	c.MaxMemoryPages = cmp.Or(c.MaxMemoryPages, DefaultMaxMemoryPages)
	c.MaxInstancesPerPool = cmp.Or(c.MaxInstancesPerPool, DefaultMaxInstancesPerPool)
	c.MaxIdlePerPool = orNone(c.MaxIdlePerPool, DefaultMaxIdlePerPool)
	c.MaxIdleInstances = orNone(c.MaxIdleInstances, DefaultMaxIdleInstances)
	c.MaxIdleBytes = orNone(c.MaxIdleBytes, DefaultMaxIdleBytes)
	c.IdleTTL = cmp.Or(c.IdleTTL, DefaultIdleTTL)
	c.CacheModules = cmp.Or(c.CacheModules, DefaultCacheModules)
	if c.CacheBytes <= 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// orNone is the rule of the idle bounds: zero means def, negative means
// none (0).
func orNone[T int | int64](v, def T) T {
	if v < 0 {
		return 0
	}
	return cmp.Or(v, def)
}

// EffectiveLimits returns the limits an invocation with request limits l
// runs under on r (l's zero fields filled from Config.Limits, then the
// package defaults) and refuses them as Invoke would (Limits.Validate against
// Config.MaxMemoryPages), with an error wrapping ErrInvalidRequest.
func (r *Runtime) EffectiveLimits(l Limits) (Limits, error) {
	lim := mergeLimits(l, r.cfg.Limits).WithDefaults()
	if err := lim.Validate(r.cfg.MaxMemoryPages); err != nil {
		return Limits{}, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return lim, nil
}

// LimitsFor is EffectiveLimits for an invocation of m: it also refuses
// limits whose memory is below m's declared minimum. It is exactly the check
// Invoke makes of a request's limits, for callers (chain) that want to refuse
// a binding when its configuration is built rather than at every invocation.
func (r *Runtime) LimitsFor(m *Module, l Limits) (Limits, error) {
	lim, err := r.EffectiveLimits(l)
	if err != nil {
		return Limits{}, err
	}
	if min := m.Info().MemoryMinPages; min > lim.MemoryPages {
		return Limits{}, fmt.Errorf("%w: %w", ErrInvalidRequest, &LimitError{Limit: "memory_pages (module minimum)", Max: uint64(lim.MemoryPages), Got: uint64(min)})
	}
	return lim, nil
}
