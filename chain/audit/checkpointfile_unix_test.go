//go:build unix

package audit

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestCheckpointFileNotRegular plants, where a log's checkpoint goes, a FIFO
// (os.ReadFile blocked OpenFile and `chain verify` for ever) or a link to
// /dev/zero (read until memory ran out): ReadCheckpoint and OpenFile refuse
// each at once with ErrCheckpoint.
func TestCheckpointFileNotRegular(t *testing.T) {
	plants := []struct {
		name  string
		plant func(t *testing.T, p string)
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}},
		{"link to /dev/zero", func(t *testing.T, p string) {
			if _, err := os.Stat("/dev/zero"); err != nil {
				t.Skip("no /dev/zero")
			}
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, pl := range plants {
		t.Run(pl.name, func(t *testing.T) {
			path, cp, _ := keyedLog(t, 3)
			if err := os.Remove(cp); err != nil {
				t.Fatal(err)
			}
			pl.plant(t, cp)
			done := make(chan error, 2)
			go func() {
				_, err := ReadCheckpoint(cp)
				done <- err
				s, err := OpenFile(path, FileOptions{Key: testKey, Checkpoint: cp})
				if err == nil {
					s.Close()
				}
				done <- err
			}()
			for _, what := range []string{"ReadCheckpoint", "OpenFile"} {
				select {
				case err := <-done:
					if !errors.Is(err, ErrCheckpoint) {
						t.Fatalf("%s: got %v, want ErrCheckpoint", what, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s did not return: blocked on the planted file", what)
				}
			}
		})
	}
}
