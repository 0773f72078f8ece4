package server

import (
	"context"
	"time"
)

// Waiters is how many waiter channels s holds (approvals and run ids being
// waited for), for the tests that check none is left behind.
func Waiters(s *Server) int {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	return len(s.waiters)
}

// HoldBind takes tenant's bind lock, as a bind in progress holds it, until
// release.
func HoldBind(s *Server, tenant string) (release func()) { return s.bindLocks.Lock(tenant) }

// HoldVerify counts a verification of tenant's audit chain as running, as
// one in progress does (its lease), until release; nil when one runs
// already or the database failed.
func HoldVerify(s *Server, tenant string) (release func()) {
	end, ok, err := s.startLease(context.Background(), "verify:"+tenant, 1)
	if !ok || err != nil {
		return nil
	}
	return end
}

// IndexStranded runs s's pass that indexes the approvals the store holds
// and the index lacks, made before cutoff (the expiry pass uses deadAfter).
func IndexStranded(s *Server, cutoff time.Time) { s.indexStranded(context.Background(), cutoff) }

// Background runs f as s's background work (what Close waits for).
func Background(s *Server, f func()) { s.background(f) }
