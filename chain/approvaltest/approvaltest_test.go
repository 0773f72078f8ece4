package approvaltest_test

import (
	"testing"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/approvaltest"
)

func TestMemoryApprovals(t *testing.T) {
	approvaltest.Run(t, func(t *testing.T, c approvaltest.Clock) approvaltest.Harness {
		m := chain.NewMemoryApprovals()
		m.Now, m.Lease = c.Now, approvaltest.Lease
		return approvaltest.Harness{A: m}
	})
}

func TestDirApprovals(t *testing.T) {
	approvaltest.Run(t, func(t *testing.T, c approvaltest.Clock) approvaltest.Harness {
		dir := t.TempDir()
		var h [2]*chain.DirApprovals
		for i := range h {
			d, err := chain.NewDirApprovals(dir)
			if err != nil {
				t.Fatal(err)
			}
			d.Now, d.Lease = c.Now, approvaltest.Lease
			h[i] = d
		}
		return approvaltest.Harness{A: h[0], B: h[1]}
	})
}
