//go:build !wasip1

package sdktest_test

import (
	"fmt"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk"
	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

func ExampleHost_RunHandler() {
	h := sdktest.NewHost()
	h.RegisterError("llm.run", abi.StatusDenied, "not granted")

	dec, err := h.RunHandler(func(inv *sdk.Invocation) (sdk.Decision, error) {
		if _, err := sdk.LLMRun("hi", 5); err != nil {
			return sdk.Block("no model").WithUserMessage("Try again later."), nil
		}
		return sdk.Continue(), nil
	}, sdktest.Invocation{Point: "message.inbound", Context: map[string]any{"incoming": "hi"}})
	fmt.Println(dec.Action, dec.Reason, dec.UserMessage, err)
	c := h.Calls()[0]
	fmt.Println(c.Name, c.Status, string(c.Body))
	// Output:
	// block no model Try again later. <nil>
	// llm.run DENIED {"code":"denied","message":"not granted"}
}

func ExampleHost_Run_failure() {
	h := sdktest.NewHost()
	_, err := h.RunHandler(func(inv *sdk.Invocation) (sdk.Decision, error) {
		return sdk.Modify("incoming", "x"), nil // message.outbound cannot change "incoming"
	}, sdktest.Invocation{Point: "message.outbound"})
	fmt.Println(err)
	// Output:
	// sdktest: hook failed: invalid decision: modify of "incoming", which point message.outbound does not allow (changeable: outgoing)
}
