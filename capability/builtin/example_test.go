package builtin_test

import (
	"context"
	"fmt"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// The built-in capabilities, with llm.run on the offline provider and billed
// on an in-memory ledger.
func ExampleRegister() {
	ledger := capability.NewMemoryLedger()
	_ = ledger.Credit("acme", 1000)
	logs := &builtin.MemoryLogSink{}

	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Config{Ledger: ledger, Logs: logs}); err != nil {
		panic(err)
	}
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{})
	if err != nil {
		panic(err)
	}
	caller := abi.Caller{Tenant: "acme", Hook: "summarise", Invocation: "inv-1", Granted: reg.Names()}
	seq := 0
	call := func(name, payload string) {
		seq++
		reply := runner.HostCall(context.Background(), &abi.Call{Name: name, Payload: []byte(payload), Seq: seq, Caller: caller})
		fmt.Printf("%s %s %s (charged %d)\n", name, reply.Status, reply.Body, reply.Charged)
	}

	call("llm.run", `{"prompt": "Summarize: The deploy failed twice. The deploy failed because the disk was full. Lunch was late.", "max_tokens": 12}`)
	call("kv.set", `{"key": "runs", "value": 1}`)
	call("kv.get", `{"key": "runs"}`)
	call("log.write", `{"level": "warn", "message": "disk full"}`)
	fmt.Println(len(logs.Entries("inv-1")), "log line")

	avail, pending, _ := ledger.Balance(context.Background(), "acme")
	fmt.Println("balance:", avail, "pending:", pending)
	// Output:
	// llm.run OK {"model":"extractive-v1","provider":"offline-extractive","text":"The deploy failed twice. The deploy failed because the disk was full.","usage":{"input_tokens":16,"output_tokens":12}} (charged 40)
	// kv.set OK {"ok":true} (charged 0)
	// kv.get OK {"found":true,"value":1} (charged 0)
	// log.write OK {"ok":true} (charged 0)
	// 1 log line
	// balance: 960 pending: 0
}
