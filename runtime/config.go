package runtime

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults for Limits. See SECURITY.md for what each limit defends against.
const (
	// DefaultMemoryPages is the default linear-memory limit: 512 pages of
	// 64 KiB, 32 MiB. A Go hook uses about 2.5 MiB after init.
	DefaultMemoryPages = 512
	// DefaultTimeout is the default wall-clock limit of one invocation.
	DefaultTimeout = 2 * time.Second
	// DefaultMaxInputBytes bounds the invocation document (1 MiB).
	DefaultMaxInputBytes = 1 << 20
	// DefaultMaxOutputBytes bounds the decision document (1 MiB).
	DefaultMaxOutputBytes = 1 << 20
	// DefaultMaxHostCalls bounds host calls per invocation, takes excluded.
	DefaultMaxHostCalls = 64
	// DefaultMaxHostCallBytes bounds the bytes of all host-call names,
	// payloads and results of one invocation (8 MiB).
	DefaultMaxHostCallBytes = 8 << 20
	// DefaultMaxRequestBytes bounds one host-call payload (1 MiB).
	DefaultMaxRequestBytes = 1 << 20
	// DefaultMaxResultBytes bounds one host-call result (1 MiB).
	DefaultMaxResultBytes = 1 << 20
	// DefaultMaxLogBytes bounds what one invocation may write to stdout
	// and stderr together (64 KiB); the rest is dropped and counted.
	DefaultMaxLogBytes = 64 << 10
	// MaxNameBytes bounds a capability name in a host call.
	MaxNameBytes = 128
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

	// DefaultMaxModuleBytes bounds the size of a module (32 MiB).
	DefaultMaxModuleBytes = 32 << 20
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
	// DefaultCacheBytes bounds the host memory the compiled modules kept
	// in memory hold, as Load estimates it (see Config.CacheBytes): 1 GiB,
	// about 47 compiled Go hooks of the example hooks' size (21.6 MiB each
	// by the estimate, 7.2 MiB of heap and 9.5 MiB of RSS measured), or
	// 128 small C or Rust ones. Without it, 128 modules at the load limits
	// would hold about 2.7 GiB (21.7 MiB of heap each measured).
	DefaultCacheBytes = 1 << 30
)

// Limits bounds what one invocation of a hook may use. The zero value of every
// field means its default; limits are per hook, set by the operator.
type Limits struct {
	// MemoryPages limits the hook's linear memory, in 64 KiB pages.
	// memory.grow past it fails (returns -1). Zero means
	// DefaultMemoryPages (512, 32 MiB). It may not exceed
	// Config.MaxMemoryPages.
	MemoryPages uint32
	// MemoryHighWaterPages: an instance whose memory has grown past this
	// many pages after an invocation is discarded rather than reused
	// (linear memory never shrinks). Zero means 3/4 of MemoryPages.
	MemoryHighWaterPages uint32
	// Timeout is the wall-clock limit of one invocation, instance
	// creation excluded. Zero means DefaultTimeout (2s). Metered guest
	// code is stopped within a fuel slice of it (FuelSlice), host calls
	// and sleeps at it; a decision returned after it is a timeout.
	Timeout time.Duration
	// InitTimeout is the wall-clock limit of creating an instance and
	// running _initialize. Zero means 5s.
	InitTimeout time.Duration
	// MaxInputBytes bounds the invocation document. Zero means 1 MiB.
	MaxInputBytes int
	// MaxOutputBytes bounds the decision the hook returns. Zero means 1 MiB.
	MaxOutputBytes int
	// MaxHostCalls bounds the host calls of one invocation (takes are not
	// counted). Zero means 64.
	MaxHostCalls int
	// MaxHostCallBytes bounds the bytes of all host-call names, payloads
	// and results of one invocation. Zero means 8 MiB.
	MaxHostCallBytes int
	// MaxRequestBytes bounds one host-call payload. Zero means 1 MiB.
	MaxRequestBytes int
	// MaxResultBytes bounds one host-call result. Zero means 1 MiB.
	MaxResultBytes int
	// MaxLogBytes bounds stdout and stderr of one invocation. Zero means
	// 64 KiB.
	MaxLogBytes int
	// Fuel is the deterministic work budget of one invocation, in units of
	// about one WebAssembly instruction (bulk memory and table operations
	// also cost one unit per 64 bytes or 8 elements). Running out fails
	// the invocation with fuel_exhausted, whatever the clock says. Zero
	// means DefaultFuel (400 million); at most MaxFuel.
	Fuel uint64
	// InitFuel is the fuel of creating an instance: the module's start
	// function and _initialize together. Zero means DefaultInitFuel
	// (400 million); at most MaxFuel.
	InitFuel uint64
	// MaxStackBytes bounds the guest's call stack, in bytes as the
	// instrumentation counts them: every function that makes calls costs
	// 32 + 8 × (parameters + locals + its maximum operand-stack height)
	// while it runs. Going past it fails the invocation with
	// stack_exhausted. Zero means DefaultMaxStackBytes (512 KiB); at most
	// MaxStackBytesLimit.
	MaxStackBytes int
}

// WithDefaults returns l with every zero field replaced by its default.
func (l Limits) WithDefaults() Limits {
	if l.MemoryPages == 0 {
		l.MemoryPages = DefaultMemoryPages
	}
	if l.MemoryHighWaterPages == 0 {
		l.MemoryHighWaterPages = l.MemoryPages * 3 / 4
		if l.MemoryHighWaterPages == 0 {
			l.MemoryHighWaterPages = l.MemoryPages
		}
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	if l.InitTimeout == 0 {
		l.InitTimeout = 5 * time.Second
	}
	if l.MaxInputBytes == 0 {
		l.MaxInputBytes = DefaultMaxInputBytes
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if l.MaxHostCalls == 0 {
		l.MaxHostCalls = DefaultMaxHostCalls
	}
	if l.MaxHostCallBytes == 0 {
		l.MaxHostCallBytes = DefaultMaxHostCallBytes
	}
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if l.MaxResultBytes == 0 {
		l.MaxResultBytes = DefaultMaxResultBytes
	}
	if l.MaxLogBytes == 0 {
		l.MaxLogBytes = DefaultMaxLogBytes
	}
	if l.Fuel == 0 {
		l.Fuel = DefaultFuel
	}
	if l.InitFuel == 0 {
		l.InitFuel = DefaultInitFuel
	}
	if l.MaxStackBytes == 0 {
		l.MaxStackBytes = DefaultMaxStackBytes
	}
	return l
}

func (l Limits) validate(maxPages uint32) error {
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
	// DisableMetering). Only modules that load are kept.
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
	// DisableMetering loads modules as they are, without the fuel and
	// stack instrumentation: Limits.Fuel, InitFuel and MaxStackBytes are
	// then not enforced, Result.FuelUsed is 0, and only the wall-clock
	// Timeout stops guest code, through wazero's close-on-context-done
	// (which costs 5 to 10 times a loop-heavy invocation; a loop-free
	// call tree is not stopped at all, and deep recursion grows the
	// host's heap). It is for benchmarks and for modules the operator
	// trusts. See SECURITY.md.
	DisableMetering bool
	// NoDeadlineInterrupt, with DisableMetering, turns wazero's
	// close-on-context-done off as well: nothing then stops guest code,
	// and while it runs a stop-the-world garbage collection of the whole
	// process waits for it (compiled wasm has no Go safe points). For
	// benchmarks only. Metered guests never use close-on-context-done:
	// their deadline is checked at every fuel slice (FuelSlice), and this
	// field changes nothing for them. See
	// RATIONALE.md#why-fuel-slices-and-not-close-on-context-done.
	NoDeadlineInterrupt bool
}

func (c Config) withDefaults() Config {
	if c.MaxModuleBytes == 0 {
		c.MaxModuleBytes = DefaultMaxModuleBytes
	}
	if c.MaxMemoryPages == 0 {
		c.MaxMemoryPages = DefaultMaxMemoryPages
	}
	if c.MaxInstancesPerPool == 0 {
		c.MaxInstancesPerPool = DefaultMaxInstancesPerPool
	}
	if c.MaxIdlePerPool == 0 {
		c.MaxIdlePerPool = DefaultMaxIdlePerPool
	}
	if c.MaxIdlePerPool < 0 {
		c.MaxIdlePerPool = 0
	}
	if c.CacheModules == 0 {
		c.CacheModules = DefaultCacheModules
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
