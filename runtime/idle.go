package runtime

import (
	"context"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/tetratelabs/wazero/api"
)

// See RATIONALE.md#why-a-runtime-wide-budget-of-warm-instances.
//
// idleSet is the runtime-wide list of warm (idle) instances, least recently
// used last, with their count and bytes: Config.MaxIdleInstances,
// MaxIdleBytes and IdleTTL are enforced on it, across every pool. Its mutex
// also guards every pool's idle slice and closed flag. Nothing in it
// allocates: the list is intrusive (instance.newer, instance.older) and the
// instances to close are gathered in a fixed-size victimBatch.
type idleSet struct {
	mu             sync.Mutex
	newest, oldest *instance
	count          int
	bytes          uint64
}

// add makes inst the most recently used idle instance of its pool and of
// the runtime. inst.cost and inst.idleSince are set.
func (s *idleSet) add(inst *instance) {
	inst.p.idle = append(inst.p.idle, inst)
	inst.older, inst.newer = s.newest, nil
	if s.newest != nil {
		s.newest.newer = inst
	} else {
		s.oldest = inst
	}
	s.newest = inst
	s.count++
	s.bytes += inst.cost
}

// remove takes the idle instance inst out of its pool and out of the list.
func (s *idleSet) remove(inst *instance) {
	idle := inst.p.idle
	for i := len(idle) - 1; i >= 0; i-- {
		if idle[i] == inst {
			copy(idle[i:], idle[i+1:])
			idle[len(idle)-1] = nil
			inst.p.idle = idle[:len(idle)-1]
			break
		}
	}
	if inst.newer != nil {
		inst.newer.older = inst.older
	} else {
		s.newest = inst.older
	}
	if inst.older != nil {
		inst.older.newer = inst.newer
	} else {
		s.oldest = inst.newer
	}
	inst.newer, inst.older = nil, nil
	s.count--
	s.bytes -= inst.cost
}

// collect moves into b the least recently used idle instances while the set
// is over cfg's bounds or its oldest instance has waited past cfg.IdleTTL.
// It reports whether more must go once b has been closed.
func (s *idleSet) collect(b *victimBatch, now int64, cfg Config) (more bool) {
	for s.oldest != nil && s.over(now, cfg) {
		if b.n == len(b.insts) {
			return true
		}
		inst := s.oldest
		s.remove(inst)
		b.insts[b.n] = inst
		b.n++
	}
	return false
}

func (s *idleSet) over(now int64, cfg Config) bool {
	return s.count > cfg.MaxIdleInstances || s.bytes > uint64(cfg.MaxIdleBytes) ||
		(cfg.IdleTTL > 0 && now-s.oldest.idleSince > int64(cfg.IdleTTL))
}

// victimBatch holds idle instances taken out of the set, to be closed
// outside its lock.
type victimBatch struct {
	insts [16]*instance
	n     int
}

func (b *victimBatch) close(ctx context.Context) {
	for i := range b.n {
		inst := b.insts[i]
		b.insts[i] = nil
		inst.p.discard(ctx, inst)
	}
	b.n = 0
}

// epoch anchors nanotime.
var epoch = time.Now()

// nanotime returns monotonic nanoseconds since the process started.
func nanotime() int64 { return int64(time.Since(epoch)) }

// janitor closes the idle instances that waited past cfg.IdleTTL, and
// drops the pools that have been empty and unused that long, until stop is
// closed. It is the runtime's one background goroutine; acquire and release
// also expire what they find, so the janitor only matters for a runtime
// that went quiet.
func (r *Runtime) janitor(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	every := min(max(r.cfg.IdleTTL/2, 5*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		r.expire(context.Background())
	}
}

// expire closes the idle instances past their TTL and drops the pools
// that are empty and were last used more than a TTL ago.
func (r *Runtime) expire(ctx context.Context) {
	now := nanotime()
	var victims victimBatch
	for more := true; more; {
		r.idle.mu.Lock()
		more = r.idle.collect(&victims, now, r.cfg)
		r.idle.mu.Unlock()
		victims.close(ctx)
	}
	ttl := int64(r.cfg.IdleTTL)
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, p := range r.pools {
		r.idle.mu.Lock()
		// No idle instance and no token taken: nothing is alive. A caller
		// that looked the pool up and takes a token later finds it closed
		// and looks again (errPoolGone).
		if len(p.idle) == 0 && len(p.sem) == 0 && now-p.used > ttl {
			p.closed = true
			delete(r.pools, k)
		}
		r.idle.mu.Unlock()
	}
}

// footprint returns the bytes an idle instance is counted for: its linear
// memory as allocated (capacity, not length) and its tables.
func (inst *instance) footprint() uint64 {
	return uint64(cap(inst.mem.buf)) + tableBytes(inst.mod)
}

// tableElemBytes is what wazero keeps per table element: one Reference, a
// uintptr.
const tableElemBytes = uint64(unsafe.Sizeof(uintptr(0)))

// tableFields locates, in wazero's module instance, the tables and their
// elements (wasm.ModuleInstance.Tables []*wasm.TableInstance, each with
// References []wasm.Reference). wazero exposes no table sizes, and a table
// may have grown (table.grow) since instantiation; reading the lengths by
// reflection costs no allocation. tablesOK is false if wazero's layout
// changed: TestTableBytes then fails, and tables count as nothing.
var tableFields struct {
	once      sync.Once
	ok        bool
	tables    int // index of Tables in the module instance
	refs      int // index of References in a table instance
	instanceT reflect.Type
}

func tableBytes(mod api.Module) uint64 {
	v := reflect.ValueOf(mod)
	tf := &tableFields
	tf.once.Do(func() { tf.ok = locateTables(v.Type()) })
	if !tf.ok || v.Type() != tf.instanceT || v.IsNil() {
		return 0
	}
	tables := v.Elem().Field(tf.tables)
	var n uint64
	for i := range tables.Len() {
		t := tables.Index(i)
		if t.IsNil() {
			continue
		}
		n += uint64(t.Elem().Field(tf.refs).Len())
	}
	return n * tableElemBytes
}

func locateTables(t reflect.Type) bool {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return false
	}
	f, ok := t.Elem().FieldByName("Tables")
	if !ok || f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() != reflect.Pointer || f.Type.Elem().Elem().Kind() != reflect.Struct {
		return false
	}
	r, ok := f.Type.Elem().Elem().FieldByName("References")
	if !ok || r.Type.Kind() != reflect.Slice || r.Type.Elem().Size() != uintptr(tableElemBytes) || len(f.Index) != 1 || len(r.Index) != 1 {
		return false
	}
	tableFields.tables, tableFields.refs, tableFields.instanceT = f.Index[0], r.Index[0], t
	return true
}
