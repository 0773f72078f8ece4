package capability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

// TestSchemaAcceptsAnything checks which schemas the runner skips, and that
// skipping changes no answer: for every schema and payload, the reply is OK
// exactly when the compiled validator accepts the payload.
func TestSchemaAcceptsAnything(t *testing.T) {
	schemas := []struct {
		src      string
		anything bool
	}{
		{`{}`, true},
		{" { \n } ", true},
		{`true`, true},
		{`false`, false},
		{`{"type": "object"}`, false},
		{`{"$schema": "https://json-schema.org/draft/2020-12/schema"}`, false},
		{`{"not": {}}`, false},
		{`{"properties": {"a": false}}`, false},
	}
	payloads := []string{`{}`, `{"a": 1}`, `[]`, `[1, "x", null]`, `"s"`, `0`, `-1.5e300`, `true`, `null`, `{"a": {"b": [{}]}}`}
	for i, s := range schemas {
		t.Run(s.src, func(t *testing.T) {
			reg := NewRegistry()
			name := fmt.Sprintf("cap%d", i)
			reg.MustRegister(Capability{Name: name, Schema: s.src, Execute: okExecute})
			e := reg.lookup(name)
			if e.anything != s.anything {
				t.Fatalf("anything = %v, want %v", e.anything, s.anything)
			}
			r, err := NewRunner(reg, RunnerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range payloads {
				v, err := abi.ParseJSON([]byte(p), abi.JSONLimits{})
				if err != nil {
					t.Fatal(err)
				}
				want := abi.StatusInvalidRequest
				if e.schema.Validate(v) == nil {
					want = abi.StatusOK
				}
				if got := r.HostCall(context.Background(), newCall(name, p)); got.Status != want {
					t.Errorf("payload %s: status %v, want %v (%s)", p, got.Status, want, got.Body)
				}
			}
		})
	}
}

// TestSchemaAnythingStillStrict: skipping the validator skips none of the
// strict parse's refusals.
func TestSchemaAnythingStillStrict(t *testing.T) {
	reg := NewRegistry()
	reg.MustRegister(Capability{Name: "any", Schema: `{}`, Execute: okExecute})
	r, err := NewRunner(reg, RunnerOptions{MaxDepth: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{``, `{"a":1,"a":2}`, "\"\xff\"", `"\ud800"`, `[[[[1]]]]`, `9007199254740993`, `{} x`} {
		if got := r.HostCall(context.Background(), newCall("any", p)); got.Status != abi.StatusInvalidRequest {
			t.Errorf("payload %q: status %v, want INVALID_REQUEST", p, got.Status)
		}
	}
}

// TestEncodeResultMatchesMarshal holds encodeResult to abi.Marshal: the same
// bytes or an error for the same values, types AppendJSON leaves to Marshal
// included; and each result is a slice of its own.
func TestEncodeResultMatchesMarshal(t *testing.T) {
	type custom struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
	}
	deep := any("x")
	for range 600 {
		deep = []any{deep}
	}
	values := []any{
		nil, map[string]any{}, map[string]any{"z": 1, "a": []any{"\u2028<&>\"\\\x01", json.Number("1e400"), 1.5e-7, false, nil}},
		"invalid \xff utf-8", json.Number("-0.0e+5"), 1e21, 123456789.0, math.Copysign(0, -1), int64(math.MinInt64), uint64(math.MaxUint64),
		[]string{"a", "b"}, map[string]string{"k": "v"}, custom{A: 1}, &custom{B: "x"}, []byte("bytes"), deep,
		strings.Repeat("big ", 20<<10), // over the pooled buffer's size
		math.NaN(), json.Number("01"), map[string]any{"f": func() {}},
	}
	var prev []byte
	var prevWant []byte
	for i, v := range values {
		want, werr := abi.Marshal(v)
		got, gerr := encodeResult(v)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Errorf("value %d (%T): got %q, %v; want %q, %v", i, v, clip(string(got), 80), gerr, clip(string(want), 80), werr)
		}
		if _, ok := abi.AppendJSON(nil, v); ok && cap(got) != len(got) && cap(got) <= maxPooledEncodeBytes {
			t.Errorf("value %d: cap %d, len %d: the body must not share a buffer", i, cap(got), len(got))
		}
		if prev != nil && !bytes.Equal(prev, prevWant) {
			t.Errorf("value %d: the previous result changed to %q", i, clip(string(prev), 80))
		}
		prev, prevWant = got, bytes.Clone(got)
	}
}

// TestRunnerAllocations bounds the runner's allocations on the path of a
// free capability with the {} schema: the parsed payload, the Request, the
// idempotency key and the body (the capability's own result is 2 more).
func TestRunnerAllocations(t *testing.T) { checkNoopAllocations(t, RunnerOptions{}) }

// checkNoopAllocations checks that a call to a free capability with the {}
// schema, on a runner made with opts, allocates at most 6 times.
func checkNoopAllocations(t *testing.T, opts RunnerOptions) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	reg := NewRegistry()
	reg.MustRegister(Capability{Name: "noop", Schema: `{}`, Execute: func(context.Context, *Request) (*Result, error) {
		return &Result{Value: map[string]any{}}, nil
	}})
	r, err := NewRunner(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	call := newCall("noop", `{}`)
	allocs := testing.AllocsPerRun(1000, func() {
		if reply := r.HostCall(context.Background(), call); reply.Status != abi.StatusOK {
			t.Fatalf("status %v", reply.Status)
		}
	})
	if allocs > 6 {
		t.Errorf("%v allocations per call, want at most 6", allocs)
	}
}
