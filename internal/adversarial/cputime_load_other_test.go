//go:build !linux

package adversarial

import "time"

var processStart = time.Now()

// processCPU falls back to the wall clock where RUSAGE_SELF is not read.
func processCPU() time.Duration { return time.Since(processStart) }
