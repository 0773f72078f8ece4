//go:build !wasip1

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk"
	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

func newHost(t *testing.T) *sdktest.Host { return sdktest.HostFor(t, "manifest.json") }

// step is one recorded tool call: at tool.before, or at tool.after when
// result is set.
type step struct {
	tool   string
	args   map[string]any
	result any    // non-nil: tool.after
	conv   string // the context's conversation field, if any
	want   string // c (continue), w (warn: continue with a reason, or modify at tool.after), b (block)
	// pattern, if set, must be named in the reason.
	pattern string
}

func (s step) run(t *testing.T, h *sdktest.Host, settings map[string]any) *abi.Decision {
	t.Helper()
	ctx := map[string]any{"tool": s.tool, "arguments": s.args}
	point := "tool.before"
	if s.result != nil {
		point = "tool.after"
		ctx["result"] = s.result
	}
	if s.conv != "" {
		ctx["conversation"] = s.conv
	}
	dec, err := h.Run(sdktest.Invocation{Point: point, Context: ctx, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

func kind(d *abi.Decision) string {
	switch {
	case d.Action == abi.ActionBlock:
		return "b"
	case d.Action == abi.ActionModify, d.Action == abi.ActionContinue && d.Reason != "":
		return "w"
	case d.Action == abi.ActionContinue:
		return "c"
	}
	return string(d.Action)
}

func read(path string) map[string]any { return map[string]any{"path": path} }
func temp(v float64) map[string]any   { return map[string]any{"model": "m", "temperature": v} }
func search(q string) map[string]any  { return map[string]any{"query": q} }
func page(n int) map[string]any       { return map[string]any{"query": "invoices", "page": n} }
func edit(line string) map[string]any { return map[string]any{"file": "a.go", "line": line} }
func same(s step, n int) (out []step) { // n copies of s
	for range n {
		out = append(out, s)
	}
	return out
}

// TestRecordedSequences replays recorded tool-call sequences and checks the
// decision at each call.
func TestRecordedSequences(t *testing.T) {
	long := strings.Repeat("the quarterly report says revenue grew 4% ", 3)
	tests := []struct {
		name     string
		settings map[string]any
		steps    []step
	}{
		{name: "repetition: the same read five times", steps: []step{
			{tool: "files.read", args: read("/a"), want: "c"},
			{tool: "files.read", args: read("/a"), want: "c"},
			{tool: "files.read", args: read("/a"), want: "w", pattern: "repetition"},
			{tool: "files.read", args: read("/a"), want: "w", pattern: "repetition"},
			{tool: "files.read", args: read("/a"), want: "b", pattern: "repetition"},
			{tool: "files.read", args: read("/a"), want: "b", pattern: "repetition"},
		}},
		{name: "different arguments are no loop", steps: []step{
			{tool: "files.read", args: read("/a"), want: "c"},
			{tool: "files.read", args: read("/b"), want: "c"},
			{tool: "files.read", args: read("/c/d"), want: "c"},
			{tool: "files.write", args: map[string]any{"path": "/e", "text": "x"}, want: "c"},
			{tool: "files.read", args: read("/f"), want: "c"},
		}},
		{name: "oscillation: write and undo", steps: []step{
			{tool: "editor.write", args: edit("x := 1"), want: "c"},
			{tool: "editor.undo", args: map[string]any{"file": "a.go"}, want: "c"},
			{tool: "editor.write", args: edit("x := 1"), want: "w", pattern: "redundant"},
			{tool: "editor.undo", args: map[string]any{"file": "a.go"}, want: "w", pattern: "oscillation"},
			{tool: "editor.write", args: edit("x := 1"), want: "w", pattern: "oscillation"},
			{tool: "editor.undo", args: map[string]any{"file": "a.go"}, want: "b", pattern: "oscillation"},
		}},
		{name: "oscillation alone, redundant off", settings: map[string]any{"redundant_warn_at": 0, "redundant_block_at": 0}, steps: []step{
			{tool: "cfg.set", args: temp(0.1), want: "c"},
			{tool: "cfg.set", args: temp(0.9), want: "c"},
			{tool: "cfg.set", args: temp(0.1), want: "c"},
			{tool: "cfg.set", args: temp(0.9), want: "w", pattern: "oscillation"},
		}},
		{name: "drift: temperature creeping up", steps: []step{
			{tool: "llm.tune", args: temp(0.1), want: "c"},
			{tool: "llm.tune", args: temp(0.2), want: "c"},
			{tool: "llm.tune", args: temp(0.3), want: "c"},
			{tool: "llm.tune", args: temp(0.4), want: "w", pattern: "drift"},
			{tool: "llm.tune", args: temp(0.5), want: "w", pattern: "drift"},
			{tool: "llm.tune", args: temp(0.6), want: "w", pattern: "drift"},
			{tool: "llm.tune", args: temp(0.7), want: "b", pattern: "drift"},
		}},
		{name: "drift: a query edited a little at a time", settings: map[string]any{"drift_max_edit": 16}, steps: []step{
			{tool: "web.search", args: search("golang wasm"), want: "c"},
			{tool: "web.search", args: search("golang wasm reactor"), want: "c"},
			{tool: "web.search", args: search("golang wasm reactor mode"), want: "c"},
			{tool: "web.search", args: search("golang wasm reactor modes"), want: "w", pattern: "drift"},
		}},
		{name: "a rewritten query is no drift", steps: []step{
			{tool: "web.search", args: search("golang wasm"), want: "c"},
			{tool: "web.search", args: search("how do I export a function from a Go reactor"), want: "c"},
			{tool: "web.search", args: search("wazero host functions with context cancellation"), want: "c"},
			{tool: "web.search", args: search("tinygo versus go for webassembly size"), want: "c"},
		}},
		{name: "drift at tool.after: paging with new results is progress", steps: []step{
			{tool: "db.query", args: page(1), result: "rows 1-10", want: "c"},
			{tool: "db.query", args: page(2), result: "rows 11-20", want: "c"},
			{tool: "db.query", args: page(3), result: "rows 21-30", want: "c"},
			{tool: "db.query", args: page(4), result: "rows 31-40", want: "c"},
			{tool: "db.query", args: page(5), result: "rows 41-50", want: "c"},
		}},
		{name: "drift at tool.after: small steps, the same result", settings: map[string]any{"redundant_warn_at": 0}, steps: []step{
			{tool: "db.query", args: page(1), result: "no rows", want: "c"},
			{tool: "db.query", args: page(2), result: "no rows", want: "c"},
			{tool: "db.query", args: page(3), result: "no rows", want: "c"},
			{tool: "db.query", args: page(4), result: "no rows", want: "w", pattern: "drift"},
		}},
		{name: "redundant at tool.after: the same result again", steps: []step{
			{tool: "web.fetch", args: map[string]any{"url": "https://x.test/"}, result: long, want: "c"},
			{tool: "web.fetch", args: map[string]any{"url": "https://x.test/"}, result: long, want: "w", pattern: "redundant"},
		}},
		{name: "redundant at tool.after: another query, the same long result", steps: []step{
			{tool: "web.search", args: search("q3 revenue"), result: long, want: "c"},
			{tool: "web.search", args: search("third quarter revenue figures"), result: long, want: "w", pattern: "redundant"},
		}},
		{name: "short equal results of different calls are not redundant", steps: []step{
			{tool: "files.write", args: map[string]any{"path": "/a", "text": "1"}, result: "ok", want: "c"},
			{tool: "files.write", args: map[string]any{"path": "/b", "text": "2"}, result: "ok", want: "c"},
			{tool: "files.write", args: map[string]any{"path": "/c", "text": "3"}, result: "ok", want: "c"},
		}},
		{name: "redundant at tool.before: searching again after using the results", steps: []step{
			{tool: "web.search", args: search("wazero fuel"), want: "c"},
			{tool: "web.fetch", args: map[string]any{"url": "https://wazero.io/"}, want: "c"},
			{tool: "notes.write", args: map[string]any{"text": "wazero meters with a listener"}, want: "c"},
			{tool: "web.search", args: search("wazero fuel"), want: "w", pattern: "redundant"},
		}},
		{name: "conversations are apart", steps: []step{
			{tool: "files.read", args: read("/a"), conv: "c1", want: "c"},
			{tool: "files.read", args: read("/a"), conv: "c2", want: "c"},
			{tool: "files.read", args: read("/a"), conv: "c1", want: "c"},
			{tool: "files.read", args: read("/a"), conv: "c2", want: "c"},
			{tool: "files.read", args: read("/a"), conv: "c1", want: "w", pattern: "repetition"},
		}},
		{name: "the window forgets old calls", settings: map[string]any{"window": 3}, steps: []step{
			{tool: "files.read", args: read("/a"), want: "c"},
			{tool: "files.read", args: read("/b"), want: "c"},
			{tool: "files.read", args: read("/c"), want: "c"},
			{tool: "files.read", args: read("/d"), want: "c"},
			{tool: "files.read", args: read("/a"), want: "c"},
		}},
		{name: "thresholds from settings", settings: map[string]any{"repetition_warn_at": 0, "repetition_block_at": 2, "redundant_warn_at": 0}, steps: []step{
			{tool: "files.read", args: read("/a"), want: "c"},
			{tool: "files.read", args: read("/a"), want: "b", pattern: "repetition"},
		}},
		{name: "ignored tools are not recorded", settings: map[string]any{"ignore_tools": []any{"clock.now"}}, steps: append(
			same(step{tool: "clock.now", args: map[string]any{}, want: "c"}, 8),
			step{tool: "files.read", args: read("/a"), want: "c"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			for i, s := range tt.steps {
				dec := s.run(t, h, tt.settings)
				if got := kind(dec); got != s.want {
					t.Fatalf("call %d (%s %v): got %s %+v, want %s", i+1, s.tool, s.args, got, dec, s.want)
				}
				if s.pattern != "" && !strings.Contains(dec.Reason, s.pattern+":") {
					t.Errorf("call %d: reason %q does not name %s", i+1, dec.Reason, s.pattern)
				}
			}
		})
	}
}

// TestDecisions checks what each intervention looks like.
func TestDecisions(t *testing.T) {
	h := newHost(t)
	var dec *abi.Decision
	for range 5 {
		dec = step{tool: "files.read", args: read("/a")}.run(t, h, nil)
	}
	if dec.Action != abi.ActionBlock || dec.UserMessage == "" ||
		!strings.HasPrefix(dec.Reason, "loop detected (block): repetition: files.read called with the same arguments 5 times in the last 5 calls (block at 5)") {
		t.Errorf("block = %+v", dec)
	}

	// At tool.after the warning goes into the result the agent reads.
	h = newHost(t)
	res := "port: 8080"
	step{tool: "files.read", args: read("/a"), result: res}.run(t, h, nil)
	dec = step{tool: "files.read", args: read("/a"), result: res}.run(t, h, nil)
	got, _ := dec.Context["result"].(string)
	if dec.Action != abi.ActionModify || !strings.HasPrefix(got, "[loop detector] Warning: you may be in a loop (redundant: ") ||
		!strings.HasSuffix(got, "\n\n"+res) {
		t.Errorf("warning = %+v", dec)
	}

	// A result that is not a string is wrapped.
	h = newHost(t)
	obj := map[string]any{"rows": []any{1, 2}}
	step{tool: "db.query", args: page(1), result: obj}.run(t, h, nil)
	dec = step{tool: "db.query", args: page(1), result: obj}.run(t, h, nil)
	m, _ := dec.Context["result"].(map[string]any)
	if enc, _ := abi.Marshal(m["result"]); dec.Action != abi.ActionModify || m["loop_warning"] == nil || string(enc) != `{"rows":[1,2]}` {
		t.Errorf("wrapped = %+v", dec)
	}

	// A hard finding at tool.after says the next calls will be blocked.
	h = newHost(t)
	for range 5 {
		dec = step{tool: "files.read", args: read("/a"), result: res}.run(t, h, nil)
	}
	if got, _ := dec.Context["result"].(string); !strings.Contains(got, "further calls like it will be blocked") {
		t.Errorf("hard warning = %q", got)
	}
}

// TestStateIsBounded runs many calls in many conversations and checks that
// what the hook stores stays within its bounds.
func TestStateIsBounded(t *testing.T) {
	h := newHost(t)
	settings := map[string]any{"buckets": 2, "window": 32}
	big := strings.Repeat("x", 4000)
	for i := range 300 {
		args := map[string]any{"path": fmt.Sprintf("/%d/%s", i, big)}
		for k := range 20 { // more leaves than are kept
			args[fmt.Sprintf("k%d", k)] = k
		}
		step{tool: strings.Repeat("t", 500), args: args, result: big, conv: fmt.Sprintf("conv-%d", i%50)}.run(t, h, settings)
	}
	keys := 0
	for _, c := range h.Calls() {
		if c.Name != "kv.set" {
			continue
		}
		if len(c.Payload) > MaxStateBytes+100 {
			t.Fatalf("kv.set of %d bytes, over %d", len(c.Payload), MaxStateBytes)
		}
		var p struct {
			Key   string `json:"key"`
			Value bucket `json:"value"`
		}
		if err := json.Unmarshal(c.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Value.Convs) > ConversationsPerBucket {
			t.Fatalf("%d conversations in a bucket", len(p.Value.Convs))
		}
		for _, cv := range p.Value.Convs {
			if len(cv.Calls) > 32 || len(cv.Last) > maxLeaves {
				t.Fatalf("a conversation holds %d calls and %d leaves", len(cv.Calls), len(cv.Last))
			}
			for _, c := range cv.Calls {
				if len(c.Tool) > maxToolBytes {
					t.Fatalf("tool name of %d bytes stored", len(c.Tool))
				}
			}
		}
	}
	for _, k := range []string{"loop-detector/v1/after/00", "loop-detector/v1/after/01"} {
		if _, ok := h.KV(k); ok {
			keys++
		}
	}
	if keys != 2 {
		t.Errorf("%d of the 2 buckets used", keys)
	}
}

// TestStateFromStore checks that stored state is read back (the window is
// the kv value, not the instance's memory) and that unreadable or oversized
// state is dropped, not trusted.
func TestStateFromStore(t *testing.T) {
	h := newHost(t)
	for range 4 {
		step{tool: "files.read", args: read("/a")}.run(t, h, nil)
	}
	var key string
	for _, c := range h.Calls() {
		if c.Name == "kv.set" {
			var p struct{ Key string }
			_ = json.Unmarshal(c.Payload, &p)
			key = p.Key
		}
	}
	v, _ := h.KV(key)
	// A fresh host with that state: the fifth call is blocked.
	h2 := newHost(t)
	if err := h2.SetKV(key, v); err != nil {
		t.Fatal(err)
	}
	if d := (step{tool: "files.read", args: read("/a")}).run(t, h2, nil); d.Action != abi.ActionBlock {
		t.Errorf("with the stored state: %+v, want block", d)
	}

	for name, bad := range map[string]any{
		"not an object":  "garbage",
		"other version":  map[string]any{"v": 99, "convs": []any{}},
		"too many calls": map[string]any{"v": 1, "convs": []any{map[string]any{"id": "x", "calls": make([]any, MaxWindow+1)}}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHost(t)
			if err := h.SetKV(key, bad); err != nil {
				t.Fatal(err)
			}
			if d := (step{tool: "files.read", args: read("/a")}).run(t, h, nil); d.Action != abi.ActionContinue || d.Reason != "" {
				t.Errorf("decision %+v, want a plain continue", d)
			}
		})
	}
}

func TestKVFailures(t *testing.T) {
	// Not granted: the operator must fix it, so the hook fails.
	h := newHost(t)
	h.Grant()
	if _, err := (step{tool: "files.read", args: read("/a")}).run2(h); !errors.Is(err, sdktest.ErrHookFailed) || !strings.Contains(err.Error(), "kv.get and kv.set granted") {
		t.Errorf("not granted: %v", err)
	}
	// The store fails: the call goes through, the reason says why.
	h = newHost(t)
	h.RegisterError("kv.get", abi.StatusCapabilityFailed, "store down")
	d := step{tool: "files.read", args: read("/a")}.run(t, h, nil)
	if d.Action != abi.ActionContinue || !strings.Contains(d.Reason, "state unavailable") {
		t.Errorf("store down: %+v", d)
	}
	// A write that fails keeps the decision.
	h = newHost(t)
	h.RegisterError("kv.set", abi.StatusQuotaExceeded, "full")
	if d := (step{tool: "files.read", args: read("/a")}).run(t, h, map[string]any{"repetition_block_at": 1, "repetition_warn_at": 0}); d.Action != abi.ActionBlock {
		t.Errorf("write failed: %+v, want block", d)
	}
}

func (s step) run2(h *sdktest.Host) (*abi.Decision, error) {
	return h.Run(sdktest.Invocation{Point: "tool.before", Context: map[string]any{"tool": s.tool, "arguments": s.args}})
}

func TestSettingsErrorsFailTheHook(t *testing.T) {
	for name, settings := range map[string]map[string]any{
		"window too small":       {"window": 1},
		"window too large":       {"window": 33},
		"oscillation of 2":       {"oscillation_warn_at": 2},
		"negative threshold":     {"repetition_block_at": -1},
		"threshold not a number": {"drift_warn_at": "3"},
		"buckets zero":           {"buckets": 0},
		"ignore_tools not array": {"ignore_tools": "x"},
		"drift_max_changed zero": {"drift_max_changed": 0},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newHost(t).Run(sdktest.Invocation{Point: "tool.before", Context: map[string]any{"tool": "x"}, Settings: settings})
			if !errors.Is(err, sdktest.ErrHookFailed) || !strings.Contains(err.Error(), "setting") {
				t.Fatalf("err = %v, want a hook failure naming the setting", err)
			}
		})
	}
}

func TestSmallStep(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{temp(0.1), temp(0.2), true},
		{temp(0.1), temp(0.1), false}, // no change: repetition's
		{search("abc"), search("abcd"), true},
		{search("abc"), search(strings.Repeat("z", 40)), false},
		{map[string]any{"a": 1, "b": 2}, map[string]any{"a": 2, "b": 3}, false}, // two changed
		{map[string]any{"a": 1}, map[string]any{"b": 1}, false},                 // other paths
		{map[string]any{"a": true}, map[string]any{"a": false}, false},          // not a number or string
		{map[string]any{"a": 1}, map[string]any{"a": "1"}, false},
	}
	for _, tt := range tests {
		a, b := leavesOf(jsonValue(t, tt.a), true), leavesOf(jsonValue(t, tt.b), true)
		if got := smallStep("t", a, "t", b, 1, 16); got != tt.want {
			t.Errorf("smallStep(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
	if smallStep("t", leavesOf(jsonValue(t, temp(0.1)), true), "u", leavesOf(jsonValue(t, temp(0.2)), true), 1, 16) {
		t.Error("a step between tools")
	}
}

// jsonValue round-trips v through strict JSON, as the hook receives it.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	enc, err := abi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := abi.ParseJSON(enc, abi.JSONLimits{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEditSize(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "abc", 0}, {"abc", "abxc", 1}, {"abc", "xyz", 3}, {"aaa", "aaaa", 1}, {"golang wasm", "golang wasm reactor", 8}} {
		if got := editSize(tt.a, tt.b); got != tt.want {
			t.Errorf("editSize(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestSaveFitsMaxStateBytes fills a bucket past MaxStateBytes and checks
// that saving forgets the least recently active conversations until it fits.
func TestSaveFitsMaxStateBytes(t *testing.T) {
	b := &bucket{V: stateVersion}
	for i := range ConversationsPerBucket {
		c := conversation{ID: fmt.Sprintf("%016x", i), Seen: uint64(100 - i)}
		for range MaxWindow {
			c.Calls = append(c.Calls, call{Tool: strings.Repeat("t", maxToolBytes), Sig: "0123456789abcdef", Res: "0123456789abcdef", Flags: flagSmall})
		}
		for k := range maxLeaves {
			c.Last = append(c.Last, fmt.Sprintf("/%0*d\x00s:%s", maxPathBytes-1, k, strings.Repeat("v", maxLeafString)))
		}
		b.Convs = append(b.Convs, c)
	}
	if enc, _ := json.Marshal(b); len(enc) <= MaxStateBytes {
		t.Fatalf("the test bucket is only %d bytes", len(enc))
	}
	h := newHost(t)
	_, err := h.RunHandler(func(*sdk.Invocation) (sdk.Decision, error) {
		return sdk.Continue(), save("k", b)
	}, sdktest.Invocation{Point: "tool.before"})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := h.KV("k")
	enc, _ := json.Marshal(v)
	var got bucket
	if err := json.Unmarshal(enc, &got); err != nil {
		t.Fatal(err)
	}
	if len(enc) > MaxStateBytes || len(got.Convs) == 0 || len(got.Convs) == ConversationsPerBucket {
		t.Fatalf("saved %d bytes, %d conversations", len(enc), len(got.Convs))
	}
	// The oldest (highest index, lowest Seen) went first.
	for _, c := range got.Convs {
		if c.Seen < 100-uint64(len(got.Convs))+1 {
			t.Errorf("kept conversation seen at %d", c.Seen)
		}
	}
}

// TestStateHoldsNoArgumentText checks that, by default, neither arguments
// nor results are stored, only hashes of them (tool arguments can hold
// secrets); with drift_max_edit > 0 short strings are kept, as documented.
func TestStateHoldsNoArgumentText(t *testing.T) {
	secret := "sk-live-0123456789abcdef"
	for _, tt := range []struct {
		settings map[string]any
		stored   bool
	}{{nil, false}, {map[string]any{"drift_max_edit": 8}, true}} {
		h := newHost(t)
		s := step{tool: "http.get", args: map[string]any{"headers": map[string]any{"Authorization": secret}, "retries": 987654}, result: "token " + secret}
		s.run(t, h, tt.settings)
		s.result = nil
		s.run(t, h, tt.settings)
		var all strings.Builder
		for _, c := range h.Calls() {
			if c.Name == "kv.set" {
				all.Write(c.Payload)
			}
		}
		got := all.String()
		if strings.Contains(got, secret) != tt.stored || strings.Contains(got, "987654") || strings.Contains(got, "Authorization") {
			t.Errorf("settings %v: stored state %s", tt.settings, got)
		}
	}
}

// TestLongToolNames: a tool name over maxToolBytes is cut at a character
// boundary, so it reads back from kv as it was stored and calls of it still
// compare equal.
func TestLongToolNames(t *testing.T) {
	h := newHost(t)
	tool := strings.Repeat("€", 30) // 90 bytes, 3 a character
	var dec *abi.Decision
	for range 2 {
		dec = step{tool: tool, args: read("/a"), result: strings.Repeat("r", 80)}.run(t, h, nil)
	}
	if dec.Action != abi.ActionModify || !strings.Contains(dec.Reason, "redundant") {
		t.Errorf("second identical call: %+v, want a redundant warning", dec)
	}
	if got := cut(tool, maxToolBytes); len(got) != 63 || !utf8.ValidString(got) {
		t.Errorf("cut = %q", got)
	}
}
