package server

// Waiters is how many waiter channels s holds (approvals and run ids being
// waited for), for the tests that check none is left behind.
func Waiters(s *Server) int {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	return len(s.waiters)
}
