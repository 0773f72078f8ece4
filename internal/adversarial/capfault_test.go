package adversarial

import (
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threat: a crafted payload that makes a capability panic (or fail) with host
// details in the panic value or error: credentials, paths, a stack trace.
// Defence: the runner recovers; the hook sees CAPABILITY_FAILED with
// "capability NAME failed" and nothing else; the reservation is released;
// the operator's log has the details.
func TestCapabilityFaults(t *testing.T) {
	tests := []struct {
		prompt string
		inLog  []string // what the operator's log must show
	}{
		{"PANIC now", []string{"capability: panic recovered", secret, "/etc/wasmhooks/provider.conf", "goroutine "}},
		{"FAIL now", []string{"capability: call failed", secret}},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			w := acmeWorld(t, 1000)
			// The hook also prints what it got, to see that nothing leaks
			// through its logs either.
			script := opHostCall("llm.run", llmPayload(tt.prompt, 1), 4096) + opPrint(1, outPtr, 512, 1)
			res, err := w.run(t, "acme", runtime.Limits{}, script)
			if err != nil {
				t.Fatal(err)
			}
			got := calls(t, res)[0]
			if got.status != abi.StatusCapabilityFailed {
				t.Fatalf("status %v (%s), want CAPABILITY_FAILED", got.status, got.body)
			}
			if e := abi.DecodeError(got.status, []byte(got.body)); e.Message != "capability llm.run failed" {
				t.Errorf("the hook was told %q", e.Message)
			}
			checkSanitised(t, "what the hook received", got.body)
			checkSanitised(t, "the hook's logs", logsText(res))
			checkSanitised(t, "the decision", res.Decision.Reason)
			// Released, not charged.
			if reserved, settled, released := w.ledger.counts(); reserved != 1 || settled != 0 || released != 1 {
				t.Errorf("reserved %d, settled %d, released %d; want 1, 0, 1", reserved, settled, released)
			}
			if res.CreditCharged != 0 || w.ledger.available(t, "acme") != 1000 {
				t.Errorf("charged %d, available %d", res.CreditCharged, w.ledger.available(t, "acme"))
			}
			// The operator sees everything, attributed.
			log := w.oplog.String()
			for _, want := range append(tt.inLog, `"tenant":"acme"`, `"invocation":"`+res.InvocationID+`"`) {
				if !strings.Contains(log, want) {
					t.Errorf("the operator's log lacks %q", want)
				}
			}
			// The host is fine and the capability still serves good payloads.
			res, err = w.run(t, "acme", runtime.Limits{}, opHostCall("llm.run", llmPayload("hi", 1), 4096))
			if err != nil || calls(t, res)[0].status != abi.StatusOK {
				t.Fatalf("after the fault: %v %+v", err, res)
			}
		})
	}
}
