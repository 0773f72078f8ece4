// Command guard is the third hook of the chain benchmark: a guard that blocks
// text containing a fixed phrase and lets everything else through.
package main

import (
	"strings"

	"github.com/wasmhooks/wasmhooks/sdk"
)

func init() { sdk.Handle(handle) }

func main() {}

func handle(inv *sdk.Invocation) sdk.Decision {
	if strings.Contains(inv.PrimaryText(), "ignore previous instructions") {
		return sdk.Block("prompt injection")
	}
	return sdk.Continue()
}
