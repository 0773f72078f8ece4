package runtime

import (
	"context"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/tetratelabs/wazero/api"
)

// idleSet is the runtime-wide list of warm (idle) instances, least recently
// used last, with their count and bytes: Config.MaxIdleInstances,
// MaxIdleBytes and IdleTTL are enforced on it, across every pool. Its mutex
// also guards every pool's idle slice and closed flag. Nothing in it
// allocates: the list is intrusive (instance.newer, instance.older) and the
// instances to close are gathered in a fixed-size victimBatch.
// See RATIONALE.md#why-a-runtime-wide-budget-of-warm-instances.
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
func (s *idleSet) collect(b *victimBatch, now int64, cfg *Config) (more bool) {
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

func (s *idleSet) over(now int64, cfg *Config) bool {
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

// monoNow is time.Now read from the monotonic clock alone: its monotonic
// reading is exact, its wall reading is epoch's moved by as much (so it
// drifts from the wall clock if that is set). It serves deadlines and
// durations, which compare monotonic readings, at half the cost of time.Now
// (which reads both clocks; a clock read is dear on some virtual machines).
func monoNow() time.Time { return epoch.Add(time.Since(epoch)) }

// wallDeadline is the deadline d (a monoNow reading) with a true wall
// reading, for a context whose Deadline others may read as a wall time.
func wallDeadline(d time.Time) time.Time { return time.Now().Add(time.Until(d)) }

// monoNanos is nanotime at t, a monoNow or time.Now reading.
func monoNanos(t time.Time) int64 { return int64(t.Sub(epoch)) }

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
		more = r.idle.collect(&victims, now, &r.cfg)
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
// memory as allocated (capacity, not length), its tables, and what wazero
// keeps for its element and data segments (inst.segBytes, measured once:
// those only shrink).
func (inst *instance) footprint() uint64 {
	tables := inst.tableBytes
	if !inst.tablesFixed {
		tables = tableBytes(inst.mod)
	}
	return uint64(cap(inst.mem.buf)) + tables + inst.segBytes
}

// Sizes of what wazero keeps per instance: a table element or a passive
// element segment's item is a Reference (a uintptr); each data segment
// has a slice header in the instance (Go's linker emits tens of thousands
// of segments, 0.9 MiB per instance, which the instrumentation merges into
// a few hundred: see meter.MaxDataGap).
const (
	refBytes         = uint64(unsafe.Sizeof(uintptr(0)))
	sliceHeaderBytes = uint64(unsafe.Sizeof([]byte(nil)))
)

// instanceFields locates, in wazero's module instance
// (wasm.ModuleInstance), the tables and their elements (Tables
// []*TableInstance, each with References []Reference), the passive element
// segments (ElementInstances [][]Reference) and the data segments
// (DataInstances [][]byte). wazero exposes none of their sizes, and a
// table may have grown (table.grow) since instantiation; reading lengths
// by reflection allocates nothing. If wazero's layout changed, ok is false:
// TestTableBytes then fails, and they count as nothing.
var instanceFields struct {
	once                           sync.Once
	ok                             bool
	instanceT                      reflect.Type
	tables, refs, max, elems, data int // field indexes
}

// instanceValue returns mod's wazero module instance, if its layout is
// the one instanceFields located.
func instanceValue(mod api.Module) (reflect.Value, bool) {
	v := reflect.ValueOf(mod)
	f := &instanceFields
	f.once.Do(func() { f.ok = locateInstanceFields(v.Type()) })
	if !f.ok || v.Type() != f.instanceT || v.IsNil() {
		return reflect.Value{}, false
	}
	return v.Elem(), true
}

// fixedTables reports whether none of mod's tables can grow (each has a
// maximum, and is at it; a module without tables too): what they hold is
// then measured once, at instantiation (tableBytes), rather than at every
// release. Go's, Rust's and C's linkers give their table a maximum equal to
// its size.
func fixedTables(mod api.Module) bool {
	m, ok := instanceValue(mod)
	if !ok {
		return false
	}
	tables := m.Field(instanceFields.tables)
	for i := range tables.Len() {
		t := tables.Index(i)
		if t.IsNil() {
			continue
		}
		t = t.Elem()
		max := t.Field(instanceFields.max)
		if max.IsNil() || max.Elem().Uint() > uint64(t.Field(instanceFields.refs).Len()) {
			return false
		}
	}
	return true
}

// tableBytes returns what mod's tables hold: they may grow at any time
// (table.grow) unless fixedTables, and are few (the reader allows 16).
func tableBytes(mod api.Module) uint64 {
	m, ok := instanceValue(mod)
	if !ok {
		return 0
	}
	return refBytes * sumLens(m.Field(instanceFields.tables), func(t reflect.Value) int {
		if t.IsNil() {
			return 0
		}
		return t.Elem().Field(instanceFields.refs).Len()
	})
}

// sumLens sums lenOf over the elements of list, a slice.
func sumLens(list reflect.Value, lenOf func(reflect.Value) int) uint64 {
	var n uint64
	for i := range list.Len() {
		n += uint64(lenOf(list.Index(i)))
	}
	return n
}

// segmentBytes returns what wazero keeps for mod's passive element
// segments and its data segments' headers; elem.drop and data.drop only
// make it smaller, so it is measured once, at instantiation (there may be
// tens of thousands).
func segmentBytes(mod api.Module) uint64 {
	m, ok := instanceValue(mod)
	if !ok {
		return 0
	}
	elems := m.Field(instanceFields.elems)
	headers := uint64(elems.Len() + m.Field(instanceFields.data).Len())
	return refBytes*sumLens(elems, reflect.Value.Len) + headers*sliceHeaderBytes
}

func locateInstanceFields(t reflect.Type) bool {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return false
	}
	field := func(st reflect.Type, name string, kinds ...reflect.Kind) (int, reflect.Type, bool) {
		sf, ok := st.FieldByName(name)
		if !ok || len(sf.Index) != 1 {
			return 0, nil, false
		}
		ft := sf.Type
		for i, k := range kinds {
			if ft.Kind() != k {
				return 0, nil, false
			}
			if i < len(kinds)-1 {
				ft = ft.Elem()
			}
		}
		return sf.Index[0], sf.Type, true
	}
	f := &instanceFields
	var tablesT reflect.Type
	var ok1, ok2, ok3, ok4 bool
	f.tables, tablesT, ok1 = field(t.Elem(), "Tables", reflect.Slice, reflect.Pointer, reflect.Struct)
	if !ok1 {
		return false
	}
	f.refs, _, ok2 = field(tablesT.Elem().Elem(), "References", reflect.Slice, reflect.Uintptr)
	var ok5 bool
	f.max, _, ok5 = field(tablesT.Elem().Elem(), "Max", reflect.Pointer, reflect.Uint32)
	f.elems, _, ok3 = field(t.Elem(), "ElementInstances", reflect.Slice, reflect.Slice, reflect.Uintptr)
	f.data, _, ok4 = field(t.Elem(), "DataInstances", reflect.Slice, reflect.Slice, reflect.Uint8)
	f.instanceT = t
	return ok2 && ok3 && ok4 && ok5
}
