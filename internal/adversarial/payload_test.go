package adversarial

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// checkNothingRan checks that a refused payload reached neither the provider
// nor the ledger, and that its usage record charges nothing.
func checkNothingRan(t *testing.T, w *world, want ...abi.Status) {
	t.Helper()
	if n := w.llm.calls.Load(); n != 0 {
		t.Errorf("the provider ran %d times", n)
	}
	if reserved, _, _ := w.ledger.counts(); reserved != 0 {
		t.Errorf("%d reservations for a refused payload", reserved)
	}
	for _, r := range w.usage.Records() {
		if !slices.Contains(want, r.Status) || r.Charged != 0 || r.Reserved != 0 {
			t.Errorf("usage record %+v, want %v with nothing reserved or charged", r, want)
		}
	}
}

// Threat: payloads that a validator and an executor might read differently
// (the JSON-interoperability bug class), or that exhaust the parser or the
// validator. Defence: abi.ParseJSON refuses them before any schema sees them,
// the schema refuses the rest, and the one parsed value is what both the
// validator and the executor see. Every case: INVALID_REQUEST, in bounded
// time, nothing run, nothing reserved.
func TestPayloadsRefused(t *testing.T) {
	deep := `{"prompt":"a","x":` + strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000) + `}`
	tests := []struct{ name, payload string }{
		{"duplicate keys", `{"prompt":"hi","max_tokens":1,"max_tokens":4096}`},
		{"duplicate keys, prompt", `{"prompt":"cheap","prompt":"an expensive prompt"}`},
		{"case variant of a key", `{"prompt":"hi","Prompt":"other"}`},
		{"case variant of max_tokens", `{"prompt":"hi","max_tokens":1,"MAX_TOKENS":4096}`},
		{"nesting 10,000 deep", deep},
		{"1e400", `{"prompt":"hi","max_tokens":1e400}`},
		{"9007199254740993", `{"prompt":"hi","max_tokens":9007199254740993}`},
		{"-0", `{"prompt":"hi","max_tokens":-0}`},
		{"-1", `{"prompt":"hi","max_tokens":-1}`},
		{"1e20", `{"prompt":"hi","max_tokens":1e20}`},
		{"1.5", `{"prompt":"hi","max_tokens":1.5}`},
		{"invalid UTF-8", "{\"prompt\":\"h\xffi\"}"},
		{"overlong UTF-8", "{\"prompt\":\"\xc0\xaf\"}"},
		{"lone high surrogate", `{"prompt":"\ud800"}`},
		{"lone low surrogate", `{"prompt":"\udc00x"}`},
		{"type confusion: \"100\" for 100", `{"prompt":"hi","max_tokens":"100"}`},
		{"type confusion: true for 100", `{"prompt":"hi","max_tokens":true}`},
		{"type confusion: number for string", `{"prompt":100}`},
		{"type confusion: null for string", `{"prompt":null}`},
		{"type confusion: array for object", `["prompt","hi"]`},
		{"trailing data", `{"prompt":"hi"} {"prompt":"again"}`},
		{"a control character", "{\"prompt\":\"a\x00b\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := acmeWorld(t, 1_000_000)
			res := w.runWithin(t, 3*time.Second, "refusing the payload", runtime.Limits{}, opHostCall("llm.run", tt.payload, 4096))
			got := calls(t, res)[0]
			if got.status != abi.StatusInvalidRequest {
				t.Fatalf("status %v (%s), want INVALID_REQUEST", got.status, got.body)
			}
			checkSanitised(t, "error body", got.body)
			checkNothingRan(t, w, abi.StatusInvalidRequest)
		})
	}
}

// Threat: a 10 MB string, to make the host copy, parse and validate it.
// Defence: the runtime refuses a payload over MaxRequestBytes before reading
// it from guest memory (REQUEST_TOO_LARGE, per ABI.md); an operator who raises
// the limits still gets a bounded parse and a schema refusal.
func TestPayloadTenMegabyteString(t *testing.T) {
	const size = 10_000_000
	const at = 0x80000 // past hostile.wat's initial memory, after a grow
	header, trailer := `{"prompt":"`, `"}`
	// The first invocation grows the memory and writes the payload; the
	// second, on the same warm instance, sends it.
	prepare := opGrow(165) + opWrite(namePtr, []byte("llm.run")) +
		opWrite(at, []byte(header)) + opFill(at+uint32(len(header)), size, 'a') + opWrite(at+uint32(len(header))+size, []byte(trailer))
	script := opCall(namePtr, 7, at, uint32(len(header)+size+len(trailer)), outPtr, 4096)
	prep := func(t *testing.T, w *world, lim runtime.Limits) {
		t.Helper()
		if res, err := w.run(t, "acme", lim, prepare); err != nil || !res.Reused {
			t.Fatalf("preparing: %v %+v", err, res)
		}
	}

	t.Run("default limits", func(t *testing.T) {
		w := acmeWorld(t, 1_000_000)
		prep(t, w, runtime.Limits{})
		before := totalAlloc()
		res := w.runWithin(t, 3*time.Second, "refusing 10 MB", runtime.Limits{}, script)
		if got := calls(t, res)[0]; got.status != abi.StatusRequestTooLarge {
			t.Fatalf("status %v, want REQUEST_TOO_LARGE", got.status)
		}
		if grew := totalAlloc() - before; grew > 4<<20 {
			t.Errorf("refusing 10 MB allocated %d MiB: the payload was copied", grew>>20)
		}
		if n := len(w.usage.Records()); n != 0 {
			t.Errorf("%d usage records: the runtime must refuse before the runner", n)
		}
		checkNothingRan(t, w, abi.StatusRequestTooLarge)
	})
	t.Run("limits raised by the operator", func(t *testing.T) {
		w := newWorld(t, func(o *options) { o.runner.MaxPayloadBytes = 16 << 20 })
		w.fund(t, "acme", 1_000_000)
		// The runner parses 10 MB under -race: give the invocation the
		// time the test gives it.
		lim := runtime.Limits{MaxRequestBytes: 16 << 20, MaxHostCallBytes: 32 << 20, Timeout: 10 * time.Second}
		prep(t, w, lim)
		res := w.runWithin(t, 10*time.Second, "parsing and refusing 10 MB", lim, script)
		if got := calls(t, res)[0]; got.status != abi.StatusInvalidRequest || !strings.Contains(got.body, "/prompt") {
			t.Fatalf("status %v (%s), want INVALID_REQUEST at /prompt", got.status, got.body)
		}
		checkNothingRan(t, w, abi.StatusInvalidRequest)
	})
}

// manyKeys returns {"prompt":"hi","k0":0,...} with n extra keys, or with as
// many as fit in max bytes when n is negative.
func manyKeys(n, max int) []byte {
	b := []byte(`{"prompt":"hi"`)
	for i := 0; n < 0 || i < n; i++ {
		key := fmt.Sprintf(`,"k%d":0`, i)
		if n < 0 && len(b)+len(key)+1 > max {
			break
		}
		b = append(b, key...)
	}
	return append(b, '}')
}

// Threat: a million small keys, to make the parser build (and the validator
// walk) a huge object. Defence: the size limit refuses it before parsing;
// what fits under the limit is parsed and refused in bounded time.
func TestPayloadMillionKeys(t *testing.T) {
	t.Run("through the runtime", func(t *testing.T) {
		// 12 MB in guest memory, refused by size: the runtime never reads it.
		w := newWorld(t)
		const at, size = 0x80000, 12_000_000
		script := opGrow(200) + opWrite(namePtr, []byte("llm.run")) + opFill(at, size, ' ') +
			opCall(namePtr, 7, at, size, outPtr, 4096)
		res, err := w.run(t, "acme", runtime.Limits{}, script)
		if err != nil {
			t.Fatal(err)
		}
		if got := calls(t, res)[1]; got.status != abi.StatusRequestTooLarge {
			t.Fatalf("status %v, want REQUEST_TOO_LARGE", got.status)
		}
	})
	t.Run("at the runner", func(t *testing.T) {
		w := acmeWorld(t, 1_000_000)
		huge := manyKeys(1_000_000, 0)
		var reply abi.Reply
		within(t, 2*time.Second, "refusing a million keys", func() { reply = w.hostCall("acme", "llm.run", huge) })
		if reply.Status != abi.StatusRequestTooLarge {
			t.Fatalf("a million keys (%d bytes): %v, want REQUEST_TOO_LARGE", len(huge), reply.Status)
		}
		// As many keys as fit under the limit: parsed, then refused by the
		// schema, in bounded time.
		most := manyKeys(-1, capability.DefaultMaxPayloadBytes)
		within(t, 10*time.Second, "refusing as many keys as fit in 1 MiB", func() { reply = w.hostCall("acme", "llm.run", most) })
		if reply.Status != abi.StatusInvalidRequest {
			t.Fatalf("%d bytes of keys: %v, want INVALID_REQUEST", len(most), reply.Status)
		}
		checkSanitised(t, "error body", string(reply.Body))
		if len(reply.Body) > 1024 {
			t.Errorf("the error body is %d bytes: it must not list every key", len(reply.Body))
		}
		checkNothingRan(t, w, abi.StatusRequestTooLarge, abi.StatusInvalidRequest)
	})
}

// Threat: a validator and an executor that disagree about a payload's value.
// Defence: one parse; the value the schema validated is, by identity, what
// Cost and Execute see; refused payloads reach neither.
func TestPayloadValidatorAndExecutorAgree(t *testing.T) {
	w := acmeWorld(t, 1_000_000)
	accepted := []string{
		`{"max_tokens":5}`,
		`{"max_tokens":5,"model":"small"}`,
		`{"m\u006fdel":"large","max_tokens":7}`,
		`{"max_tokens":1e1}`,
		`{"max_tokens":10.0}`,
		` { "max_tokens" : 3 } `,
	}
	for _, p := range accepted {
		res, err := w.run(t, "acme", runtime.Limits{}, opHostCall("probe", p, 4096))
		if err != nil {
			t.Fatal(err)
		}
		got := calls(t, res)[0]
		if got.status != abi.StatusOK {
			t.Fatalf("%s: %v (%s)", p, got.status, got.body)
		}
		want, err := abi.ParseJSON([]byte(p), abi.JSONLimits{})
		if err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		seen := w.probes[res.InvocationID+"/1"]
		w.mu.Unlock()
		if seen == nil || !seen.sameAsCost || !reflect.DeepEqual(seen.payload, want) {
			t.Fatalf("%s: Execute saw %#v (the value Cost saw: %v), want %#v", p, seen.payload, seen != nil && seen.sameAsCost, want)
		}
		back, err := abi.ParseJSON([]byte(got.body), abi.JSONLimits{})
		if err != nil || !reflect.DeepEqual(back, want) {
			t.Errorf("%s: the hook got back %s", p, got.body)
		}
	}
	w.mu.Lock()
	costs, executions := len(w.costSaw), len(w.probes)
	w.mu.Unlock()
	for _, p := range []string{
		`{"max_tokens":1,"max_tokens":100}`,
		`{"max_tokens":1,"Max_tokens":100}`,
		`{"max_tokens":"5"}`,
		`{"max_tokens":5,"model":"SMALL"}`,
		`{"max_tokens":5,"model":"sm\u0000all"}`,
	} {
		res, err := w.run(t, "acme", runtime.Limits{}, opHostCall("probe", p, 4096))
		if err != nil {
			t.Fatal(err)
		}
		if got := calls(t, res)[0]; got.status != abi.StatusInvalidRequest {
			t.Errorf("%s: %v, want INVALID_REQUEST", p, got.status)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.costSaw) != costs || len(w.probes) != executions {
		t.Errorf("refused payloads reached Cost (%d) or Execute (%d)", len(w.costSaw)-costs, len(w.probes)-executions)
	}
}
