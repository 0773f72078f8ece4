//go:build !wasip1

package sdk_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk"
	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

var outbound = sdktest.Invocation{Point: "message.outbound", Context: map[string]any{"outgoing": "hello"}}

// plain adapts a handler without an error for RunHandler.
func plain(f func(*sdk.Invocation) sdk.Decision) func(*sdk.Invocation) (sdk.Decision, error) {
	return func(inv *sdk.Invocation) (sdk.Decision, error) { return f(inv), nil }
}

// runCalls runs f as h's handler at message.outbound and returns the errors
// of the capability calls f made; a failed run fails t.
func runCalls(t *testing.T, h *sdktest.Host, f func() []error) []error {
	t.Helper()
	var errs []error
	_, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision {
		errs = f()
		return sdk.Continue()
	}), outbound)
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

func TestDecisions(t *testing.T) {
	tests := []struct {
		name  string
		point string
		d     sdk.Decision
		want  abi.Decision
	}{
		{"continue", "message.outbound", sdk.Continue(), abi.Decision{Action: abi.ActionContinue}},
		{"modify", "message.outbound", sdk.Modify("outgoing", "bye").WithReason("r"), abi.Decision{Action: abi.ActionModify, Context: map[string]any{"outgoing": "bye"}, Reason: "r"}},
		{"modify primary inbound", "message.inbound", sdk.ModifyPrimary("x"), abi.Decision{Action: abi.ActionModify, Context: map[string]any{"incoming": "x"}}},
		{"modify primary object", "tool.before", sdk.ModifyPrimary(map[string]any{"q": "x"}), abi.Decision{Action: abi.ActionModify, Context: map[string]any{"arguments": map[string]any{"q": "x"}}}},
		{"block", "message.outbound", sdk.Block("b").WithUserMessage("u").DoNotReplyAgain(), abi.Decision{Action: abi.ActionBlock, Reason: "b", UserMessage: "u", DoNotReplyAgain: true}},
		{"ask", "tool.before", sdk.Ask("a"), abi.Decision{Action: abi.ActionAsk, Reason: "a"}},
		{"ask with pending", "tool.before", sdk.Ask("a").WithPending(map[string]any{"tool": "rm"}), abi.Decision{Action: abi.ActionAsk, Reason: "a", Pending: map[string]any{"tool": "rm"}}},
		{"short circuit", "message.inbound", sdk.Continue().ShortCircuit(), abi.Decision{Action: abi.ActionContinue, ShortCircuit: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := sdktest.NewHost()
			got, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision { return tt.d }), sdktest.Invocation{Point: tt.point})
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Shape = abi.ShapeCanonical
			if gb, _ := got.Encode(); true {
				wb, _ := tt.want.Encode()
				if string(gb) != string(wb) || got.Shape != tt.want.Shape {
					t.Errorf("decision = %s (%s), want %s", gb, got.Shape, wb)
				}
			}
		})
	}
}

func TestHookFailures(t *testing.T) {
	tests := []struct {
		name    string
		point   string
		handler func(*sdk.Invocation) (sdk.Decision, error)
		want    string
	}{
		{"handler error", "message.outbound", func(*sdk.Invocation) (sdk.Decision, error) {
			return sdk.Continue(), errors.New("bad settings")
		}, "handler returned an error: bad settings"},
		{"handler panic", "message.outbound", func(*sdk.Invocation) (sdk.Decision, error) {
			panic("boom")
		}, "handler panicked: boom"},
		{"modify of a field the point does not allow", "message.outbound", plain(func(*sdk.Invocation) sdk.Decision {
			return sdk.Modify("incoming", "x")
		}), `modify of "incoming", which point message.outbound does not allow`},
		{"empty modify", "message.outbound", plain(func(*sdk.Invocation) sdk.Decision {
			return sdk.ModifyFields(nil)
		}), "modify changes no field"},
		{"modify primary without a primary field", "context.assemble", plain(func(*sdk.Invocation) sdk.Decision {
			return sdk.ModifyPrimary("x")
		}), "ModifyPrimary at a point without a primary text field"},
		{"unencodable value", "message.outbound", plain(func(*sdk.Invocation) sdk.Decision {
			return sdk.Modify("outgoing", func() {})
		}), "encoding the decision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sdktest.NewHost().RunHandler(tt.handler, sdktest.Invocation{Point: tt.point})
			if !errors.Is(err, sdktest.ErrHookFailed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrHookFailed containing %q", err, tt.want)
			}
		})
	}
}

func TestNoHandlerRegistered(t *testing.T) {
	// This test binary registers no handler.
	_, err := sdktest.NewHost().Run(outbound)
	if !errors.Is(err, sdktest.ErrHookFailed) || !strings.Contains(err.Error(), "no handler registered") {
		t.Fatalf("err = %v", err)
	}
}

func TestInvocationDocument(t *testing.T) {
	var got *sdk.Invocation
	h := sdktest.NewHost()
	_, err := h.RunHandler(plain(func(inv *sdk.Invocation) sdk.Decision {
		got = inv
		return sdk.Continue()
	}), sdktest.Invocation{
		Point:    "tool.after",
		Context:  map[string]any{"tool": "search", "result": "r", "arguments": map[string]any{"n": 3}},
		Settings: map[string]any{"threshold": 0.5},
		Meta:     sdk.Meta{Hook: "h", Tenant: "acme"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Point != "tool.after" || got.PrimaryText() != "r" || got.ContextString("tool") != "search" {
		t.Errorf("invocation = %+v", got)
	}
	if n := got.Context()["arguments"].(map[string]any)["n"]; n != json.Number("3") {
		t.Errorf("numbers arrive as json.Number, got %#v", n)
	}
	if f := got.SettingFloat("threshold", 1); f != 0.5 {
		t.Errorf("SettingFloat = %v", f)
	}
	if got.Meta.Hook != "h" || got.Meta.Tenant != "acme" || !strings.HasPrefix(got.Meta.Invocation, "sdktest-") {
		t.Errorf("meta = %+v", got.Meta)
	}
}

func TestMalformedInvocationDocuments(t *testing.T) {
	for name, doc := range map[string]string{
		"empty":          ``,
		"not json":       `{"abi":1,`,
		"wrong abi":      `{"abi":2,"point":"message.outbound","context":{}}`,
		"context string": `{"abi":1,"point":"message.outbound","context":"x"}`,
		"duplicate key":  `{"abi":1,"abi":1,"point":"message.outbound","context":{}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sdktest.NewHost().RunDocument([]byte(doc))
			if !errors.Is(err, sdktest.ErrHookFailed) {
				t.Fatalf("err = %v, want ErrHookFailed", err)
			}
		})
	}
}

func TestCallResults(t *testing.T) {
	type answer struct {
		Text  string `json:"text"`
		Count int    `json:"count"`
	}
	h := sdktest.NewHost()
	h.Register("echo", func(p map[string]any) (any, error) { return p, nil })
	h.Register("str", func(map[string]any) (any, error) { return "s", nil })
	h.Register("raw", func(map[string]any) (any, error) { return json.RawMessage(`[1, 2]`), nil })
	var (
		anyV    any
		mapV    map[string]any
		strV    string
		rawV    json.RawMessage
		structV answer
	)
	errs := runCalls(t, h, func() []error {
		return []error{
			sdk.Call("echo", map[string]any{"text": "t", "count": 2}, &anyV),
			sdk.Call("echo", map[string]any{"text": "t"}, &mapV),
			sdk.Call("str", nil, &strV),
			sdk.Call("raw", nil, &rawV),
			sdk.Call("echo", answer{Text: "u", Count: 3}, &structV),
			sdk.Call("echo", nil, nil),
			sdk.Call("echo", json.RawMessage(`{"text":"raw"}`), &mapV),
		}
	})
	if e := errors.Join(errs...); e != nil {
		t.Fatal(e)
	}
	if m := anyV.(map[string]any); m["text"] != "t" || m["count"] != json.Number("2") {
		t.Errorf("*any = %#v", anyV)
	}
	if mapV["text"] != "raw" || strV != "s" || string(rawV) != `[1, 2]` || structV != (answer{"u", 3}) {
		t.Errorf("results: map %v, string %q, raw %s, struct %+v", mapV, strV, rawV, structV)
	}
	calls := h.Calls()
	if len(calls) != 7 || string(calls[2].Payload) != `{}` || string(calls[0].Payload) != `{"count":2,"text":"t"}` {
		t.Errorf("calls = %+v", calls)
	}
}

func TestCallMalformedResults(t *testing.T) {
	h := sdktest.NewHost()
	h.Register("num", func(map[string]any) (any, error) { return 1, nil })
	h.Register("bad", func(map[string]any) (any, error) { return json.RawMessage(`{"a":1,"a":2}`), nil })
	h.Register("llm.run", func(map[string]any) (any, error) { return map[string]any{"txt": "x"}, nil })
	h.Register("kv.get", func(map[string]any) (any, error) { return map[string]any{"found": "yes"}, nil })
	errs := runCalls(t, h, func() []error {
		var s string
		var m map[string]any
		var st struct{ A string }
		errs := []error{sdk.Call("num", nil, &s), sdk.Call("num", nil, &m), sdk.Call("bad", nil, &m), sdk.Call("num", nil, &st)}
		_, err := sdk.LLMRun("p", 0)
		errs = append(errs, err)
		_, _, err = sdk.KVGet("k")
		return append(errs, err)
	})
	for i, err := range errs {
		if !errors.Is(err, sdk.ErrMalformedResult) {
			t.Errorf("call %d: err = %v, want ErrMalformedResult", i, err)
		}
	}
}

func TestCallErrors(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(h *sdktest.Host)
		call     func() error
		sentinel error
		message  string
	}{
		{"unknown capability", func(*sdktest.Host) {}, func() error { return sdk.Call("nope.x", nil, nil) }, sdk.ErrUnknownCapability, `no capability named "nope.x"`},
		{"status from *abi.Error", func(h *sdktest.Host) {
			h.RegisterError("llm.run", abi.StatusInsufficientCredit, "balance 0")
		}, func() error { _, err := sdk.LLMRun("p", 10); return err }, sdk.ErrInsufficientCredit, "balance 0"},
		{"status from *sdk.Error", func(h *sdktest.Host) {
			h.Register("x.y", func(map[string]any) (any, error) { return nil, sdk.ErrRateLimited })
		}, func() error { return sdk.Call("x.y", nil, nil) }, sdk.ErrRateLimited, "rate limited"},
		{"plain error is capability_failed", func(h *sdktest.Host) {
			h.Register("x.y", func(map[string]any) (any, error) { return nil, errors.New("upstream 500") })
		}, func() error { return sdk.Call("x.y", nil, nil) }, sdk.ErrCapabilityFailed, "upstream 500"},
		{"panic is capability_failed", func(h *sdktest.Host) {
			h.Register("x.y", func(map[string]any) (any, error) { panic("oops") })
		}, func() error { return sdk.Call("x.y", nil, nil) }, sdk.ErrCapabilityFailed, "panicked: oops"},
		{"not granted", func(h *sdktest.Host) {
			h.Grant("kv.get")
		}, func() error { return sdk.Log("info", "x") }, sdk.ErrDenied, "not granted"},
		{"payload not an object", func(*sdktest.Host) {}, func() error { return sdk.Call("kv.get", []int{1}, nil) }, sdk.ErrInvalidRequest, "object"},
		{"payload not strict json", func(*sdktest.Host) {}, func() error { return sdk.Call("kv.get", json.RawMessage(`{"key":1,}`), nil) }, sdk.ErrInvalidRequest, "payload"},
		{"payload unencodable", func(*sdktest.Host) {}, func() error { return sdk.KVSet("k", func() {}) }, nil, "encoding the payload"},
		{"quota", func(h *sdktest.Host) { h.SetMaxCalls(1) }, func() error {
			_ = sdk.Log("info", "one")
			return sdk.Log("info", "two")
		}, sdk.ErrQuotaExceeded, "limit"},
		{"credit", func(h *sdktest.Host) {
			h.Register("llm.run", func(map[string]any) (any, error) { return map[string]any{"text": "t"}, nil })
			h.SetCredit(5)
			h.SetCost("llm.run", 3)
		}, func() error {
			if _, err := sdk.LLMRun("one", 0); err != nil {
				return err
			}
			_, err := sdk.LLMRun("two", 0)
			return err
		}, sdk.ErrInsufficientCredit, `"llm.run" costs 3`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := sdktest.NewHost()
			tt.setup(h)
			var got error
			if _, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision {
				got = tt.call()
				return sdk.Continue()
			}), outbound); err != nil {
				t.Fatal(err)
			}
			if got == nil || !strings.Contains(got.Error(), tt.message) {
				t.Fatalf("err = %v, want one containing %q", got, tt.message)
			}
			if tt.sentinel == nil {
				return
			}
			if !errors.Is(got, tt.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", got, tt.sentinel)
			}
			var e *sdk.Error
			if !errors.As(got, &e) || e.Code != e.Status.Code() || e.Capability == "" {
				t.Errorf("errors.As: %+v", e)
			}
			if !errors.Is(got, &abi.Error{Status: e.Status}) {
				t.Errorf("errors.Is against *abi.Error failed")
			}
		})
	}
}

func TestCreditIsChargedOnce(t *testing.T) {
	h := sdktest.NewHost()
	h.Register("llm.run", func(map[string]any) (any, error) { return map[string]any{"text": "t"}, nil })
	h.SetCredit(5)
	h.SetCost("llm.run", 3)
	if _, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision {
		sdk.LLMRun("p", 0)
		return sdk.Continue()
	}), outbound); err != nil {
		t.Fatal(err)
	}
	if got := h.Credit(); got != 2 {
		t.Errorf("balance = %d, want 2", got)
	}
}

// TestLargeResultsAreTakenNotRerun checks the buffer-growing path: a result
// bigger than the SDK's buffer is parked by the host and fetched with one
// take, the capability runs once, and the grown buffer is kept for the next
// call unless it is over the SDK's limit.
func TestLargeResultsAreTakenNotRerun(t *testing.T) {
	overhead := len(`{"text":""}`)
	for _, size := range []int{10, sdk.ScratchSize - overhead, sdk.ScratchSize - overhead + 1, 100 << 10, sdk.MaxKeptScratch, 2 << 20} {
		sdk.ResetScratch()
		h := sdktest.NewHost()
		runs := 0
		text := strings.Repeat("a", size)
		h.Register("llm.run", func(map[string]any) (any, error) {
			runs++
			return map[string]any{"text": text}, nil
		})
		var got [2]string
		_, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision {
			for i := range got {
				got[i], _ = sdk.LLMRun("p", 0)
			}
			return sdk.Continue()
		}), outbound)
		if err != nil {
			t.Fatal(err)
		}
		calls := h.Calls()
		if runs != 2 || len(calls) != 2 || got[0] != text || got[1] != text {
			t.Fatalf("size %d: runs %d, calls %d, got lengths %d %d", size, runs, len(calls), len(got[0]), len(got[1]))
		}
		body := size + overhead
		wantParked := [2]bool{body > sdk.ScratchSize, body > sdk.MaxKeptScratch}
		for i, c := range calls {
			wantTakes := 0
			if wantParked[i] {
				wantTakes = 1
			}
			if c.Parked != wantParked[i] || c.Takes != wantTakes {
				t.Errorf("size %d, call %d: parked %t takes %d, want %t %d", size, i, c.Parked, c.Takes, wantParked[i], wantTakes)
			}
		}
	}
	sdk.ResetScratch()
}

func TestLargeInvocationDocument(t *testing.T) {
	big := strings.Repeat("z", 3<<20)
	dec, err := sdktest.NewHost().RunHandler(plain(func(inv *sdk.Invocation) sdk.Decision {
		return sdk.ModifyPrimary(strings.ToUpper(inv.PrimaryText()[:3]))
	}), sdktest.Invocation{Point: "message.outbound", Context: map[string]any{"outgoing": big}})
	if err != nil {
		t.Fatal(err)
	}
	if dec.Context["outgoing"] != "ZZZ" {
		t.Errorf("decision = %+v", dec)
	}
}

func TestCallOutsideInvocation(t *testing.T) {
	h := sdktest.NewHost()
	h.Register("llm.run", func(map[string]any) (any, error) { return map[string]any{"text": "t"}, nil })
	_, err := sdk.LLMRun("p", 1)
	if !errors.Is(err, sdk.ErrNotInInvocation) {
		t.Fatalf("err = %v, want ErrNotInInvocation", err)
	}
	if err := sdk.Call("llm.run", nil, nil); !errors.Is(err, sdk.ErrNotInInvocation) || !strings.Contains(err.Error(), "llm.run") {
		t.Fatalf("err = %v, want ErrNotInInvocation naming llm.run", err)
	}
	// A goroutine that outlives its handler is outside the invocation too.
	done := make(chan error)
	if _, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision {
		go func() {
			<-done
			done <- sdk.Log("info", "late")
		}()
		return sdk.Continue()
	}), outbound); err != nil {
		t.Fatal(err)
	}
	done <- nil
	if err := <-done; !errors.Is(err, sdk.ErrNotInInvocation) {
		t.Fatalf("late call: err = %v", err)
	}
	if len(h.Calls()) != 0 {
		t.Errorf("host saw %d calls", len(h.Calls()))
	}
}

func TestKVAndLog(t *testing.T) {
	h := sdktest.NewHost()
	if err := h.SetKV("seen", 2); err != nil {
		t.Fatal(err)
	}
	type result struct {
		v       any
		found   bool
		missing bool
		err     error
	}
	var r result
	_, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision {
		var err1, err2, err3, err4 error
		r.v, r.found, err1 = sdk.KVGet("seen")
		_, found, err2 := sdk.KVGet("missing")
		r.missing = !found
		err3 = sdk.KVSet("new", map[string]any{"a": []any{1, "b"}})
		err4 = sdk.Log("warn", "hello")
		r.err = errors.Join(err1, err2, err3, err4)
		return sdk.Continue()
	}), outbound)
	if err != nil || r.err != nil {
		t.Fatal(err, r.err)
	}
	if r.v != json.Number("2") || !r.found || !r.missing {
		t.Errorf("KVGet: %+v", r)
	}
	v, ok := h.KV("new")
	if b, _ := json.Marshal(v); !ok || string(b) != `{"a":[1,"b"]}` {
		t.Errorf("KV(new) = %s, %t", b, ok)
	}
	if logs := h.Logs(); len(logs) != 1 || logs[0] != (sdktest.LogEntry{Level: "warn", Message: "hello"}) {
		t.Errorf("logs = %+v", logs)
	}
}

func TestLLMRunPayload(t *testing.T) {
	h := sdktest.NewHost()
	h.Register("llm.run", func(map[string]any) (any, error) { return map[string]any{"text": "ok", "tokens": 3}, nil })
	_, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision {
		sdk.LLMRun("say <hi>", 50)
		sdk.LLMRun("no limit", 0)
		return sdk.Continue()
	}), outbound)
	if err != nil {
		t.Fatal(err)
	}
	c := h.Calls()
	if string(c[0].Payload) != `{"max_tokens":50,"prompt":"say <hi>"}` || string(c[1].Payload) != `{"prompt":"no limit"}` {
		t.Errorf("payloads %s, %s", c[0].Payload, c[1].Payload)
	}
}

func TestManifest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(path, []byte(`{"name":"m","capabilities":["kv.get"],"points":["message.outbound"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	h := sdktest.NewHost()
	if err := h.UseManifest(path); err != nil {
		t.Fatal(err)
	}
	var kvErr, logErr error
	if _, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision {
		_, _, kvErr = sdk.KVGet("k")
		logErr = sdk.Log("info", "x")
		return sdk.Continue()
	}), outbound); err != nil {
		t.Fatal(err)
	}
	if kvErr != nil || !errors.Is(logErr, sdk.ErrDenied) {
		t.Errorf("kv.get: %v; log.write: %v (want denied: not in the manifest)", kvErr, logErr)
	}
	if _, err := h.RunHandler(plain(func(*sdk.Invocation) sdk.Decision { return sdk.Continue() }), sdktest.Invocation{Point: "message.inbound"}); err == nil || errors.Is(err, sdktest.ErrHookFailed) {
		t.Errorf("run at a point the manifest does not list: err = %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"capabilities":"llm.run"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.UseManifest(path); err == nil {
		t.Error("UseManifest accepted a bad manifest")
	}
}

// TestConcurrentCalls runs capability calls from several goroutines of one
// handler; under -race it checks the SDK's buffer locking.
func TestConcurrentCalls(t *testing.T) {
	h := sdktest.NewHost()
	big := strings.Repeat("b", 20<<10)
	h.Register("echo", func(p map[string]any) (any, error) {
		if p["big"] == true {
			return map[string]any{"text": big}, nil
		}
		return p, nil
	})
	errs := runCalls(t, h, func() []error {
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				var m map[string]any
				err := sdk.Call("echo", map[string]any{"i": i, "big": i%2 == 0}, &m)
				if err == nil && i%2 == 0 && m["text"] != big {
					err = errors.New("wrong result")
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			})
		}
		wg.Wait()
		return errs
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestParallelHosts runs hooks on many hosts at once; runs are serialised
// by sdktest, and -race checks the SDK's state.
func TestParallelHosts(t *testing.T) {
	for i := range 4 {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			h := sdktest.NewHost()
			for range 20 {
				dec, err := h.RunHandler(plain(func(inv *sdk.Invocation) sdk.Decision {
					sdk.Log("info", inv.Meta.Invocation)
					return sdk.ModifyPrimary(strings.Repeat("x", i))
				}), outbound)
				if err != nil || dec.Context["outgoing"] != strings.Repeat("x", i) {
					t.Fatalf("%v %+v", err, dec)
				}
			}
		})
	}
}

func BenchmarkRun(b *testing.B) {
	h := sdktest.NewHost()
	h.Register("llm.run", func(map[string]any) (any, error) { return map[string]any{"text": "summary"}, nil })
	handler := plain(func(inv *sdk.Invocation) sdk.Decision {
		text, err := sdk.LLMRun(inv.PrimaryText(), 10)
		if err != nil {
			return sdk.Continue()
		}
		return sdk.ModifyPrimary(text)
	})
	inv := sdktest.Invocation{Point: "message.outbound", Context: map[string]any{"outgoing": strings.Repeat("word ", 200)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.RunHandler(handler, inv); err != nil {
			b.Fatal(err)
		}
	}
}
