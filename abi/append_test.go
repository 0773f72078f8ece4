package abi

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// appendValues are values AppendJSON must encode exactly as Marshal does.
func appendValues() []any {
	strs := []string{
		"", "a", `"q"`, `b\s`, "<b>&amp;</b>", "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é 😀 中文", "\u2028\u2029",
		"\xff", "a\xffb", "\xc3", "\xed\xa0\x80", strings.Repeat("abcdefgh", 130), strings.Repeat("abcdefg\"", 17) + "\x05",
		// Around the 32-byte blocks of appendString.
		strings.Repeat("x", 32), strings.Repeat("x", 64), strings.Repeat("x", 31) + `"`, strings.Repeat("x", 32) + "\n",
		strings.Repeat("x", 40) + "\x00" + strings.Repeat("y", 40), strings.Repeat("é", 16), strings.Repeat("x", 63) + "\u2028",
	}
	vs := []any{
		nil, true, false, json.Number("12"), json.Number("-0.5e+10"), json.Number(""),
		0.0, math.Copysign(0, -1), 1.5, 1e20, 1e21, 1e-6, 1e-7, math.MaxFloat64, 5e-324,
		0, -1, int8(-8), int16(16), int32(-32), int64(math.MinInt64), uint(7), uint16(16), uint32(32), uint64(math.MaxUint64),
		map[string]any{}, map[string]any{"b": 1, "a": []any{"x", nil, 2.5}, "": map[string]any{"z": true}},
		[]any{}, []string{"a", "\u2028"}, map[string]string{"k": "v", "a": "<>"},
		map[string]any(nil), []any(nil), []string(nil), map[string]string(nil),
	}
	for _, s := range strs {
		vs = append(vs, s, map[string]any{s: s}, []any{s})
	}
	return vs
}

func TestAppendJSONMatchesMarshal(t *testing.T) {
	for _, v := range appendValues() {
		want, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := AppendJSON([]byte("x"), v)
		if !ok || !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Errorf("%#v: AppendJSON %s (ok %t), Marshal %s", v, got, ok, want)
		}
	}
	type custom struct{ A int }
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for _, v := range []any{math.NaN(), math.Inf(-1), float32(1), custom{}, []byte("x"), uint8(1), json.Number("1e"), map[string]int{}, cyclic} {
		if _, ok := AppendJSON(nil, v); ok {
			t.Errorf("AppendJSON handled %T, which it must leave to Marshal", v)
		}
	}
}

func TestInvocationAppendToMatchesEncode(t *testing.T) {
	invs := []*Invocation{
		{},
		{Point: "message.outbound", Context: map[string]any{"outgoing": "hi"}},
		{ABI: 1, Point: "tool.before", Context: map[string]any{"tool": "t", "arguments": map[string]any{"a": []any{1.5, "x"}}},
			Settings: map[string]any{"n": json.Number("3")}, Meta: Meta{Hook: "h\u2028", Invocation: "i", Tenant: "<t>"}},
		{Point: "p", Context: map[string]any{}, Settings: map[string]any{}},
	}
	for _, v := range appendValues() {
		invs = append(invs, &Invocation{Point: "message.inbound", Context: map[string]any{"incoming": v}, Settings: map[string]any{"s": v}})
	}
	for _, inv := range invs {
		want, err := inv.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := inv.AppendTo(nil)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("AppendTo %s (ok %t)\nEncode   %s", got, ok, want)
		}
	}
	if _, ok := (&Invocation{Context: map[string]any{"x": float32(1)}}).AppendTo(nil); ok {
		t.Error("AppendTo handled a float32")
	}
}

func FuzzAppendJSONMatchesMarshal(f *testing.F) {
	for _, v := range appendValues() {
		b, _ := Marshal(v)
		f.Add(b, "k", 1.5)
	}
	f.Fuzz(func(t *testing.T, data []byte, s string, fl float64) {
		var v any = string(data)
		if parsed, err := ParseJSON(data, JSONLimits{}); err == nil {
			v = parsed
		}
		for _, v := range []any{v, map[string]any{s: v, "f": fl}, []any{s, fl, v}} {
			want, err := Marshal(v)
			got, ok := AppendJSON(nil, v)
			if !ok {
				if err == nil && !math.IsNaN(fl) && !math.IsInf(fl, 0) {
					t.Fatalf("AppendJSON gave up on %#v", v)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("AppendJSON %s\nMarshal    %s (%v)", got, want, err)
			}
		}
		inv := &Invocation{Point: s, Context: map[string]any{s: v}, Meta: Meta{Tenant: string(data)}}
		want, err := inv.Encode()
		got, ok := inv.AppendTo(nil)
		if ok && (err != nil || !bytes.Equal(got, want)) {
			t.Fatalf("AppendTo %s\nEncode   %s (%v)", got, want, err)
		}
	})
}
