package capability_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
)

// A registry of one capability, and a runner answering a host call with it.
func Example() {
	reg := capability.NewRegistry()
	err := reg.Register(capability.Capability{
		Name:        "text.upper",
		Description: "Upper-cases a string.",
		Schema: `{"type": "object", "properties": {"text": {"type": "string"}},
			"required": ["text"], "additionalProperties": false}`,
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			text := req.Payload.(map[string]any)["text"].(string)
			return &capability.Result{Value: map[string]any{"text": strings.ToUpper(text)}}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{})
	if err != nil {
		panic(err)
	}

	caller := abi.Caller{Tenant: "acme", Hook: "shout", Invocation: "inv-1", Granted: []string{"text.upper"}}
	for _, payload := range []string{`{"text": "hello"}`, `{"text": 42}`, `{"text": "a", "text": "b"}`} {
		reply := runner.HostCall(context.Background(), &abi.Call{Name: "text.upper", Payload: []byte(payload), Seq: 1, Caller: caller})
		fmt.Println(reply.Status, string(reply.Body))
	}
	reply := runner.HostCall(context.Background(), &abi.Call{Name: "fs.read", Payload: []byte(`{}`), Seq: 2, Caller: caller})
	fmt.Println(reply.Status, string(reply.Body))
	// Output:
	// OK {"text":"HELLO"}
	// INVALID_REQUEST {"code":"invalid_request","message":"payload does not match the schema of text.upper at /text: expected string, but got number"}
	// INVALID_REQUEST {"code":"invalid_request","message":"payload is not strict JSON: duplicate key \"text\" (at byte 14)"}
	// UNKNOWN_CAPABILITY {"code":"unknown_capability","message":"no capability named \"fs.read\""}
}

// A billable capability behind a CreditGate: the worst case is reserved,
// the actual consumption is charged and the rest released.
func ExampleCreditGate() {
	ledger := capability.NewMemoryLedger()
	if err := ledger.Credit("acme", 100); err != nil {
		panic(err)
	}
	reg := capability.NewRegistry()
	reg.MustRegister(capability.Capability{
		Name:        "words.count",
		Description: "Counts words, at 1 credit per word; reserves 1 credit per byte.",
		Schema:      `{"type": "string"}`,
		Gates:       []capability.Gate{&capability.CreditGate{Ledger: ledger}},
		Cost:        func(p any) int64 { return int64(len(p.(string))) },
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			n := int64(len(strings.Fields(req.Payload.(string))))
			return &capability.Result{Value: n, Usage: capability.Usage{Credit: n}}, nil
		},
	})
	usage := &capability.MemoryUsageSink{}
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{Usage: usage})
	if err != nil {
		panic(err)
	}
	caller := abi.Caller{Tenant: "acme", Invocation: "inv-1", Granted: []string{"words.count"}}
	call := func(seq int, text string) {
		reply := runner.HostCall(context.Background(), &abi.Call{Name: "words.count", Payload: []byte(`"` + text + `"`), Seq: seq, Caller: caller})
		avail, pending, _ := ledger.Balance(context.Background(), "acme")
		fmt.Printf("%s %s charged=%d available=%d pending=%d\n", reply.Status, reply.Body, reply.Charged, avail, pending)
	}
	call(1, "three short words")                                                                                            // reserves 17, charges 3
	call(2, "a long request reserves one credit per byte, which is more than the ninety-seven credits left in the account") // reserves 108
	for _, r := range usage.Records() {
		fmt.Printf("%s seq=%d reserved=%d charged=%d\n", r.Status, r.Seq, r.Reserved, r.Charged)
	}
	// Output:
	// OK 3 charged=3 available=97 pending=0
	// INSUFFICIENT_CREDIT {"code":"insufficient_credit","message":"not enough credit for words.count"} charged=0 available=97 pending=0
	// OK seq=1 reserved=17 charged=3
	// INSUFFICIENT_CREDIT seq=2 reserved=0 charged=0
}

// The ledger's two phases, directly.
func ExampleMemoryLedger() {
	ctx := context.Background()
	l := capability.NewMemoryLedger()
	_ = l.Credit("acme", 50)

	id, _ := l.Reserve(ctx, "acme", 30, "inv-1/1")
	avail, pending, _ := l.Balance(ctx, "acme")
	fmt.Println("after reserve:", avail, pending)

	again, _ := l.Reserve(ctx, "acme", 30, "inv-1/1") // same key: same hold
	fmt.Println("same reservation:", again == id)

	charged, _ := l.Settle(ctx, id, 45) // more than reserved: only 30 is charged
	avail, pending, _ = l.Balance(ctx, "acme")
	fmt.Println("charged:", charged, "then:", avail, pending)

	_, err := l.Settle(ctx, id, 1)
	fmt.Println(err != nil)
	// Output:
	// after reserve: 20 30
	// same reservation: true
	// charged: 30 then: 20 0
	// true
}
