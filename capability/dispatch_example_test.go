package capability_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
)

// A capability that returns follow-up work, and a Dispatcher the platform
// provides: the runner hands it each follow-up after the call, with the
// hook's identity and a key to deduplicate at-least-once deliveries.
func ExampleDispatcher() {
	reg := capability.NewRegistry()
	reg.MustRegister(capability.Capability{
		Name:        "ticket.open",
		Description: "Opens a support ticket and asks the platform to notify the on-call person.",
		Schema:      `{"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}`,
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			title := req.Payload.(map[string]any)["title"].(string)
			return &capability.Result{
				Value: map[string]any{"ticket": "T-1"},
				FollowUps: []capability.FollowUp{
					{Kind: "notify.oncall", Data: map[string]any{"ticket": "T-1", "title": title}},
				},
			}, nil
		},
	})

	var mu sync.Mutex
	var seen []string
	dispatcher := capability.DispatcherFunc(func(ctx context.Context, d capability.Dispatch) error {
		mu.Lock()
		defer mu.Unlock()
		// A real dispatcher enqueues to a job system, deduplicating on
		// (d.Caller.Tenant, d.Key()).
		seen = append(seen, fmt.Sprintf("%s for tenant %s, hook %s, key %s: %v",
			d.FollowUp.Kind, d.Caller.Tenant, d.Caller.Hook, d.Key(), d.FollowUp.Data))
		return nil
	})
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{Dispatcher: dispatcher})
	if err != nil {
		panic(err)
	}

	caller := abi.Caller{Tenant: "acme", Hook: "triage", Invocation: "inv-9", Granted: []string{"ticket.open"}}
	reply := runner.HostCall(context.Background(), &abi.Call{Name: "ticket.open", Payload: []byte(`{"title": "disk full"}`), Seq: 2, Caller: caller})
	fmt.Println(reply.Status, string(reply.Body))

	// Close waits for the queue to drain.
	if err := runner.Close(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(seen[0])
	s := runner.DispatchStats()
	fmt.Printf("delivered=%d failed=%d dropped=%d\n", s.Delivered, s.Failed, s.Dropped)
	// Output:
	// OK {"ticket":"T-1"}
	// notify.oncall for tenant acme, hook triage, key inv-9/2/0: map[ticket:T-1 title:disk full]
	// delivered=1 failed=0 dropped=0
}
