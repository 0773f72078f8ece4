package store_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
)

// TestBillableCallRefusedWhenLedgerUnreachableSQLite: a billable host call
// whose durable ledger cannot be reached is refused, and its capability never
// runs: no work is ever done free.
func TestBillableCallRefusedWhenLedgerUnreachableSQLite(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	ledger := store.NewLedger(db, store.LedgerOptions{})
	if err := ledger.Grant(ctx, "acme", 100, ""); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	runner := paidEchoRunner(t, ledger, &ran)
	caller := abi.Caller{Tenant: "acme", Invocation: "inv-1", Granted: []string{"paid.echo"}}
	call := func(seq int) abi.Reply {
		return runner.HostCall(ctx, &abi.Call{Name: "paid.echo", Payload: []byte(`"hi"`), Seq: seq, Caller: caller})
	}
	if r := call(1); r.Status != abi.StatusOK || r.Charged != 5 || ran.Load() != 1 {
		t.Fatalf("with the ledger up: %s %s charged %d, ran %d", r.Status, r.Body, r.Charged, ran.Load())
	}
	db.Close()
	r := call(2)
	if r.Status == abi.StatusOK || r.Charged != 0 || ran.Load() != 1 {
		t.Fatalf("with the ledger down: %s %s charged %d, ran %d times", r.Status, r.Body, r.Charged, ran.Load())
	}
	t.Logf("refused with %s %s", r.Status, r.Body)
}

// paidEchoRunner returns a runner with one billable capability, paid.echo,
// that echoes its payload for 5 credits paid from l, counting its runs in
// ran when ran is not nil.
func paidEchoRunner(tb testing.TB, l capability.Ledger, ran *atomic.Int64) *capability.Runner {
	tb.Helper()
	reg := capability.NewRegistry()
	reg.MustRegister(capability.Capability{
		Name:        "paid.echo",
		Description: "Echoes its payload for 5 credits.",
		Schema:      `{"type": "string"}`,
		Gates:       []capability.Gate{&capability.CreditGate{Ledger: l}},
		Cost:        func(any) int64 { return 5 },
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			if ran != nil {
				ran.Add(1)
			}
			return &capability.Result{Value: req.Payload, Usage: capability.Usage{Credit: 5}}, nil
		},
	})
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return runner
}
