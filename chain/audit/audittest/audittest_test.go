package audittest_test

import (
	"path/filepath"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
)

func TestMemoryStoreConformance(t *testing.T) {
	audittest.Run(t, func(*testing.T) audit.Store { return audit.NewMemoryStore() })
}

func TestFileStoreConformance(t *testing.T) {
	audittest.Run(t, func(t *testing.T) audit.Store {
		s, err := audit.OpenFileStore(filepath.Join(t.TempDir(), "audit.jsonl"), false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
