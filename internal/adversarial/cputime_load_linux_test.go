//go:build linux

package adversarial

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time of the whole process (RUSAGE_SELF): unlike
// the wall clock, it does not count what other processes on a shared
// machine take from this one.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
