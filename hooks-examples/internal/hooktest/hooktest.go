//go:build !wasip1

// Package hooktest is what the example hooks' tests share.
package hooktest

import (
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

// Reply runs h's hook at message.outbound on text, the reply to incoming,
// with settings; it fails t when the run fails.
func Reply(t testing.TB, h *sdktest.Host, incoming, text string, settings map[string]any) *abi.Decision {
	t.Helper()
	dec, err := h.Run(sdktest.Invocation{
		Point:    "message.outbound",
		Context:  map[string]any{"incoming": incoming, "outgoing": text},
		Settings: settings,
	})
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

// WantModify fails t unless dec continues, when want is "", or modifies the
// context field key to want; and, when reason is not "", unless dec's reason
// is reason.
func WantModify(t testing.TB, dec *abi.Decision, key, want, reason string) {
	t.Helper()
	if want == "" {
		if dec.Action != abi.ActionContinue {
			t.Fatalf("decision = %+v, want continue", dec)
		}
	} else if dec.Action != abi.ActionModify || dec.Context[key] != want {
		t.Fatalf("decision = %+v\nwant modify of %s to %q", dec, key, want)
	}
	if reason != "" && dec.Reason != reason {
		t.Errorf("reason = %q\nwant       %q", dec.Reason, reason)
	}
}
