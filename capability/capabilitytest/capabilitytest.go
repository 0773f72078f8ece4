// Package capabilitytest is a conformance kit for capability.Capability
// implementations, in the spirit of testing/slogtest: call Run from a test
// with the capability and a few example payloads, and it checks the rules
// every capability must keep.
//
//	func TestConformance(t *testing.T) {
//		capabilitytest.Run(t, mycap.New(), capabilitytest.Case{Name: "ok", Payload: `{"x": 1}`, Valid: true})
//	}
package capabilitytest

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
)

// Case is one example payload for Run. It is a plain value, safe to copy.
type Case struct {
	// Name names the subtest.
	Name string
	// Payload is the payload as a hook would send it.
	Payload string
	// Valid reports whether Payload satisfies the capability's schema. A
	// valid payload must reach Execute; an invalid one must be refused
	// with INVALID_REQUEST before Execute runs.
	Valid bool
}

// RandomPayloads is how many random payloads Run sends. Each is valid JSON;
// most do not satisfy the schema, some are mutations of the valid cases.
const RandomPayloads = 300

// cancelWait is how long Execute may take to return for a cancelled context.
const cancelWait = 5 * time.Second

// Run checks capability c against the conformance rules, each as a subtest:
//
//   - declaration: the name is well-formed, the description is not empty,
//     Execute is set and the schema compiles;
//   - invalid: payloads that are not strict JSON (duplicate keys, invalid
//     UTF-8, deep nesting, trailing data) and the invalid cases are refused
//     with INVALID_REQUEST without Execute running;
//   - valid: each valid case reaches Execute, which does not panic; an OK
//     result is valid JSON; cost and usage are never negative;
//   - cancelled: Execute returns an error promptly for a context that is
//     already cancelled, and starts no work;
//   - random: RandomPayloads random valid-JSON payloads never make Cost or
//     Execute panic, always get a known status and never negative usage.
//
// In every subtest, the follow-up work a successful Execute returns
// (Result.FollowUps) must be dispatchable: at most
// capability.DefaultMaxFollowUps of them, each Kind 1 to 128 bytes of
// [a-z0-9_.-], each Data JSON-encodable (abi.Marshal), so that a durable
// dispatch queue can store it. Follow-ups returned with an error are never
// dispatched, and are not checked.
//
// The capability's Gates are not run: the kit checks the capability, not the
// gates guarding it. Give at least one valid case.
func Run(t *testing.T, c capability.Capability, cases ...Case) {
	t.Helper()
	ok := t.Run("declaration", func(t *testing.T) {
		if !capability.ValidName(c.Name) {
			t.Errorf("name %q is not 1 to %d bytes of [a-z0-9_.-]", c.Name, abi.MaxNameBytes)
		}
		if strings.TrimSpace(c.Description) == "" {
			t.Errorf("%s: empty Description", c.Name)
		}
		if c.Execute == nil {
			t.Fatalf("%s: nil Execute", c.Name)
		}
		if err := capability.NewRegistry().Register(c); err != nil {
			t.Fatalf("Register: %v", err)
		}
	})
	if !ok {
		return
	}
	h := newHarness(t, c)

	t.Run("invalid", func(t *testing.T) {
		invalid := []Case{
			{Name: "not json", Payload: `{"a": `},
			{Name: "empty", Payload: ``},
			{Name: "duplicate keys", Payload: `{"a": 1, "a": 2}`},
			{Name: "invalid utf-8", Payload: "{\"a\": \"\xff\xfe\"}"},
			{Name: "lone surrogate", Payload: `{"a": "\ud800"}`},
			{Name: "deep nesting", Payload: strings.Repeat("[", 65) + strings.Repeat("]", 65)},
			{Name: "trailing data", Payload: `{} {}`},
			{Name: "huge integer", Payload: `{"a": 9007199254740993}`},
		}
		for _, tc := range cases {
			if !tc.Valid {
				invalid = append(invalid, tc)
			}
		}
		for _, tc := range invalid {
			t.Run(tc.Name, func(t *testing.T) {
				r := h.call(t, []byte(tc.Payload))
				if r.reply.Status != abi.StatusInvalidRequest && r.reply.Status != abi.StatusRequestTooLarge {
					t.Errorf("payload %s: status %v, want INVALID_REQUEST", excerpt(tc.Payload), r.reply.Status)
				}
				if r.executed {
					t.Errorf("payload %s: Execute ran for a payload the schema should refuse", excerpt(tc.Payload))
				}
			})
		}
	})

	var valid []Case
	for _, tc := range cases {
		if tc.Valid {
			valid = append(valid, tc)
		}
	}
	t.Run("valid", func(t *testing.T) {
		if len(valid) == 0 {
			t.Fatal("capabilitytest: give at least one valid case")
		}
		for _, tc := range valid {
			t.Run(tc.Name, func(t *testing.T) {
				r := h.call(t, []byte(tc.Payload))
				if !r.executed {
					t.Fatalf("payload %s: Execute did not run (status %v, body %s)", excerpt(tc.Payload), r.reply.Status, r.reply.Body)
				}
			})
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		if len(valid) == 0 {
			t.Skip("no valid case")
		}
		payload, err := abi.ParseJSON([]byte(valid[0].Payload), abi.JSONLimits{})
		if err != nil {
			t.Fatalf("valid case %q is not strict JSON: %v", valid[0].Name, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := &capability.Request{Capability: c.Name, Caller: h.caller(0), Payload: payload, Seq: 1, IdempotencyKey: "capabilitytest/cancelled"}
		type outcome struct {
			res   *capability.Result
			err   error
			panic any
		}
		done := make(chan outcome, 1)
		go func() {
			var o outcome
			defer func() {
				if p := recover(); p != nil {
					o.panic = p
				}
				done <- o
			}()
			o.res, o.err = c.Execute(ctx, req)
		}()
		select {
		case o := <-done:
			switch {
			case o.panic != nil:
				t.Errorf("Execute panicked with a cancelled context: %v", o.panic)
			case o.err == nil:
				t.Errorf("Execute returned no error for a cancelled context")
			}
		case <-time.After(cancelWait):
			t.Errorf("Execute did not return within %v of a cancelled context", cancelWait)
		}
	})

	t.Run("random", func(t *testing.T) {
		g := newGen(c.Name, valid)
		for i := range RandomPayloads {
			payload := g.payload()
			h.call(t, payload)
			if t.Failed() {
				t.Logf("random payload %d: %s", i, excerpt(string(payload)))
				return
			}
		}
	})
}

// harness runs the capability, without its gates, through a real Runner and
// records what Cost and Execute do.
type harness struct {
	c      capability.Capability
	runner *capability.Runner

	mu     sync.Mutex // guards the fields below
	seq    int
	events []event
}

// event is what one wrapped Cost or Execute call did.
type event struct {
	stage    string // "cost" or "execute"
	panicked any
	problem  string
}

type callResult struct {
	reply    abi.Reply
	executed bool
}

func newHarness(t *testing.T, c capability.Capability) *harness {
	h := &harness{c: c}
	w := c
	w.Gates = nil
	if c.Cost != nil {
		w.Cost = func(payload any) (cost int64) {
			defer func() {
				if p := recover(); p != nil {
					h.note(event{stage: "cost", panicked: p})
					panic(p)
				}
			}()
			cost = c.Cost(payload)
			if cost < 0 {
				h.note(event{stage: "cost", problem: fmt.Sprintf("negative cost %d", cost)})
			}
			return cost
		}
	}
	w.Execute = func(ctx context.Context, req *capability.Request) (res *capability.Result, err error) {
		ev := event{stage: "execute"}
		defer func() {
			if p := recover(); p != nil {
				ev.panicked = p
				h.note(ev)
				panic(p)
			}
			h.note(ev)
		}()
		res, err = c.Execute(ctx, req)
		if res != nil && err == nil {
			if p := followUpProblem(res.FollowUps); p != "" {
				ev.problem = p
			}
		}
		if res != nil {
			if res.Usage.Credit < 0 {
				ev.problem = fmt.Sprintf("negative Usage.Credit %d", res.Usage.Credit)
			}
			for k, v := range res.Usage.Units {
				if v < 0 {
					ev.problem = fmt.Sprintf("negative Usage.Units[%q] %d", k, v)
				}
			}
		}
		return res, err
	}
	reg := capability.NewRegistry()
	if err := reg.Register(w); err != nil {
		t.Fatalf("Register: %v", err)
	}
	r, err := capability.NewRunner(reg, capability.RunnerOptions{})
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	h.runner = r
	return h
}

// followUpProblem says what makes fus undispatchable, or "".
func followUpProblem(fus []capability.FollowUp) string {
	if len(fus) > capability.DefaultMaxFollowUps {
		return fmt.Sprintf("%d follow-ups, over the runner's default limit of %d per call", len(fus), capability.DefaultMaxFollowUps)
	}
	for i, f := range fus {
		if !capability.ValidName(f.Kind) {
			return fmt.Sprintf("follow-up %d: kind %q is not 1 to %d bytes of [a-z0-9_.-]", i, f.Kind, abi.MaxNameBytes)
		}
		if _, err := abi.Marshal(f.Data); err != nil {
			return fmt.Sprintf("follow-up %d (%s): Data is not JSON-encodable: %v", i, f.Kind, err)
		}
	}
	return ""
}

func (h *harness) note(e event) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *harness) caller(seq int) abi.Caller {
	return abi.Caller{
		Tenant:     "capabilitytest",
		Hook:       "conformance",
		Module:     strings.Repeat("0", 64),
		Invocation: fmt.Sprintf("capabilitytest-%d", seq),
		Point:      "message.outbound",
		Granted:    []string{h.c.Name},
	}
}

// call sends payload through the runner and reports every rule it broke.
func (h *harness) call(t *testing.T, payload []byte) callResult {
	t.Helper()
	h.mu.Lock()
	h.seq++
	seq := h.seq
	h.events = nil
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reply := h.runner.HostCall(ctx, &abi.Call{Name: h.c.Name, Payload: payload, Seq: 1, Caller: h.caller(seq)})

	h.mu.Lock()
	events := h.events
	h.mu.Unlock()
	var res callResult
	res.reply = reply
	for _, e := range events {
		if e.stage == "execute" {
			res.executed = true
		}
		if e.panicked != nil {
			t.Errorf("%s panicked on payload %s: %v", e.stage, excerpt(string(payload)), e.panicked)
		}
		if e.problem != "" {
			t.Errorf("%s on payload %s: %s", e.stage, excerpt(string(payload)), e.problem)
		}
	}
	if !reply.Status.Known() {
		t.Errorf("payload %s: unknown status %d", excerpt(string(payload)), reply.Status)
	}
	if reply.Charged != 0 {
		t.Errorf("payload %s: charged %d without a gate", excerpt(string(payload)), reply.Charged)
	}
	if reply.Status == abi.StatusOK {
		if _, err := abi.ParseJSON(reply.Body, abi.JSONLimits{MaxBytes: len(reply.Body) + 1, MaxDepth: 1 << 10}); err != nil {
			t.Errorf("payload %s: OK body is not strict JSON: %v", excerpt(string(payload)), err)
		}
	} else {
		e := abi.DecodeError(reply.Status, reply.Body)
		if e.Message == "" || e.Message == "malformed error body" {
			t.Errorf("payload %s: status %v with a malformed error body %s", excerpt(string(payload)), reply.Status, reply.Body)
		}
	}
	return res
}

// gen makes random valid-JSON payloads.
type gen struct {
	r     *rand.Rand
	keys  []string // property names seen in the valid cases
	valid []any    // the parsed valid cases
}

func newGen(name string, valid []Case) *gen {
	f := fnv.New64a()
	f.Write([]byte(name))
	g := &gen{r: rand.New(rand.NewPCG(f.Sum64(), 0x5eed))}
	seen := map[string]bool{}
	for _, c := range valid {
		v, err := abi.ParseJSON([]byte(c.Payload), abi.JSONLimits{})
		if err != nil {
			continue
		}
		g.valid = append(g.valid, v)
		if m, ok := v.(map[string]any); ok {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					g.keys = append(g.keys, k)
				}
			}
		}
	}
	g.keys = append(g.keys, "x", "", "__proto__", "Key")
	return g
}

func (g *gen) payload() []byte {
	var v any
	if len(g.valid) > 0 && g.r.IntN(2) == 0 {
		v = g.mutate(g.valid[g.r.IntN(len(g.valid))])
	} else {
		v = g.value(0)
	}
	b, err := abi.Marshal(v)
	if err != nil {
		panic(err) // the generator makes only JSON values
	}
	return b
}

// mutate changes one thing in a copy of a valid payload.
func (g *gen) mutate(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return g.value(0)
	}
	out := make(map[string]any, len(m)+1)
	for k, x := range m {
		out[k] = x
	}
	switch g.r.IntN(4) {
	case 0: // drop a key
		for k := range out {
			delete(out, k)
			break
		}
	case 1: // add a key
		out[g.key()] = g.value(1)
	default: // replace a value
		out[g.key()] = g.value(1)
		if len(m) > 0 {
			for k := range out {
				out[k] = g.value(1)
				break
			}
		}
	}
	return out
}

func (g *gen) key() string { return g.keys[g.r.IntN(len(g.keys))] }

func (g *gen) value(depth int) any {
	n := 9
	if depth >= 4 {
		n = 7 // scalars only
	}
	switch g.r.IntN(n) {
	case 0:
		return nil
	case 1:
		return g.r.IntN(2) == 0
	case 2:
		ints := []string{"0", "-1", "1", "2", "100", "4096", "4097", "9007199254740991", "-9007199254740991"}
		return json.Number(ints[g.r.IntN(len(ints))])
	case 3:
		floats := []string{"0.5", "-0.0", "1e-7", "1.5e300", "3.14159", "1E2"}
		return json.Number(floats[g.r.IntN(len(floats))])
	case 4, 5, 6:
		strs := []string{"", "a", "hello world", "100", "true", "null", "Ünïcødé ✓ 😀", "line\nbreak\r\n\x1b[31m",
			strings.Repeat("long ", 60), "<script>", "../../etc/passwd", "\u0000"}
		return strs[g.r.IntN(len(strs))]
	case 7:
		a := make([]any, g.r.IntN(4))
		for i := range a {
			a[i] = g.value(depth + 1)
		}
		return a
	default:
		m := make(map[string]any)
		for range g.r.IntN(4) {
			m[g.key()] = g.value(depth + 1)
		}
		return m
	}
}

func excerpt(s string) string {
	if len(s) > 120 {
		return fmt.Sprintf("%q...", s[:120])
	}
	return fmt.Sprintf("%q", s)
}
