package ledgertest_test

import (
	"testing"

	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/ledgertest"
)

func TestMemoryLedgerConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Harness {
		l := capability.NewMemoryLedger()
		return ledgertest.Harness{Ledger: l, Credit: l.Credit,
			Outstanding: func() (int, error) { return l.Outstanding(), nil }}
	})
}
