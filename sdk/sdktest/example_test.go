//go:build !wasip1

package sdktest_test

import (
	"fmt"
	"strings"

	"github.com/wasmhooks/wasmhooks/sdk"
	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

// A hook registers its handler from init, as in its main package.
func init() { sdk.HandleE(summarize) }

// summarize replaces long replies with a summary from the llm.run capability,
// and lets them through unchanged if the summary cannot be had.
func summarize(inv *sdk.Invocation) (sdk.Decision, error) {
	text := inv.PrimaryText()
	if len(text) < inv.SettingInt("min_chars", 20) {
		return sdk.Continue(), inv.SettingsErr()
	}
	summary, err := sdk.LLMRun("Summarize: "+text, 50)
	if err != nil {
		return sdk.Continue().WithReason("not summarized: " + err.Error()), nil
	}
	return sdk.ModifyPrimary(summary).WithReason("summarized"), nil
}

func Example() {
	h := sdktest.NewHost()
	h.Register("llm.run", func(payload map[string]any) (any, error) {
		prompt := payload["prompt"].(string)
		return map[string]any{"text": strings.ToUpper(prompt[len("Summarize: "):][:9]) + "..."}, nil
	})

	dec, err := h.Run(sdktest.Invocation{
		Point:   "message.outbound",
		Context: map[string]any{"outgoing": "a long reply that goes on and on"},
	})
	fmt.Println(dec.Action, dec.Context["outgoing"], dec.Reason, err)
	fmt.Println(len(h.Calls()), "host call:", string(h.Calls()[0].Payload))

	dec, err = h.Run(sdktest.Invocation{
		Point:   "message.outbound",
		Context: map[string]any{"outgoing": "short"},
	})
	fmt.Println(dec.Action, err)

	h.SetCredit(0)
	h.SetCost("llm.run", 1)
	dec, err = h.Run(sdktest.Invocation{
		Point:   "message.outbound",
		Context: map[string]any{"outgoing": "another long reply, but no credit left"},
	})
	fmt.Println(dec.Action, dec.Reason, err)

	_, err = h.Run(sdktest.Invocation{
		Point:    "message.outbound",
		Context:  map[string]any{"outgoing": "short"},
		Settings: map[string]any{"min_chars": "many"},
	})
	fmt.Println(err)
	// Output:
	// modify A LONG RE... summarized <nil>
	// 1 host call: {"max_tokens":50,"prompt":"Summarize: a long reply that goes on and on"}
	// continue <nil>
	// continue not summarized: sdk: llm.run: insufficient_credit: capability "llm.run" costs 1, the balance is lower <nil>
	// sdktest: hook failed: handler returned an error: setting "min_chars": want an integer, got the string "many"
}
