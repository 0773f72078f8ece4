package chain

import (
	"sync"
	"sync/atomic"
	"time"
)

// Breaker states, as the trace reports them.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// breaker is the circuit breaker of one binding for one tenant.
// See RATIONALE.md#why-a-circuit-breaker.
//
//	closed --Failures failures in a row--> open (for the backoff)
//	open --backoff elapsed, next run--> half_open (that one run is the trial;
//	                                     others keep skipping)
//	half_open --trial succeeds--> closed (backoff reset)
//	half_open --trial fails--> open (backoff doubled, up to MaxBackoff)
type breaker struct {
	mu        sync.Mutex // guards the fields below
	state     string
	failures  int // consecutive failures while closed
	openUntil time.Time
	backoff   time.Duration // the current open period
	trial     bool          // a half-open trial is running
	// clean is state == closed, failures == 0 and no trial, set by every
	// change under mu (settle): allow and done answer the common case, a
	// healthy breaker and a run that succeeds, from it without the lock.
	clean atomic.Bool
}

func newBreaker() *breaker {
	b := &breaker{state: BreakerClosed}
	b.clean.Store(true)
	return b
}

// settle sets clean from the fields; b.mu is held.
func (b *breaker) settle() {
	b.clean.Store(b.state == BreakerClosed && b.failures == 0 && !b.trial)
}

// permit is the breaker's answer to one run.
type permit struct {
	run   bool      // run the hook
	trial bool      // this run is the half-open trial
	until time.Time // when skipped: when the breaker may let a trial through
	fails int       // when skipped: the failures that opened it
}

// breakers holds one breaker per (binding key, tenant). Breakers live on the
// Chain, so a reload that keeps a binding (same name, same module) keeps its
// breakers.
type breakers struct {
	mu sync.Mutex // guards m
	m  map[breakerKey]*breaker
	// gen counts the breakers dropped from m (under mu): a breaker a
	// binding remembers (lastBreaker) stands only while gen is what it
	// was when the binding looked it up.
	gen atomic.Uint64
}

// lastBreaker is a breaker a binding looked up, and for which tenant: a
// chain serves one tenant more often than not (the server builds one per
// tenant), so a step finds its breaker without the lock and the map
// lookup. It is good while breakers.gen is gen.
type lastBreaker struct {
	tenant string
	b      *breaker
	gen    uint64
}

// of returns the breaker of b for tenant, from b's remembered lookup when
// that is the same tenant's and no breaker was dropped since. A binding
// remembers the first tenant it looks up (again after a drop), not the
// last: a chain serving tenants in turn then looks the others up as before,
// rather than replacing the memory, an allocation, at every step.
func (bs *breakers) of(b *bound, tenant string) *breaker {
	gen := bs.gen.Load()
	last := b.lastBreaker.Load()
	if last != nil && last.gen == gen && last.tenant == tenant {
		return last.b
	}
	br := bs.get(b.key, tenant)
	if last == nil || last.gen != gen {
		b.lastBreaker.Store(&lastBreaker{tenant: tenant, b: br, gen: gen})
	}
	return br
}

type breakerKey struct{ binding, tenant string }

// maxIdleBreakers: past this many breakers, healthy ones are dropped.
const maxIdleBreakers = 4096

func (bs *breakers) get(binding, tenant string) *breaker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.m == nil {
		bs.m = map[breakerKey]*breaker{}
	}
	k := breakerKey{binding, tenant}
	b, ok := bs.m[k]
	if !ok {
		if len(bs.m) >= maxIdleBreakers {
			for k, b := range bs.m {
				if b.idle() {
					delete(bs.m, k)
					bs.gen.Add(1)
				}
			}
		}
		b = newBreaker()
		bs.m[k] = b
	}
	return b
}

// keep drops the breakers of bindings not in live (binding keys).
func (bs *breakers) keep(live map[string]bool) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for k := range bs.m {
		if !live[k.binding] {
			delete(bs.m, k)
			bs.gen.Add(1)
		}
	}
}

func (b *breaker) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == BreakerClosed && b.failures == 0
}

// allow decides whether a run may go ahead; now, the clock, is read only
// when the breaker is open.
func (b *breaker) allow(now func() time.Time, cfg BreakerConfig) permit {
	if cfg.Failures < 0 || b.clean.Load() {
		return permit{run: true}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.settle()
	switch b.state {
	case BreakerOpen:
		if now().Before(b.openUntil) {
			return permit{until: b.openUntil, fails: cfg.Failures}
		}
		b.state, b.trial = BreakerHalfOpen, true
		return permit{run: true, trial: true}
	case BreakerHalfOpen:
		if b.trial {
			return permit{until: b.openUntil, fails: cfg.Failures}
		}
		b.trial = true
		return permit{run: true, trial: true}
	}
	return permit{run: true}
}

// done records the outcome of a run the breaker let through and returns the
// state it moved to when it changed ("" otherwise).
func (b *breaker) done(p permit, failed bool, now time.Time, cfg BreakerConfig) string {
	if cfg.Failures < 0 || (!p.trial && !failed && b.clean.Load()) {
		return "" // nothing to change
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.settle()
	if p.trial {
		b.trial = false
		if failed {
			b.backoff = min(2*b.backoff, cfg.MaxBackoff)
			if b.backoff <= 0 {
				b.backoff = cfg.Backoff
			}
			b.state, b.openUntil = BreakerOpen, now.Add(b.backoff)
			return BreakerOpen
		}
		b.state, b.failures, b.backoff = BreakerClosed, 0, 0
		return BreakerClosed
	}
	if b.state != BreakerClosed {
		// A run let through before the breaker opened finished late; the
		// breaker's state already says more than it does.
		return ""
	}
	if !failed {
		b.failures = 0
		return ""
	}
	b.failures++
	if b.failures >= cfg.Failures {
		b.backoff = cfg.Backoff
		b.state, b.openUntil, b.failures = BreakerOpen, now.Add(b.backoff), 0
		return BreakerOpen
	}
	return ""
}

// abort gives back a trial that ended without an outcome (the caller's
// context ended), so the next run can be the trial.
func (b *breaker) abort(p permit) {
	if !p.trial {
		return
	}
	b.mu.Lock()
	b.trial = false
	b.settle()
	b.mu.Unlock()
}
