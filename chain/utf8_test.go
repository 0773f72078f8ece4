package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestRunRefusesInvalidUTF8: a context holding a string or key that is not
// UTF-8 is ErrInvalidInput naming its field, and runs nothing (no record):
// its hooks would read U+FFFD where the caller, given the context back,
// passes on the bytes. U+FFFD itself, and the escape's six characters as
// text, are valid and run.
// text is a string AppendJSON leaves to Marshal.
type text string

func TestRunRefusesInvalidUTF8(t *testing.T) {
	for _, tt := range []struct {
		name    string
		context map[string]any
		field   string // "" when the run goes ahead
	}{
		{"a byte in a value", map[string]any{"channel": "x", "outgoing": "forb\xffidden"}, "outgoing"},
		{"a surrogate's bytes, deep", map[string]any{"outgoing": "ok", "thread": map[string]any{"to": []any{"a", "\xed\xa0\x80"}}}, "thread"},
		{"a byte in a key", map[string]any{"outgoing": "ok", "k\xff": 1}, "k\xff"},
		{"a byte in raw JSON", map[string]any{"outgoing": json.RawMessage("\"forb\xffidden\"")}, "outgoing"},
		{"a byte in a value Marshal encodes", map[string]any{"outgoing": []text{"forb\xffidden"}}, "outgoing"},
		{"U+FFFD itself", map[string]any{"outgoing": "forb\ufffdidden"}, ""},
		{"the escape as text", map[string]any{"outgoing": `forb\ufffdidden`}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, policyConfig(t, Binding{Name: "no-forbidden", Point: outbound, Phase: Guard,
				Settings: when("forbidden", `{"action":"block","reason":"forbidden"}`)}))
			out, err := e.c.Run(context.Background(), Input{Tenant: "acme", Point: outbound, Context: tt.context})
			if tt.field == "" {
				if err != nil || out.Verdict != Allow || len(e.sink.Records()) != 1 {
					t.Fatalf("outcome %+v, %v; records %d", out, err, len(e.sink.Records()))
				}
				return
			}
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "not UTF-8") || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.field)) {
				t.Fatalf("err %v, want ErrInvalidInput naming %q", err, tt.field)
			}
			if out != nil || len(e.sink.Records()) != 0 {
				t.Fatalf("outcome %+v, records %d: want none", out, len(e.sink.Records()))
			}
		})
	}
}
