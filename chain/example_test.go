package chain_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Example embeds a chain in a Go program: a transformer that rewrites the
// agent's reply and a guard that holds shell commands for a human's
// approval, with the built-in capabilities behind them and an audit log.
func Example() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)

	// The runtime runs the hooks; the capability runner serves their host
	// calls. The chain wires the two, per binding.
	rt, err := runtime.New(ctx, runtime.Config{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Config{Logger: quiet}); err != nil {
		log.Fatal(err)
	}
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}

	// A small hook written in WAT whose behaviour its settings choose
	// (testdata/guests/policy.wat); real chains bind hooks like
	// hooks-examples/redact-secrets.
	policy, err := os.ReadFile("../testdata/guests/policy.wasm")
	if err != nil {
		log.Fatal(err)
	}
	cfg := chain.Config{
		Modules: map[string][]byte{"policy": policy},
		Bindings: []chain.Binding{
			{Name: "sign-replies", Module: "policy", Point: "message.outbound", Phase: chain.Transformer,
				Settings: map[string]any{"field": "outgoing", "append": " -- sent by an assistant"}},
			{Name: "approve-shell", Module: "policy", Point: "tool.before", Phase: chain.Guard,
				Settings: map[string]any{"when": "shell.exec", "decide": map[string]any{"action": "ask", "reason": "shell commands need a human"}}},
		},
	}
	sink := audit.NewMemorySink()
	c, err := chain.New(ctx, cfg, chain.Options{Runtime: rt, HostCaller: runner, Audit: sink, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	// A reply on its way to the user.
	out, err := c.Run(ctx, chain.Input{Tenant: "acme", Point: "message.outbound",
		Context: map[string]any{"outgoing": "The deploy finished."}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Verdict, out.Context["outgoing"])

	// A tool call: the guard asks, the run pauses, a human approves.
	out, err = c.Run(ctx, chain.Input{Tenant: "acme", Point: "tool.before",
		Context: map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "uptime"}}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Verdict, out.Approval.Binding, out.Approval.Reason)
	out, err = c.Resolve(ctx, out.Approval.ID, chain.Resolution{Decision: chain.Approve, Actor: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Verdict, out.Trace[len(out.Trace)-1].Resolution)

	// Every verdict was audited, and the records form one chain.
	fmt.Println(len(sink.Records()), "audit records; verified:", audit.Verify(sink.Records()) == nil)
	// Output:
	// allow The deploy finished. -- sent by an assistant
	// pending approve-shell shell commands need a human
	// allow approved
	// 3 audit records; verified: true
}
