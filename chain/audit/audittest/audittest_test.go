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

// shared is a second Store value over a MemoryStore's chain, as a second
// connection to a database would be.
type shared struct{ audit.Store }

func TestRunWithAnother(t *testing.T) {
	audittest.RunWith(t, audittest.Options{
		New:     func(*testing.T) audit.Store { return audit.NewMemoryStore() },
		Another: func(_ *testing.T, s audit.Store) audit.Store { return shared{s} },
	})
}
