//go:build unix

package audit

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// TestCheckpointFileNotRegular plants, where a log's checkpoint goes, a FIFO
// (os.ReadFile blocked OpenFile and `chain verify` for ever) or a link to
// /dev/zero (read until memory ran out): ReadCheckpoint and OpenFile refuse
// each at once with ErrCheckpoint.
func TestCheckpointFileNotRegular(t *testing.T) {
	plants := testutil.NonRegularPlants()
	for _, pl := range plants {
		t.Run(pl.Name, func(t *testing.T) {
			path, cp, _ := keyedLog(t, 3)
			if err := os.Remove(cp); err != nil {
				t.Fatal(err)
			}
			pl.At(t, cp)
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

// TestWriteCheckpointNeverWritesThroughALink plants a link named as
// WriteCheckpoint's temporary file used to be (PATH.tmp) to a file of the
// host's: it was truncated and overwritten with the checkpoint, and the link
// renamed over PATH. The victim must be left as it was.
func TestWriteCheckpointNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	victim, cp := dir+"/victim", dir+"/audit.checkpoint"
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, cp+".tmp"); err != nil {
		t.Fatal(err)
	}
	c, err := NewCheckpoint(testKey, 3, "ab")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteCheckpoint(cp, c, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the file the planted link named now holds %q", b)
	}
	got, err := ReadCheckpoint(cp)
	if err != nil || *got != c {
		t.Fatalf("ReadCheckpoint = %+v, %v; want %+v", got, err, c)
	}
}
