package server

// SetHook makes s call f at the named points of its requests (testHook).
// Set it before s serves any request.
func SetHook(s *Server, f func(point string)) { s.testHookFn = f }
