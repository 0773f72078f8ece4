//go:build unix

package testutil

import (
	"os"
	"syscall"
	"testing"
)

// Plant is a non-regular file that whoever can write a directory could put
// where the host expects one of its files.
type Plant struct {
	// Name says what is planted.
	Name string
	// At plants it at path (skipping the test where the system cannot).
	At func(tb testing.TB, path string)
}

// NonRegularPlants are a FIFO (reading it blocks until a writer comes) and a
// link to /dev/zero (reading it never ends).
func NonRegularPlants() []Plant {
	return []Plant{
		{"fifo", func(tb testing.TB, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				tb.Skipf("mkfifo: %v", err)
			}
		}},
		{"link to /dev/zero", func(tb testing.TB, p string) {
			if _, err := os.Stat("/dev/zero"); err != nil {
				tb.Skip("no /dev/zero")
			}
			if err := os.Symlink("/dev/zero", p); err != nil {
				tb.Fatal(err)
			}
		}},
	}
}
