//go:build linux

package runtime_test

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time of the calling OS thread (RUSAGE_THREAD),
// which, unlike the wall clock, does not count the time other processes
// take from this one. The caller must hold the thread (LockOSThread).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
