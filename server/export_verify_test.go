package server

import (
	"sync/atomic"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// CountVerifyReads makes s's audit verifications count the records they
// read from the database (the lines the store hands out) in the counter it
// returns.
func CountVerifyReads(s *Server) *atomic.Int64 {
	n := new(atomic.Int64)
	wrap := func(st audit.Store) audit.Store { return storetest.ReadCounter{Store: st, N: n} }
	s.verifyStore.Store(&wrap)
	return n
}
