//go:build unix

package chain

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// TestDirApprovalsRefuseNonRegularFiles plants, where an approval's file
// goes, what whoever can write the approvals directory could: a FIFO (which
// blocked Get, Due and so ExpirePending for ever in os.ReadFile) and a link
// to /dev/zero (read until memory ran out). Each is refused as a corrupt
// approval, at once; Due passes over it.
func TestDirApprovalsRefuseNonRegularFiles(t *testing.T) {
	const id = "00000000000000000000000000000001"
	plants := append(testutil.NonRegularPlants(), testutil.Plant{Name: "directory", At: func(tb testing.TB, p string) {
		if err := os.Mkdir(p, 0o700); err != nil {
			tb.Fatal(err)
		}
	}})
	for _, pl := range plants {
		t.Run(pl.Name, func(t *testing.T) {
			dir := t.TempDir()
			store, err := NewDirApprovals(dir)
			if err != nil {
				t.Fatal(err)
			}
			pl.At(t, filepath.Join(dir, id+".json"))
			done := make(chan error, 3)
			go func() {
				ctx := context.Background()
				_, err := store.Get(ctx, id)
				done <- err
				_, err = store.Take(ctx, id)
				done <- err
				ids, err := store.Due(ctx, time.Now().Add(time.Hour))
				if err == nil && len(ids) != 0 {
					err = errors.New("Due listed the planted file")
				}
				done <- err
			}()
			for i, what := range []string{"Get", "Take", "Due"} {
				select {
				case err := <-done:
					var ae *ApprovalError
					switch {
					case what == "Due" && err != nil:
						t.Fatalf("Due: %v", err)
					case what != "Due" && (!errors.As(err, &ae) || ae.Code != ApprovalCorrupt):
						t.Fatalf("%s: got %v, want an ApprovalError %s", what, err, ApprovalCorrupt)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s (call %d) did not return: blocked on the planted file", what, i)
				}
			}
		})
	}
}
