//go:build !wasip1

package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/hooks-examples/internal/hooktest"
	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

var long = strings.Repeat("The quarterly numbers are in and they look good. ", 10) // 490 characters

func TestSummarize(t *testing.T) {
	ok := func(text string) sdktest.Capability {
		return func(map[string]any) (any, error) {
			return map[string]any{"text": text, "usage": map[string]any{"output_tokens": 9}}, nil
		}
	}
	fail := func(s abi.Status) sdktest.Capability {
		return func(map[string]any) (any, error) { return nil, abi.NewError(s, "from the test") }
	}
	tests := []struct {
		name     string
		text     string
		settings map[string]any
		llm      sdktest.Capability
		want     string // the new text; "" for continue
		reason   string
		calls    int
	}{
		{name: "short text is left alone", text: "Done.", llm: ok("x"), calls: 0},
		{name: "empty text", text: "", llm: ok("x"), calls: 0},
		{name: "long text is summarized", text: long, llm: ok("  Numbers look good.\n"), want: "Numbers look good.", reason: "summarized 490 characters to 18", calls: 1},
		{name: "min_chars counts characters, not bytes", text: strings.Repeat("é", 300), settings: map[string]any{"min_chars": 400}, llm: ok("x"), calls: 0},
		{name: "lower min_chars", text: "A medium reply of some length.", settings: map[string]any{"min_chars": 10}, llm: ok("Medium."), want: "Medium.", calls: 1},
		{name: "insufficient credit", text: long, llm: fail(abi.StatusInsufficientCredit), reason: "not summarized: insufficient credit for llm.run", calls: 1},
		{name: "denied", text: long, llm: fail(abi.StatusDenied), reason: "not summarized: llm.run is not granted to this hook", calls: 1},
		{name: "rate limited", text: long, llm: fail(abi.StatusRateLimited), reason: "not summarized: llm.run is rate limited", calls: 1},
		{name: "capability failed", text: long, llm: fail(abi.StatusCapabilityFailed), reason: "not summarized: llm.run failed (capability_failed)", calls: 1},
		{name: "quota", text: long, llm: fail(abi.StatusQuotaExceeded), reason: "not summarized: llm.run failed (quota_exceeded)", calls: 1},
		{name: "malformed result", text: long, llm: func(map[string]any) (any, error) { return json.RawMessage(`{"txt":"x"}`), nil }, reason: "not summarized: llm.run returned a malformed result", calls: 1},
		{name: "empty summary", text: long, llm: ok(" \n"), reason: "not summarized: the model returned an empty summary", calls: 1},
		{name: "summary not shorter", text: long, llm: ok(long + "!"), reason: "not summarized: the summary (491 characters) is not shorter than the text (490)", calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := sdktest.HostFor(t, "manifest.json")
			h.Register("llm.run", tt.llm)
			dec := hooktest.Reply(t, h, "How did we do?", tt.text, tt.settings)
			hooktest.WantModify(t, dec, "outgoing", tt.want, tt.reason)
			if got := len(h.Calls()); got != tt.calls {
				t.Errorf("%d llm.run calls, want %d", got, tt.calls)
			}
		})
	}
}

func TestPayload(t *testing.T) {
	h := sdktest.NewHost()
	var got map[string]any
	h.Register("llm.run", func(p map[string]any) (any, error) {
		got = p
		return map[string]any{"text": "short"}, nil
	})
	_, err := h.Run(sdktest.Invocation{
		Point:    "message.outbound",
		Context:  map[string]any{"outgoing": long},
		Settings: map[string]any{"max_tokens": 60, "prompt_prefix": "TL;DR: "},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got["prompt"] != "TL;DR: "+long || got["max_tokens"] != json.Number("60") {
		t.Errorf("payload = %v", got)
	}
	_, err = h.Run(sdktest.Invocation{Point: "message.outbound", Context: map[string]any{"outgoing": long}})
	if err != nil {
		t.Fatal(err)
	}
	if got["prompt"] != DefaultPromptPrefix+long || got["max_tokens"] != json.Number("120") {
		t.Errorf("default payload = %v", got)
	}
}

func TestCredit(t *testing.T) {
	h := sdktest.NewHost()
	h.Register("llm.run", func(map[string]any) (any, error) { return map[string]any{"text": "short"}, nil })
	h.SetCredit(10)
	h.SetCost("llm.run", 6)
	inv := sdktest.Invocation{Point: "message.outbound", Context: map[string]any{"outgoing": long}}
	first, err1 := h.Run(inv)
	second, err2 := h.Run(inv)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if first.Action != abi.ActionModify || second.Action != abi.ActionContinue || h.Credit() != 4 {
		t.Errorf("first %s, second %s (%q), balance %d", first.Action, second.Action, second.Reason, h.Credit())
	}
}

func TestToolResult(t *testing.T) {
	h := sdktest.NewHost()
	h.Register("llm.run", func(map[string]any) (any, error) { return map[string]any{"text": "Three files."}, nil })
	dec, err := h.Run(sdktest.Invocation{Point: "tool.after", Context: map[string]any{"tool": "ls", "result": long}})
	if err != nil || dec.Action != abi.ActionModify || dec.Context["result"] != "Three files." {
		t.Fatalf("decision %+v, err %v", dec, err)
	}
	// A result that is not text is let through.
	dec, err = h.Run(sdktest.Invocation{Point: "tool.after", Context: map[string]any{"tool": "ls", "result": []any{long}}})
	if err != nil || dec.Action != abi.ActionContinue {
		t.Fatalf("decision %+v, err %v", dec, err)
	}
}

func TestSettingsErrorsFailTheHook(t *testing.T) {
	for name, settings := range map[string]map[string]any{
		"min_chars not an integer": {"min_chars": 1.5},
		"min_chars negative":       {"min_chars": -1},
		"max_tokens zero":          {"max_tokens": 0},
		"max_tokens a string":      {"max_tokens": "120"},
		"prompt_prefix a number":   {"prompt_prefix": 3},
	} {
		t.Run(name, func(t *testing.T) {
			h := sdktest.NewHost()
			h.Register("llm.run", func(map[string]any) (any, error) { return map[string]any{"text": "x"}, nil })
			_, err := h.Run(sdktest.Invocation{Point: "message.outbound", Context: map[string]any{"outgoing": long}, Settings: settings})
			if !errors.Is(err, sdktest.ErrHookFailed) || !strings.Contains(err.Error(), "setting") {
				t.Fatalf("err = %v, want a hook failure naming the setting", err)
			}
			if len(h.Calls()) != 0 {
				t.Error("called llm.run with invalid settings")
			}
		})
	}
}
