package testutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPruneModuleCache(t *testing.T) {
	dir := t.TempDir()
	old, fresh := filepath.Join(dir, "old"), filepath.Join(dir, "fresh")
	for _, d := range []string{old, fresh} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "entry"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	week := time.Now().Add(-8 * 24 * time.Hour)
	if err := os.Chtimes(old, week, week); err != nil {
		t.Fatal(err)
	}
	pruneModuleCache(dir, 7*24*time.Hour)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the stale key directory is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, "entry")); err != nil {
		t.Errorf("the fresh key directory was removed: %v", err)
	}
	pruneModuleCache(filepath.Join(dir, "missing"), time.Hour) // no directory: nothing happens
}
