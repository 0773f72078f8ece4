//go:build unix

package chain

import "syscall"

// processCPU returns the CPU time the process has used, in nanoseconds (all
// threads, the garbage collector's included): unlike the wall clock, it
// does not count the time other processes take on a shared machine.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
