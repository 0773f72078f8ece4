package runtime

// Stats is a snapshot of what a Runtime holds. It is a plain value.
type Stats struct {
	// Modules counts the compiled modules in the in-memory cache.
	Modules int `json:"modules"`
	// Pools counts the instance pools, one per (compiled module, tenant,
	// hook, memory limit) invoked since the module was loaded; a pool left
	// empty and unused for Config.IdleTTL is dropped.
	Pools int `json:"pools"`
	// Instances counts the live instances of those pools, idle or busy.
	Instances int `json:"instances"`
	// Idle counts the warm instances waiting in those pools. Instances -
	// Idle are serving an invocation (or being created or discarded).
	Idle int `json:"idle"`
	// IdleBytes is what the idle instances are counted for against
	// Config.MaxIdleBytes: their linear memories as reserved and their
	// tables.
	IdleBytes uint64 `json:"idle_bytes"`
}

// Stats returns a snapshot of the runtime's modules, pools and instances, for
// monitoring and for tests that check nothing leaks (after every invocation
// has returned, Instances equals Idle). A closed Runtime reports zero pools.
// It is safe for concurrent use with everything else.
func (r *Runtime) Stats() Stats {
	r.mu.Lock()
	pools := make([]*pool, 0, len(r.pools))
	for _, p := range r.pools {
		pools = append(pools, p)
	}
	r.mu.Unlock()
	s := Stats{Modules: r.cache.Len(), Pools: len(pools)}
	r.idle.mu.Lock()
	for _, p := range pools {
		s.Idle += len(p.idle)
	}
	s.IdleBytes = r.idle.bytes
	r.idle.mu.Unlock()
	for _, p := range pools {
		s.Instances += int(p.live.Load())
	}
	return s
}
