// Command behaviors is the test hook behind the MCP interceptor conformance
// suite's simple behaviours (ADAPTER.md's behaviour table), one per value of
// its "behavior" setting. The payload is the point's primary field (see
// package interceptor): a request's params at tool.before, a response at
// tool.after.
package main

import (
	"errors"
	"strings"

	"github.com/wasmhooks/wasmhooks/sdk"
)

func init() { sdk.HandleE(handle) }

func main() {}

func handle(inv *sdk.Invocation) (sdk.Decision, error) {
	payload, _ := inv.ContextValue(inv.PrimaryField())
	obj, _ := payload.(map[string]any)
	args, _ := obj["arguments"].(map[string]any)
	note, isString := args["note"].(string)
	switch inv.SettingString("behavior", "") {
	case "allow-all":
		return sdk.Continue(), nil
	case "deny-all":
		return sdk.Block("denied by policy"), nil
	case "require-note":
		if !isString || note == "" {
			return sdk.Block("note is required"), nil
		}
		return sdk.Continue(), nil
	case "require-uppercase-note":
		if note != strings.ToUpper(note) {
			return sdk.Block("note must be uppercase"), nil
		}
		return sdk.Continue(), nil
	case "uppercase-note":
		if !isString || note == strings.ToUpper(note) {
			return sdk.Continue(), nil
		}
		nargs := make(map[string]any, len(args))
		for k, v := range args {
			nargs[k] = v
		}
		nargs["note"] = strings.ToUpper(note)
		nobj := make(map[string]any, len(obj))
		for k, v := range obj {
			nobj[k] = v
		}
		nobj["arguments"] = nargs
		return sdk.ModifyPrimary(nobj), nil
	case "ask-all":
		return sdk.Ask("needs a human"), nil
	case "crash":
		panic("crash: this behaviour always fails")
	}
	return sdk.Decision{}, errors.New("unknown behavior")
}
