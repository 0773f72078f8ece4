package bench

import (
	"encoding/json"
	"errors"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/bench/internal/redact"
	"github.com/wasmhooks/wasmhooks/sdk"
)

// NativeJSON is the native Go variant, the baseline of the redaction rows:
// the invocation document in, decoded with encoding/json; the primary field
// redacted; the canonical decision out, encoded by abi.Decision.Encode
// (encoding/json). It is what a Go host would do without a sandbox.
func NativeJSON(doc []byte) ([]byte, error) {
	var inv abi.Invocation
	if err := json.Unmarshal(doc, &inv); err != nil {
		return nil, err
	}
	p, ok := abi.LookupPoint(inv.Point)
	if !ok || p.Primary == "" {
		return nil, errors.New("bench: no primary field")
	}
	text, _ := inv.Context[p.Primary].(string)
	out, n := redact.Redact(text)
	d := abi.Decision{Action: abi.ActionContinue}
	if n > 0 {
		d = abi.Decision{Action: abi.ActionModify, Context: map[string]any{p.Primary: out}, Reason: redact.Reason(n)}
	}
	return d.Encode()
}

// handle is the Go-SDK hook's handler (bench/hooks/redact), registered in
// this process too so that the native SDK row runs the same code through
// package sdktest.
func handle(inv *sdk.Invocation) sdk.Decision {
	out, n := redact.Redact(inv.PrimaryText())
	if n == 0 {
		return sdk.Continue()
	}
	return sdk.ModifyPrimary(out).WithReason(redact.Reason(n))
}

func init() { sdk.Handle(handle) }
