//go:build !linux

package runtime_test

import "time"

var start = time.Now()

// threadCPU falls back to the wall clock where RUSAGE_THREAD is missing.
func threadCPU() time.Duration { return time.Since(start) }
