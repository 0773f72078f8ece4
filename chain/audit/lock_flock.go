//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package audit

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on f for as long as f stays
// open, without waiting: a second FileStore over the same file, in this
// process or another, is refused rather than allowed to fork the chain.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrFileInUse
	}
	return err
}
