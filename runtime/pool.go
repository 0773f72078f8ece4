package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime/internal/meter"
)

// poolKey identifies a pool. Instances are never shared between tenants,
// nor between hooks (bindings) of one tenant, nor between copies of a
// module compiled apart; all instances of a pool were created with the same
// memory limit. See RATIONALE.md#why-pools-per-module-tenant.
type poolKey struct {
	// c is the compiled module the pool's instances come from: the pools
	// of a compiled module are closed when the last Module holding it is,
	// and never those of another copy of the same bytes.
	c *compiled
	// tenant and hook are the host's names for whom the instances serve
	// (Request.Tenant and Request.Hook, never anything the module says).
	tenant, hook string
	memoryPages  uint32
}

// pool holds the warm instances of one module for one (tenant, hook).
type pool struct {
	key  poolKey
	c    *compiled
	sem  chan struct{} // one token per instance in use
	live atomic.Int64  // instances alive (idle or busy), for tests

	// Guarded by the runtime's idle.mu.
	idle   []*instance // oldest first
	closed bool
	// used is when the pool last handed out or took back an instance, for
	// the janitor's removal of empty pools.
	used int64
}

// instance is one instantiated module. It serves one invocation at a time.
type instance struct {
	p           *pool
	mod         api.Module
	handle      api.Function
	mem         *limitedMemory
	invocations int

	// stack is the stack budget the instrumentation injected (see
	// runtime/internal/meter); nil when the runtime does not meter. The
	// fuel global is in run.
	stack api.MutableGlobal

	// run is the state of the guest code running on the instance, and ctx
	// the context its calls are made with, which carries run to the host
	// functions. Both are made once and reused.
	run guestRun
	ctx context.Context

	// The state of the invocation running on the instance, reused by the
	// next one: an invocation allocates none of it. Touched only by the
	// goroutine that holds the instance and the host functions it runs.
	inv       invocation
	out       []byte    // the copy of the decision document
	stackSlot [1]uint64 // the handle's parameter, then its result

	// While idle (guarded by the runtime's idle.mu): its place in the
	// runtime-wide least-recently-used list, when it became idle
	// (monotonic nanoseconds, see nanotime) and the bytes it was counted for.
	newer, older *instance
	idleSince    int64
	cost         uint64
	// segBytes is what wazero keeps for the instance's element and data
	// segments (see footprint).
	segBytes uint64
	// tableBytes is what the instance's tables hold, measured once when
	// tablesFixed (fixedTables: none can grow); else at every release.
	tableBytes  uint64
	tablesFixed bool
}

// metered reports whether the instance was instrumented.
func (inst *instance) metered() bool { return inst.run.fuel != nil }

// setStack sets the stack budget before guest code runs.
func (inst *instance) setStack(stack int) {
	if inst.metered() {
		inst.stack.Set(uint64(uint32(stack)))
	}
}

// fuelUsed returns the fuel used since the budget was set: the whole
// budget when it ran out.
func (inst *instance) fuelUsed(budget uint64) uint64 {
	if !inst.metered() {
		return 0
	}
	left := inst.run.fuelLeft()
	if left < 0 {
		return budget
	}
	return budget - min(uint64(left), budget)
}

// exhausted returns the failure of guest code that ran out of fuel or of
// stack, or nil. A trap, or a return, with fuel below zero is fuel
// exhaustion (the instrumentation checks the fuel at loop headers and
// function entries, so it may end a little below zero without a trap); a
// trap with the stack budget below zero is a stack overflow, as is the
// engine's own stack overflow. See RATIONALE.md#why-fuel-and-how-much.
func (inst *instance) exhausted(lim Limits, fuel uint64, err error) *abi.Failure {
	if inst.metered() {
		if int32(uint32(inst.stack.Get())) < 0 {
			return stackFailure(lim)
		}
		if inst.run.fuelLeft() < 0 {
			return &abi.Failure{Code: abi.FailFuelExhausted, Message: fmt.Sprintf("the hook used up its fuel budget of %d", fuel)}
		}
	}
	if err != nil && isStackOverflow(err) {
		return stackFailure(lim)
	}
	return nil
}

func stackFailure(lim Limits) *abi.Failure {
	return &abi.Failure{Code: abi.FailStackExhausted, Message: fmt.Sprintf("the hook's call stack went past its limit of %d bytes", lim.MaxStackBytes)}
}

// isStackOverflow reports whether err is the engine's own stack overflow
// (wazero's compiler or interpreter), which the instrumentation's limit
// normally preempts.
func isStackOverflow(err error) bool {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSuffix(msg, " (recovered by wazero)")
	return msg == "stack overflow" || msg == "wasm error: stack overflow"
}

func (r *Runtime) pool(key poolKey) (*pool, error) {
	r.mu.RLock()
	p, ok := r.pools[key]
	closed := r.closed
	r.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if ok {
		return p, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	p, ok = r.pools[key]
	if !ok {
		p = &pool{key: key, c: key.c, sem: make(chan struct{}, r.cfg.MaxInstancesPerPool), used: nanotime()}
		r.pools[key] = p
	}
	return p, nil
}

// closePools closes the pools of c, after the last Module holding c was
// closed. Other copies of the same bytes (compiled apart after the compile
// cache evicted c) have pools of their own and are not touched.
func (r *Runtime) closePools(ctx context.Context, c *compiled) {
	r.mu.Lock()
	var victims []*pool
	for k, p := range r.pools {
		if k.c == c {
			victims = append(victims, p)
			delete(r.pools, k)
		}
	}
	r.mu.Unlock()
	for _, p := range victims {
		r.closePool(ctx, p)
	}
}

// errPoolGone is acquire's answer when the pool was closed or pruned
// between its lookup and the acquire: Invoke looks the pool up again.
var errPoolGone = errors.New("runtime: pool gone")

// acquire returns an idle instance or creates one, waiting while every
// instance of the pool is busy. It honours ctx. now is nanotime at the call;
// slow reports that the call took more than a few lookups (it waited for an
// instance, closed expired ones or made one), so that now is stale.
func (r *Runtime) acquire(ctx context.Context, p *pool, lim Limits, now int64) (inst *instance, slow bool, err error) {
	select {
	case p.sem <- struct{}{}:
	default:
		select { // every instance busy: wait, and read the clock afresh
		case p.sem <- struct{}{}:
			now, slow = nanotime(), true
		case <-ctx.Done():
			return nil, true, fmt.Errorf("%w: %w", ErrPoolExhausted, ctx.Err())
		}
	}
	var victims victimBatch
	r.idle.mu.Lock()
	if p.closed {
		r.idle.mu.Unlock()
		<-p.sem
		return nil, slow, errPoolGone
	}
	p.used = now
	if n := len(p.idle); n > 0 {
		inst = p.idle[n-1] // the most recently used: its memory is the warmest
		r.idle.remove(inst)
	}
	r.idle.collect(&victims, now, &r.cfg)
	r.idle.mu.Unlock()
	if victims.n > 0 {
		victims.close(ctx)
		slow = true
	}
	if inst != nil {
		return inst, slow, nil
	}
	if inst, err = r.instantiate(ctx, p, lim); err != nil {
		<-p.sem
		return nil, true, err
	}
	return inst, true, nil
}

// release returns inst to the pool, or closes it when it must not be reused
// or the pool or the runtime keeps enough idle instances; it reports whether
// inst was kept. Keeping it may close the least recently used idle instances
// of any pool, to stay within Config.MaxIdleInstances and MaxIdleBytes. now
// is nanotime at the call.
func (r *Runtime) release(ctx context.Context, p *pool, inst *instance, reuse bool, now int64) (kept bool) {
	defer func() { <-p.sem }()
	if reuse {
		cost := inst.footprint()
		var victims victimBatch
		r.idle.mu.Lock()
		p.used = now
		if !p.closed && len(p.idle) < r.cfg.MaxIdlePerPool && r.cfg.MaxIdleInstances > 0 && cost <= uint64(r.cfg.MaxIdleBytes) {
			inst.idleSince, inst.cost = now, cost
			r.idle.add(inst)
			kept = true
		}
		more := r.idle.collect(&victims, now, &r.cfg)
		r.idle.mu.Unlock()
		victims.close(ctx)
		for more { // a large instance displaced many small ones
			r.idle.mu.Lock()
			more = r.idle.collect(&victims, now, &r.cfg)
			r.idle.mu.Unlock()
			victims.close(ctx)
		}
		if kept {
			return true
		}
	}
	p.discard(ctx, inst)
	return false
}

func (p *pool) discard(ctx context.Context, inst *instance) {
	_ = inst.mod.Close(ctx)
	p.live.Add(-1)
}

// closePool marks p closed and closes its idle instances; busy ones are
// closed when they are released.
func (r *Runtime) closePool(ctx context.Context, p *pool) {
	r.idle.mu.Lock()
	p.closed = true
	idle := append([]*instance(nil), p.idle...)
	for _, inst := range idle {
		r.idle.remove(inst)
	}
	r.idle.mu.Unlock()
	for _, inst := range idle {
		p.discard(ctx, inst)
	}
}

// instantiate creates an instance and runs its initialisers under the init
// timeout. Host calls made from _initialize are answered NOT_IN_INVOCATION.
func (r *Runtime) instantiate(ctx context.Context, p *pool, lim Limits) (*instance, error) {
	// Reserve what the instances of this module used after their
	// initialisation, so that _initialize grows the memory in place.
	mem := &limitedMemory{limit: uint64(lim.MemoryPages) * pageSize, reserve: uint64(p.c.initPages.Load()) * pageSize}
	mod, err := r.wr.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem), p.c.code, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, r.initFailure(ctx, err, mem, nil)
	}
	p.live.Add(1)
	inst := &instance{p: p, mod: mod, mem: mem, handle: mod.ExportedFunction(abi.HandleExport), segBytes: segmentBytes(mod)}
	if inst.tablesFixed = fixedTables(mod); inst.tablesFixed {
		inst.tableBytes = tableBytes(mod)
	}
	inst.ctx = context.WithValue(context.Background(), runKey{}, &inst.run)
	if !r.cfg.disableMetering {
		fuel, ok1 := mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal)
		stack, ok2 := mod.ExportedGlobal(meter.StackExport).(api.MutableGlobal)
		if !ok1 || !ok2 { // the instrumentation guarantees them; be defensive
			p.discard(ctx, inst)
			return nil, &abi.Failure{Code: abi.FailInit, Message: "the instrumented module lacks its fuel and stack globals"}
		}
		inst.run.fuel, inst.run.sliced, inst.stack = fuel, p.c.sliced, stack
	}
	// One budget and one deadline for all initialisation: the start
	// function (which the instrumentation exports rather than letting
	// wazero run it unmetered at instantiation) and _initialize.
	st := &initState{log: logBuffer{limit: lim.MaxLogBytes}}
	inst.run.begin(ctx, monoNow().Add(lim.InitTimeout), lim.InitFuel, nil, st)
	inst.setStack(lim.MaxStackBytes)
	cctx, cancel := r.callContext(inst)
	defer cancel()
	defer inst.run.end()
	for _, name := range [...]string{meter.StartExport, abi.InitializeExport} {
		fn := mod.ExportedFunction(name)
		if fn == nil {
			continue
		}
		_, err := fn.Call(cctx)
		if f := inst.exhausted(lim, lim.InitFuel, err); f != nil {
			p.discard(ctx, inst)
			return nil, initFailure(&abi.Failure{Code: f.Code, Message: "during initialisation: " + f.Message}, st)
		}
		if err == nil {
			if f := inst.run.interrupted(); f != nil {
				err = f // see Invoke: nothing that ends after its deadline succeeds
			}
		}
		if err != nil {
			p.discard(ctx, inst)
			return nil, r.initFailure(cctx, err, mem, st)
		}
	}
	if inst.handle == nil { // validation guarantees it; be defensive
		p.discard(ctx, inst)
		return nil, &abi.Failure{Code: abi.FailInit, Message: "module does not export " + abi.HandleExport}
	}
	if pages := mem.pages(); pages > p.c.initPages.Load() {
		p.c.initPages.Store(pages) // a racing smaller store only reserves less
	}
	return inst, nil
}

// callContext returns the context to call inst's guest code with, after
// inst.run.begin. Metered guests reach the host at every fuel slice, where
// the deadline and the caller's context are checked (yieldFuel): the
// instance's own context serves, and nothing is allocated. Unmetered guests
// need wazero's close-on-context-done, which watches a context with the
// deadline.
func (r *Runtime) callContext(inst *instance) (context.Context, context.CancelFunc) {
	if !r.interrupt {
		return inst.ctx, noCancel
	}
	ctx, cancel := context.WithDeadline(inst.run.parent, wallDeadline(inst.run.deadline))
	return context.WithValue(ctx, runKey{}, &inst.run), cancel
}

func noCancel() {}

func (r *Runtime) initFailure(ctx context.Context, err error, mem *limitedMemory, st *initState) error {
	f := classify(ctx, err, mem, nil)
	if st == nil {
		st = &initState{}
	}
	if f == nil {
		return err
	}
	out := &abi.Failure{Code: abi.FailInit, Message: string(f.Code) + ": " + f.Message}
	if f.Code == abi.FailTimeout || f.Code == abi.FailMemory {
		out.Code = f.Code
		out.Message = "during initialisation: " + f.Message
	}
	return initFailure(out, st)
}

// initFailure adds the tail of what the guest printed to f.
func initFailure(f *abi.Failure, st *initState) *abi.Failure {
	if tail := st.tail(); tail != "" {
		f.Message += " (output: " + tail + ")"
	}
	return f
}
