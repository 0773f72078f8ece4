package capability_test

import (
	"context"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// FuzzRunnerPayload sends random payload bytes to kv.set, made billable (one
// credit reserved per call, one charged on success) so that billing is
// checked too. Whatever the bytes: the runner never panics, answers a known
// status with a well-formed body, charges nothing unless the status is OK,
// and leaves no reservation pending.
func FuzzRunnerPayload(f *testing.F) {
	for _, seed := range []string{
		`{"key": "a", "value": 1}`,
		`{"key": "a", "value": {"nested": [1, 2, {"x": null}]}}`,
		`{"key": "", "value": 1}`,
		`{"key": "a"}`,
		`{"key": "a", "key": "b", "value": 1}`,
		`{"key": "a", "value": 1, "extra": true}`,
		`{"key": 1, "value": 1}`,
		"{\"key\": \"\xff\", \"value\": 1}",
		`{"key": "\ud800", "value": 1}`,
		`{"key": "a", "value": 1e400}`,
		`{"key": "a", "value": 9007199254740993}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		``,
		`null`,
		`{} {}`,
	} {
		f.Add([]byte(seed))
	}

	const funds = 1 << 40
	ledger := capability.NewMemoryLedger()
	if err := ledger.Credit("acme", funds); err != nil {
		f.Fatal(err)
	}
	set := builtin.KVSet(builtin.KVConfig{})
	execute := set.Execute
	set.Gates = []capability.Gate{&capability.CreditGate{Ledger: ledger}}
	set.Cost = func(any) int64 { return 1 }
	set.Execute = func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
		res, err := execute(ctx, req)
		if res != nil {
			res.Usage.Credit = 1
		}
		return res, err
	}
	reg := capability.NewRegistry()
	reg.MustRegister(set)
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{})
	if err != nil {
		f.Fatal(err)
	}
	var seq int
	var charged int64

	f.Fuzz(func(t *testing.T, payload []byte) {
		seq++
		call := &abi.Call{Name: builtin.KVSetName, Payload: payload, Seq: seq, Caller: abi.Caller{
			Tenant: "acme", Hook: "fuzz", Invocation: "fuzz", Granted: []string{builtin.KVSetName}}}
		reply := runner.HostCall(context.Background(), call)
		if !reply.Status.Known() {
			t.Fatalf("unknown status %d", reply.Status)
		}
		if reply.Status != abi.StatusOK && reply.Charged != 0 {
			t.Fatalf("status %v charged %d", reply.Status, reply.Charged)
		}
		if reply.Status == abi.StatusOK {
			if reply.Charged != 1 {
				t.Fatalf("OK charged %d, want 1", reply.Charged)
			}
			if string(reply.Body) != `{"ok":true}` {
				t.Fatalf("OK body %s", reply.Body)
			}
		} else {
			e := abi.DecodeError(reply.Status, reply.Body)
			if e.Code != reply.Status.Code() || e.Message == "malformed error body" {
				t.Fatalf("status %v with body %s", reply.Status, reply.Body)
			}
		}
		charged += reply.Charged
		avail, pending, err := ledger.Balance(context.Background(), "acme")
		if err != nil || pending != 0 || avail != funds-charged {
			t.Fatalf("balance %d pending %d err %v; want %d, 0", avail, pending, err, funds-charged)
		}
		if n := ledger.Outstanding(); n != 0 {
			t.Fatalf("%d reservations outstanding", n)
		}
	})
}
