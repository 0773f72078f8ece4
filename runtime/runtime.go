package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime/internal/meter"
)

// HostCaller serves the host calls of a hook. The capability runner
// implements it; the runtime only moves bytes in and out of guest memory and
// enforces the per-invocation quotas. HostCall must honour ctx and must be
// safe for concurrent use.
type HostCaller interface {
	HostCall(ctx context.Context, call *abi.Call) abi.Reply
}

// Runtime loads hooks and runs them. It is safe for concurrent use by
// multiple goroutines.
type Runtime struct {
	cfg Config
	// interrupt reports whether wazero's close-on-context-done is on:
	// only for unmetered guests (see New).
	interrupt bool
	wr        wazero.Runtime
	cache     *lru.Cache[string, *compiled] // by sha256 of the module bytes
	// cacheBytes is the sum of the hostBytes of the modules in cache.
	cacheBytes atomic.Int64
	logger     *slog.Logger

	mu     sync.RWMutex // guards closed, pools
	closed bool
	pools  map[poolKey]*pool

	// idle is every pool's warm instances, least recently used last.
	idle idleSet
	// stopJanitor and janitorDone stop and wait for the janitor (nil
	// without an IdleTTL).
	stopJanitor, janitorDone chan struct{}
}

// New returns a Runtime configured by cfg. Close it when done.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	cfg = cfg.withDefaults()
	if cfg.MaxMemoryPages > 65536 {
		return nil, fmt.Errorf("runtime: MaxMemoryPages %d is over 65536", cfg.MaxMemoryPages)
	}
	if err := cfg.Limits.WithDefaults().Validate(cfg.MaxMemoryPages); err != nil {
		return nil, err
	}
	var wc wazero.RuntimeConfig
	if cfg.Interpreter {
		wc = wazero.NewRuntimeConfigInterpreter()
	} else {
		wc = wazero.NewRuntimeConfig()
	}
	// Metered guests are stopped at their deadline by the yield of every
	// fuel slice (slices.go); wazero's close-on-context-done, which calls
	// out at every loop back-edge and costs 5 to 10 times a loop-heavy
	// invocation, is only for unmetered ones. See
	// RATIONALE.md#why-fuel-slices-and-not-close-on-context-done.
	interrupt := cfg.disableMetering && !cfg.noDeadlineInterrupt
	wc = wc.WithCloseOnContextDone(interrupt).
		WithMemoryLimitPages(cfg.MaxMemoryPages).
		WithCoreFeatures(api.CoreFeaturesV2)
	if cfg.CacheDir != "" {
		// wazero's cache key ignores close-on-context-done, yet the code
		// differs (the interrupt checks are compiled in): runtimes with
		// different settings sharing a directory would load each other's
		// code, and one that wants the interrupt could run code without it.
		sub := "nointerrupt"
		if interrupt {
			sub = "interrupt"
		}
		// The cache only saves time: a directory wazero cannot write to
		// (read-only, a file in the way) would make every compile fail,
		// so it is left out with a warning instead.
		dir := filepath.Join(cfg.CacheDir, sub)
		if err := probeCacheDir(dir); err != nil {
			cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "runtime: compilation cache off",
				slog.String("dir", dir), slog.String("error", err.Error()))
		} else if cache, err := wazero.NewCompilationCacheWithDir(dir); err != nil {
			cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "runtime: compilation cache off",
				slog.String("dir", dir), slog.String("error", err.Error()))
		} else {
			wc = wc.WithCompilationCache(cache)
		}
	}
	r := &Runtime{
		cfg:       cfg,
		interrupt: interrupt,
		wr:        wazero.NewRuntimeWithConfig(ctx, wc),
		logger:    cfg.Logger,
		pools:     make(map[poolKey]*pool),
	}
	cache, err := lru.NewWithEvict(cfg.CacheModules, func(_ string, c *compiled) {
		r.cacheBytes.Add(-c.hostBytes)
		c.evict()
	})
	if err != nil {
		return nil, err
	}
	r.cache = cache
	if err := r.instantiateHostModules(ctx); err != nil {
		_ = r.wr.Close(ctx)
		return nil, err
	}
	if cfg.IdleTTL > 0 {
		r.stopJanitor, r.janitorDone = make(chan struct{}), make(chan struct{})
		go r.janitor(r.stopJanitor, r.janitorDone)
	}
	return r, nil
}

// probeCacheDir makes dir if needed and checks that a file can be written
// in it.
func probeCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// Close closes every pool and compiled module. Invocations in flight fail.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	pools := r.pools
	r.pools = nil
	r.mu.Unlock()
	if r.stopJanitor != nil {
		close(r.stopJanitor)
		<-r.janitorDone
	}
	for _, p := range pools {
		r.closePool(ctx, p)
	}
	r.cache.Purge()
	return r.wr.Close(ctx)
}

func (r *Runtime) instantiateHostModules(ctx context.Context) error {
	hb := r.wr.NewHostModuleBuilder(abi.ImportModule)
	hb.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostCall), []api.ValueType{
			api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32,
			api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32,
		}, []api.ValueType{api.ValueTypeI64}).
		WithParameterNames("name_ptr", "name_len", "in_ptr", "in_len", "out_ptr", "out_cap").
		Export(abi.HostCallImport)
	if _, err := hb.Instantiate(ctx); err != nil {
		return fmt.Errorf("runtime: instantiating %s: %w", abi.ImportModule, err)
	}
	wb := r.wr.NewHostModuleBuilder(abi.WASIModule)
	defineWASI(wb)
	if _, err := wb.Instantiate(ctx); err != nil {
		return fmt.Errorf("runtime: instantiating %s: %w", abi.WASIModule, err)
	}
	yb := r.wr.NewHostModuleBuilder(meter.YieldModule)
	defineYield(yb)
	if _, err := yb.Instantiate(ctx); err != nil {
		return fmt.Errorf("runtime: instantiating %s: %w", meter.YieldModule, err)
	}
	return nil
}

// compiled is one compiled module in the cache, shared by every Module
// loaded from the same bytes (whoever uploaded them).
type compiled struct {
	digest string
	code   wazero.CompiledModule
	info   *ModuleInfo
	// requested is the manifest's capabilities, shared read-only by every
	// invocation's abi.Caller.
	requested []string
	// sliced reports whether the module imports the instrumentation's
	// yield, so that its fuel can be handed over in slices.
	sliced bool
	// hostBytes estimates the host memory the compiled module holds
	// (compiledHostBytes), what it counts for in Config.CacheBytes.
	hostBytes int64
	// initPages is the largest memory an instance had after its
	// initialisation: what the next instances reserve up front.
	initPages atomic.Uint32

	mu      sync.Mutex // guards refs, evicted, closed
	refs    int
	evicted bool
	closed  bool
}

func (c *compiled) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.refs++
	return true
}

// release drops one reference and reports whether it was the last.
func (c *compiled) release() (last bool) {
	c.mu.Lock()
	c.refs--
	last = c.refs == 0
	closeNow := last && c.evicted && !c.closed
	if closeNow {
		c.closed = true
	}
	c.mu.Unlock()
	if closeNow {
		_ = c.code.Close(context.Background())
	}
	return last
}

func (c *compiled) evict() {
	c.mu.Lock()
	c.evicted = true
	closeNow := c.refs == 0 && !c.closed
	if closeNow {
		c.closed = true
	}
	c.mu.Unlock()
	if closeNow {
		_ = c.code.Close(context.Background())
	}
}

// Module is a validated, compiled hook. It is immutable and safe for
// concurrent use by multiple goroutines. Close it when it is no longer bound;
// the compiled code stays cached until evicted.
type Module struct {
	rt   *Runtime
	c    *compiled
	once sync.Once
}

// Digest returns the hex sha256 of the module's bytes.
func (m *Module) Digest() string { return m.c.digest }

// Info returns what validation found in the module.
func (m *Module) Info() *ModuleInfo { return m.c.info }

// Manifest returns the module's manifest, or nil if it has none.
func (m *Module) Manifest() *abi.Manifest { return m.c.info.Manifest }

// Close releases the module. When no other Module sharing its compiled code
// is open, its warm instances are closed too; those of another copy of the
// same bytes (compiled again after the compile cache evicted this one) are
// not touched. The compiled code stays cached until evicted. Invoking a
// closed Module is a programming error.
func (m *Module) Close(ctx context.Context) error {
	m.once.Do(func() {
		if m.c.release() {
			m.rt.closePools(ctx, m.c)
		}
	})
	return nil
}

// Digest returns the hex sha256 of b, the key modules are cached by.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Load validates wasm (see Validate), instruments it with fuel and a stack
// limiter (unless benchmode.Switches.DisableMetering), compiles it, and returns the
// Module. Identical bytes are instrumented and compiled once and shared; with
// Config.CacheDir the validation's result, the instrumented bytes and the
// compiled code also survive the process.
func (r *Runtime) Load(ctx context.Context, wasm []byte) (*Module, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if len(wasm) > r.cfg.MaxModuleBytes { // before hashing an oversized upload
		return nil, &LimitError{Limit: "module_bytes", Max: uint64(r.cfg.MaxModuleBytes), Got: uint64(len(wasm))}
	}
	digest := Digest(wasm)
	for {
		if c, ok := r.cache.Get(digest); ok {
			if c.acquire() {
				return &Module{rt: r, c: c}, nil
			}
			r.cache.Remove(digest)
		}
		// Validated and instrumented, or read from the module cache.
		p, err := r.prepareModule(ctx, wasm, digest)
		if err != nil {
			return nil, err
		}
		info := p.info
		bin, hostBytes, err := forCompiler(p.bin)
		if err != nil {
			return nil, err
		}
		code, err := r.wr.CompileModule(ctx, bin)
		if err != nil {
			return nil, &ValidationError{Reason: "compile failed", Err: err}
		}
		r.keepModule(ctx, p)
		c := &compiled{digest: digest, code: code, info: info, refs: 1, sliced: importsYield(code), hostBytes: hostBytes}
		if info.Manifest != nil {
			c.requested = slices.Clip(append([]string(nil), info.Manifest.Capabilities...))
		}
		r.cacheBytes.Add(hostBytes) // before the add: an eviction it causes subtracts
		if prev, ok, _ := r.cache.PeekOrAdd(digest, c); ok {
			// Another goroutine compiled the same bytes first.
			r.cacheBytes.Add(-hostBytes)
			_ = code.Close(ctx)
			if prev.acquire() {
				return &Module{rt: r, c: prev}, nil
			}
			continue
		}
		// Bounded by bytes as well as by count: evict the least recently
		// used until the estimate fits (the newest is kept even alone).
		for r.cacheBytes.Load() > r.cfg.CacheBytes && r.cache.Len() > 1 {
			if _, _, ok := r.cache.RemoveOldest(); !ok {
				break
			}
		}
		return &Module{rt: r, c: c}, nil
	}
}
