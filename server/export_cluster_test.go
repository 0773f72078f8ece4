package server

import (
	"context"
	"time"
)

// SetHook makes s call f at the named points of its requests (testHook).
// Set it before s serves any request.
func SetHook(s *Server, f func(point string)) { s.testHookFn = f }

// SetClock makes f s's clock where the shared limits read it (a node whose
// clock is off). Set it before s serves any request.
func SetClock(s *Server, f func() time.Time) { s.testClock = f }

// SweepLimits runs s's sweep of the shared limits' rows (sweepOnce's).
func SweepLimits(ctx context.Context, s *Server) { s.sweepLimits(ctx) }

// SharedTakes is how many times s's shared rate limit ran its statement.
func SharedTakes(s *Server) int64 { return s.shared.takes.Load() }
