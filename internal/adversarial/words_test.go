package adversarial

// Issue 12, items 1 and 2: hostile hooks using ABI 1.2's words. A
// short_circuit from anything but a guard must not switch the guards off, a
// short_circuit cannot ride on a block, a seed 002 rewrite gets no further
// than a modify, and the records of skipped guards stay in the keyed log.

import (
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
)

func TestWordsShortCircuitCannotSkipTheGuards(t *testing.T) {
	const block = `{"action":"block","reason":"destructive"}`
	tests := []struct {
		name    string
		hostile chain.Binding
	}{
		{"observer continue", chain.Binding{Name: "hostile", Phase: chain.Observer, Settings: decideSettings(t, `{"action":"continue","short_circuit":true}`)}},
		{"observer allow", chain.Binding{Name: "hostile", Phase: chain.Observer, Settings: decideSettings(t, `{"action":"allow","short_circuit":true}`)}},
		{"transformer allow", chain.Binding{Name: "hostile", Phase: chain.Transformer, Fail: chain.FailOpen, Settings: decideSettings(t, `{"action":"allow","short_circuit":true}`)}},
		{"transformer modify", chain.Binding{Name: "hostile", Phase: chain.Transformer, Fail: chain.FailOpen,
			Settings: decideSettings(t, `{"action":"modify","context":{"outgoing":"x"},"short_circuit":true}`)}},
		{"transformer rewrite", chain.Binding{Name: "hostile", Phase: chain.Transformer, Fail: chain.FailOpen,
			Settings: decideSettings(t, `{"action":"rewrite","payload":{"outgoing":"x"},"short_circuit":true}`)}},
		// A guard's short_circuit on its own block is refused: the
		// fail-open policy continues, and the guard after it still runs.
		{"guard block", chain.Binding{Name: "hostile", Phase: chain.Guard, Priority: -1, Fail: chain.FailOpen,
			Settings: decideSettings(t, `{"action":"block","short_circuit":true}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.hostile.Point = "message.outbound"
			cw := newChainsecWorld(t, tt.hostile,
				chain.Binding{Name: "guard", Point: "message.outbound", Phase: chain.Guard,
					Settings: map[string]any{"when": "rm -rf", "decide": mustDecide(t, block)}})
			out := cw.run(t, "message.outbound", map[string]any{"outgoing": "rm -rf /"})
			if out.Verdict != chain.Block || out.Binding != "guard" || out.ShortCircuit != "" {
				t.Fatalf("%s by %s (short-circuited by %q), trace %+v", out.Verdict, out.Binding, out.ShortCircuit, out.Trace)
			}
			st := out.Trace[0]
			if st.Binding != "hostile" {
				t.Fatalf("first step %+v, want the hostile one", st)
			}
			if st.Failure == nil && !strings.Contains(st.Ignored, "short_circuit") {
				t.Errorf("hostile step neither failed nor reported: %+v", st)
			}
			if st.Failure != nil && st.Failure.Code != abi.FailInvalidOutput {
				t.Errorf("hostile step failed with %s", st.Failure.Code)
			}
		})
	}
}

// The records of guards a short-circuit skipped are in the keyed log like
// any other, and the log verifies with its key and its checkpoint.
func TestWordsSkippedGuardsInTheKeyedLog(t *testing.T) {
	cw := newChainsecWorld(t,
		chain.Binding{Name: "allow-list", Point: "message.outbound", Phase: chain.Guard, Priority: 1,
			Settings: map[string]any{"when": "TRUSTED", "decide": mustDecide(t, `{"action":"allow","short_circuit":true}`)}},
		chain.Binding{Name: "deny", Point: "message.outbound", Phase: chain.Guard, Priority: 2,
			Settings: decideSettings(t, `{"abort":true,"reason":"legacy deny"}`)},
	)
	out := cw.run(t, "message.outbound", map[string]any{"outgoing": "TRUSTED"})
	if out.Verdict != chain.Allow || out.ShortCircuit != "allow-list" || len(out.Records()) != 2 || out.Records()[1].By != chain.ByShortCircuit {
		t.Fatalf("%s, short-circuited by %q, audit %+v", out.Verdict, out.ShortCircuit, out.Records())
	}
	out = cw.run(t, "message.outbound", map[string]any{"outgoing": "other"})
	if out.Verdict != chain.Block || out.Records()[1].Wire != "legacy" || out.Records()[1].Decision != "block" {
		t.Fatalf("%s, audit %+v", out.Verdict, out.Records()[1])
	}
	ckpt, err := audit.ReadCheckpoint(cw.ckpt)
	if err != nil {
		t.Fatal(err)
	}
	n, err := audit.VerifyFileWith(cw.log, audit.VerifyOptions{Key: chainsecKey, Checkpoint: ckpt})
	if err != nil || n != 4 {
		t.Fatalf("VerifyFileWith = %d, %v", n, err)
	}
}

func mustDecide(t *testing.T, d string) any {
	return decideSettings(t, d)["decide"]
}
