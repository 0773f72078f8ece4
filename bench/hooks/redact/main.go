// Command redact is the Go-SDK variant of the side-by-side redaction
// benchmark (see BENCHMARKS.md): it redacts AWS-style access key ids from the
// point's primary text with the same scanner the native variant uses.
package main

import (
	"github.com/wasmhooks/wasmhooks/bench/internal/redact"
	"github.com/wasmhooks/wasmhooks/sdk"
)

func init() { sdk.Handle(handle) }

func main() {}

func handle(inv *sdk.Invocation) sdk.Decision {
	out, n := redact.Redact(inv.PrimaryText())
	if n == 0 {
		return sdk.Continue()
	}
	return sdk.ModifyPrimary(out).WithReason(redact.Reason(n))
}
