package capability

import (
	"context"
	"hash/maphash"
	"sync"
)

// inflight is the set of host calls being answered, by tenant and
// idempotency key. A call whose key is already in flight (the same invocation
// id and sequence number, e.g. a retried run id while the first run is still
// going) waits for the first to finish before it reaches the gates, so it is
// answered exactly as a replay after the first would be: the ledger then says
// the key's reservation is resolved and the CreditGate refuses it (DENIED
// "this host call was already billed"). Without the wait both would hold the
// same pending reservation and both would execute, for one charge.
//
// It is sharded so that concurrent calls of different invocations rarely
// share a lock, and it allocates nothing in the steady state: keys are the
// call's own strings, and a channel is made only when a duplicate waits.
// See RATIONALE.md#why-does-a-duplicate-call-wait-for-the-first.
type inflight struct {
	seed   maphash.Seed
	shards [inflightShards]inflightShard
}

// inflightShards is the number of locks the set is split over.
const inflightShards = 32

type inflightShard struct {
	mu sync.Mutex
	m  map[flightKey]flight // the calls in flight; guarded by mu
}

// flightKey identifies one host call.
type flightKey struct {
	tenant, key string
}

// flight is one call in flight.
type flight struct {
	done chan struct{} // made by the first waiter, closed when the call ends
}

func newInflight() *inflight {
	f := &inflight{seed: maphash.MakeSeed()}
	for i := range f.shards {
		f.shards[i].m = make(map[flightKey]flight)
	}
	return f
}

func (f *inflight) shard(k flightKey) *inflightShard {
	return &f.shards[maphash.String(f.seed, k.key)%inflightShards]
}

// enter makes the caller the flight of k, first waiting for any call already
// in flight under k to finish. If ctx ends while it waits, it returns ctx's
// error and the caller is not in flight. A caller that entered must leave.
func (f *inflight) enter(ctx context.Context, k flightKey) error {
	s := f.shard(k)
	for {
		s.mu.Lock()
		other, busy := s.m[k]
		if !busy {
			s.m[k] = flight{}
			s.mu.Unlock()
			return nil
		}
		if other.done == nil {
			other.done = make(chan struct{})
			s.m[k] = other
		}
		s.mu.Unlock()
		select {
		case <-other.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// leave ends the caller's flight of k and wakes the calls waiting for it.
func (f *inflight) leave(k flightKey) {
	s := f.shard(k)
	s.mu.Lock()
	own := s.m[k]
	delete(s.m, k)
	s.mu.Unlock()
	if own.done != nil {
		close(own.done)
	}
}
