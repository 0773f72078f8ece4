//go:build !wasip1

package sdk

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/wasmhooks/wasmhooks/abi"
)

// The fast codec must agree with the reference implementations exactly:
// decodeInvocation with abi.DecodeInvocation (same documents accepted, same
// values), appendDecision with abi.Decision.Encode (same bytes).

// jsonValues are JSON texts, valid and not, that the tests put in every
// position of an invocation.
var jsonValues = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `1.5`, `-0.5e+10`, `1E3`, `1e-400`, `1e400`, `-1e400`,
	`9007199254740991`, `9007199254740992`, `-9007199254740993`, `999999999999999`, `1000000000000000`,
	`0.1e1`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `NaN`, `Infinity`, `0x10`, `1.0`, `1e0`,
	strings.Repeat("1", 128), "0." + strings.Repeat("1", 127), "0." + strings.Repeat("1", 130),
	`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u0000"`, `"\u00e9"`, `"\uD83D\uDE00"`,
	`"\uD83D"`, `"\uDE00"`, `"\uD83Dx"`, `"\uD83D\u0041"`, `"\u12"`, `"\u12G4"`, `"\x"`, `"\`, `"abc`,
	"\"a\tb\"", "\"a\x01b\"", "\"\xff\"", "\"\xc3\xa9\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
	"\"é😀\u2028\"", `"<b>&amp;</b>"`, "\"" + strings.Repeat("x", 1000) + "\"",
	"\"" + strings.Repeat("abcdefg\\n", 20) + "\xe2\x80\xa8\"",
	`[]`, `[1,2,3]`, `[1,]`, `[,1]`, `[1 2]`, `["a",{"b":[null]}]`, `[`,
	`{}`, `{"a":1}`, `{"a":1,"b":2}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":1,}`, `{a:1}`,
	`{"a" 1}`, `{"a":}`, `{"a":1 "b":2}`, `{"":0}`, `{"a":{"a":{"a":{}}}}`,
	` 1 `, "\t[ 1 , 2 ]\r\n", `tru`, `nul`, `falsey`, `'a'`, `/**/1`,
	nested(61), nested(62), nested(63), nested(64),
}

// nested returns depth nested arrays.
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// invocationDocs returns documents that exercise decodeInvocation: the abi
// golden invocations, each JSON value in each position, and broken shapes.
func invocationDocs(tb testing.TB) []string {
	tb.Helper()
	var docs []string
	files, err := filepath.Glob(filepath.Join("..", "abi", "testdata", "invocations", "*.golden"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden invocations (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, v := range jsonValues {
		docs = append(docs,
			v,
			`{"abi":`+v+`,"point":"message.outbound","context":{}}`,
			`{"abi":1,"point":`+v+`,"context":{}}`,
			`{"abi":1,"point":"p","context":`+v+`}`,
			`{"abi":1,"point":"p","context":{"outgoing":`+v+`}}`,
			`{"abi":1,"point":"p","context":{"x":[`+v+`]}}`,
			`{"abi":1,"point":"p","context":{},"settings":`+v+`}`,
			`{"abi":1,"point":"p","context":{},"settings":{"s":`+v+`}}`,
			`{"abi":1,"point":"p","context":{},"meta":`+v+`}`,
			`{"abi":1,"point":"p","context":{},"meta":{"hook":`+v+`}}`,
			`{"abi":1,"point":"p","context":{},"meta":{"x":`+v+`}}`,
			`{"abi":1,"point":"p","context":{},"extra":`+v+`}`,
			`{`+v+`:1,"abi":1,"point":"p","context":{}}`,
		)
	}
	docs = append(docs,
		``, ` `, `{`, `}`, `{}`, `[]`, `{"abi":1}`, `{"abi":1,"point":"p"}`, `{"abi":1,"context":{}}`,
		`{"point":"p","context":{}}`,
		`{"abi":1,"point":"p","context":{}} `, `{"abi":1,"point":"p","context":{}}x`,
		`{"abi":1,"point":"p","context":{}}{}`, "\ufeff{\"abi\":1,\"point\":\"p\",\"context\":{}}",
		`{"abi":1,"abi":1,"point":"p","context":{}}`, `{"abi":1,"point":"p","point":"p","context":{}}`,
		`{"abi":1,"point":"p","context":{},"context":{}}`, `{"abi":1,"point":"p","context":{},"settings":{},"settings":{}}`,
		`{"abi":1,"point":"p","context":{},"meta":{},"meta":{}}`, `{"abi":1,"point":"p","context":{},"x":1,"x":2}`,
		`{"abi":1,"point":"p","context":{},"x":1,"\u0078":2}`, `{"\u0061bi":1,"point":"p","abi":1,"context":{}}`,
		`{"abi":1,"point":"p","context":{},"meta":{"hook":"a","hook":"b"}}`,
		`{"abi":1,"point":"p","context":{},"meta":{"x":1,"x":1}}`,
		`{"abi":1,"point":"p","context":{},"meta":{"hook":"h","invocation":"i","tenant":"t","x":{"y":[1]}}}`,
		`{"abi":1,"point":"p","context":{},"meta":{"hook":"h",}}`, `{"abi":1,"point":"p","context":{},"meta":{"hook" "h"}}`,
		`{"abi":1,"point":"p","context":{},"meta":{"hook":"h" "x":1}}`,
		` { "abi" : 1 , "point" : "tool.before" , "context" : { "arguments" : { "a" : [ 1 , { } ] } } } `,
		`{"abi":1,"point":"tool.before","context":{"tool":"t","arguments":{"k":[1,"2",null,true,{"n":-1.5e3}]}}}`,
		`{"abi":1,"point":"message.outbound","context":{"outgoing":"x"},"settings":{"patterns":["a","b"],"n":3}}`,
		`{"abi":1,"point":"p","context":{"x":`+nested(62)+`}}`,
		`{"abi":1,"point":"p","context":{"x":`+nested(127)+`}}`,
		`{"abi":1,"point":"p","context":{},"meta":{"x":`+nested(61)+`}}`,
		`{"abi":1,"point":"p","context":{},"meta":{"x":`+nested(62)+`}}`,
	)
	return docs
}

// checkDecode holds decodeInvocation's scan and lazy accessors to
// abi.DecodeInvocation: the same documents accepted, the same values read
// one by one before anything is decoded, and the same objects decoded whole.
func checkDecode(t *testing.T, doc []byte) {
	t.Helper()
	ref, err := abi.DecodeInvocation(doc, abi.JSONLimits{MaxBytes: max(len(doc), 1)})
	// The host-layout fast path accepts a subset of what scan accepts.
	if host := (&Invocation{doc: append([]byte(nil), doc...)}); host.scanHost() {
		if err != nil {
			t.Fatalf("document %q: scanHost accepted it, reference error %v", doc, err)
		}
		checkAgainst(t, doc, host, ref)
	}
	got := &Invocation{doc: append([]byte(nil), doc...)}
	ok := got.scan()
	if ok != (err == nil) {
		t.Fatalf("document %q: scan ok=%t, reference error %v", doc, ok, err)
	}
	if ok {
		checkAgainst(t, doc, got, ref)
	}
}

// checkAgainst holds the accessors of got, which has been scanned, to ref.
func checkAgainst(t *testing.T, doc []byte, got *Invocation, ref *abi.Invocation) {
	t.Helper()
	meta := Meta{Hook: ref.Meta.Hook, Invocation: ref.Meta.Invocation, Tenant: ref.Meta.Tenant}
	if got.Point != ref.Point || got.Meta != meta {
		t.Fatalf("document %q: point %q meta %+v, reference %q %+v", doc, got.Point, got.Meta, ref.Point, meta)
	}
	for _, f := range []struct {
		name   string
		ref    map[string]any
		lookup func(string) (any, bool)
	}{
		{"context", ref.Context, got.ContextValue},
		{"settings", ref.Settings, got.Setting},
	} {
		for k, want := range f.ref {
			if v, found := f.lookup(k); (!found && want != nil) || !reflect.DeepEqual(v, want) {
				t.Fatalf("document %q: %s field %q = %#v (found %t), reference %#v", doc, f.name, k, v, found, want)
			}
		}
		if v, found := f.lookup("\x00not a key"); found && v != nil {
			t.Fatalf("document %q: %s has a field the reference has not: %#v", doc, f.name, v)
		}
	}
	if c, s := got.Context(), got.Settings(); !reflect.DeepEqual(c, ref.Context) || !reflect.DeepEqual(s, ref.Settings) {
		t.Fatalf("document %q:\nscan      %#v %#v\nreference %#v %#v", doc, c, s, ref.Context, ref.Settings)
	}
}

func TestDecodeInvocationMatchesABI(t *testing.T) {
	for _, doc := range invocationDocs(t) {
		checkDecode(t, []byte(doc))
	}
}

func TestDecodeInvocationErrorsAreTheReferences(t *testing.T) {
	for _, doc := range []string{`{"abi":2,"point":"p","context":{}}`, `{"abi":1,"point":"p","context":{},"x":1,"x":2}`, `[`} {
		_, want := abi.DecodeInvocation([]byte(doc), abi.JSONLimits{MaxBytes: len(doc)})
		_, err := decodeInvocation([]byte(doc))
		if err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("%s: error %v, want %v", doc, err, want)
		}
	}
}

func TestDecodeInvocationViews(t *testing.T) {
	doc := []byte(`{"abi":1,"point":"message.outbound","context":{"outgoing":"plain","escaped":"a\nb"},"meta":{"hook":"h"}}`)
	inv, err := decodeInvocation(doc)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Point != "message.outbound" || inv.ContextString("outgoing") != "plain" || inv.ContextString("escaped") != "a\nb" || inv.Meta.Hook != "h" {
		t.Fatalf("decoded %+v", inv)
	}
	if inv.Settings() == nil {
		t.Fatal("Settings is nil")
	}
	// The point is the package constant, not a view of the document.
	p, _ := abi.LookupPoint("message.outbound")
	if unsafeStringData(inv.Point) != unsafeStringData(p.Name) {
		t.Error("Point is not the constant")
	}
}

func FuzzDecodeInvocationMatchesABI(f *testing.F) {
	for _, doc := range invocationDocs(f) {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		// The same bytes as a context value reach deeper into the parser.
		wrapped := append([]byte(`{"abi":1,"point":"message.outbound","context":{"outgoing":`), data...)
		checkDecode(t, append(wrapped, "}}"...))
		// And in the layout the host writes, which scanHost reads.
		for _, w := range [][2]string{
			{`{"abi":1,"point":"message.outbound","context":{"outgoing":`, `},"settings":{},"meta":{"hook":"h","invocation":"i","tenant":"t"}}`},
			{`{"abi":1,"point":"message.outbound","context":{},"settings":`, `,"meta":{"hook":"h","invocation":"i","tenant":"t"}}`},
			{`{"abi":1,"point":"message.outbound","context":{},"settings":{},"meta":{"hook":`, `,"invocation":"i","tenant":"t"}}`},
		} {
			checkDecode(t, append(append([]byte(w[0]), data...), w[1]...))
		}
	})
}

// checkEncode holds appendDecision to abi.Decision.Encode: when it handles
// a decision, its bytes are the reference's; when it does not (ok false),
// the caller's fallback is the reference itself.
func checkEncode(t *testing.T, d Decision, point string) (handled bool) {
	t.Helper()
	c, cerr := d.canonical(point)
	got, ok, err := appendDecision([]byte("garbage"), d, point)
	if cerr != nil {
		if err == nil || err.Error() != cerr.Error() {
			t.Fatalf("error %v, want %v", err, cerr)
		}
		return true
	}
	if err != nil {
		t.Fatalf("unexpected error %v", err)
	}
	want, werr := c.Encode()
	if !ok {
		return false
	}
	if werr != nil {
		t.Fatalf("fast encoder accepted what encoding/json refuses (%v): %s", werr, got)
	}
	if got = bytes.TrimPrefix(got, []byte("garbage")); !bytes.Equal(got, want) {
		t.Fatalf("fast  %s\nwant  %s", got, want)
	}
	return true
}

// strs are strings that stress the string encoding.
var strs = []string{
	"", "a", "hello, world", `"quoted"`, `back\slash`, "<b>&amp;</b>", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
	"é 😀 中文", "\u2028\u2029", "x\u2028y\u2029z", "\xff", "a\xffb", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	"\ufffd", strings.Repeat("abcdefgh", 130), strings.Repeat("abcdefg\"", 17) + "\x05",
}

func TestAppendDecisionMatchesEncode(t *testing.T) {
	values := []any{
		nil, true, false, "", json.Number("12"), json.Number("-0.5e+10"), json.Number(""),
		0.0, math.Copysign(0, -1), 1.0, -1.5, 1e20, 1e21, 1e-6, 1e-7, 123456789.123, math.MaxFloat64,
		math.SmallestNonzeroFloat64, 5e-324, 1.7976931348623157e308, 0.000001234,
		0, -1, int8(-8), int16(16), int32(-32), int64(math.MinInt64), uint(7), uint16(16), uint32(32), uint64(math.MaxUint64),
		map[string]any{}, map[string]any{"b": 1, "a": []any{"x", nil, 2.5}, "": map[string]any{"z": true}},
		[]any{}, []any{[]any{}, map[string]any{}}, []string{"a", "\u2028"}, []string{},
		map[string]string{"k": "v", "a": "<>"}, map[string]string{},
		map[string]any(nil), []any(nil), []string(nil), map[string]string(nil),
	}
	for _, s := range strs {
		values = append(values, s, map[string]any{s: s}, []any{s})
	}
	for _, v := range values {
		for _, d := range []Decision{
			Modify("outgoing", v),
			ModifyPrimary(v),
			ModifyFields(map[string]any{"outgoing": v, "attachments": v, "\u2028": v}),
			Modify("outgoing", v).WithReason("r").WithUserMessage("u").DoNotReplyAgain(),
			Ask("a").WithPending(map[string]any{"v": v, "w": []any{v}}),
		} {
			if !checkEncode(t, d, "message.outbound") {
				t.Errorf("the fast encoder does not handle %T (%#v)", v, v)
			}
		}
	}
	for _, s := range strs {
		for _, d := range []Decision{
			{}, Continue(), Block(s), Ask(s), Continue().WithReason(s), Block(s).WithUserMessage(s),
			Block("").DoNotReplyAgain(), Modify(s, s), ModifyPrimary(s).WithReason(s),
			Continue().ShortCircuit(), Continue().WithReason(s).ShortCircuit(), Ask(s).WithPending(map[string]any{s: s}),
		} {
			if !checkEncode(t, d, "message.inbound") {
				t.Errorf("the fast encoder does not handle %+v", d)
			}
		}
	}
	// An empty modify and ModifyPrimary at a point without a primary field.
	checkEncode(t, ModifyFields(nil), "message.outbound")
	checkEncode(t, ModifyFields(map[string]any{}), "message.outbound")
	checkEncode(t, ModifyPrimary("x"), "context.assemble")
	checkEncode(t, ModifyPrimary("x"), "no.such.point")
}

func TestAppendDecisionFallsBack(t *testing.T) {
	type custom struct{ A int }
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	deep := any("x")
	for range maxEncodeDepth + 10 {
		deep = []any{deep}
	}
	for _, v := range []any{
		math.NaN(), math.Inf(1), float32(1.5), custom{1}, &custom{2}, []byte("b64"), uint8(8),
		json.Number("1e"), json.Number("0x10"), json.RawMessage(`{"a":1}`), map[string]int{"a": 1},
		[]any{"ok", float32(2)}, map[string]any{"a": map[string]any{"b": custom{}}}, cyclic, deep,
	} {
		if checkEncode(t, Modify("outgoing", v), "message.outbound") {
			t.Errorf("the fast encoder handled %T, which it should leave to encoding/json", v)
		}
	}
	// Through handle, the fallback gives the reference's bytes (or error).
	for _, v := range []any{float32(1.5), custom{1}, []byte("b64"), deep} {
		want, err := (&abi.Decision{Action: abi.ActionModify, Context: map[string]any{"outgoing": v}}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		out, failure := invoke(t, &scripted{}, func(*Invocation) (Decision, error) { return Modify("outgoing", v), nil })
		if failure != "" || !bytes.Equal(out, want) {
			t.Errorf("%T: out %s failure %q, want %s", v, out, failure, want)
		}
	}
	_, failure := invoke(t, &scripted{}, func(*Invocation) (Decision, error) { return Modify("outgoing", cyclic), nil })
	if !strings.Contains(failure, "cycle") {
		t.Errorf("cyclic value: failure %q", failure)
	}
}

func FuzzAppendDecisionMatchesEncode(f *testing.F) {
	for i, s := range strs {
		f.Add(uint8(i), s, s, []byte(`{"a":[1,"`+s+`"]}`), float64(i)*1.5e-7, int64(i))
	}
	for _, v := range jsonValues {
		f.Add(uint8(1), "r", "", []byte(v), 1e21, int64(-1))
	}
	f.Fuzz(func(t *testing.T, sel uint8, reason, msg string, value []byte, fl float64, n int64) {
		// The value: what strict JSON decodes value to, else the bytes as
		// a string (valid UTF-8 or not).
		var v any = string(value)
		if parsed, err := abi.ParseJSON(value, abi.JSONLimits{}); err == nil {
			v = parsed
		}
		key := reason
		if utf8.ValidString(reason) && len(reason) > 0 && sel&0x40 != 0 {
			key = "outgoing"
		}
		var d Decision
		switch sel % 8 {
		case 0:
			d = Continue()
		case 1:
			d = Block(reason)
		case 2:
			d = Ask(reason)
		case 3:
			d = ModifyPrimary(v)
		case 4:
			d = Modify(key, v)
		case 5:
			d = ModifyFields(map[string]any{key: v, msg: fl, "n": n, "s": []any{reason, msg, v}})
		case 6:
			d = Modify(key, map[string]any{msg: []string{reason, msg}, reason: map[string]string{msg: reason}})
		case 7:
			d = ModifyPrimary(fl)
		}
		if sel&0x80 != 0 {
			d = d.WithReason(reason).WithUserMessage(msg)
		}
		if sel&0x20 != 0 {
			d = d.DoNotReplyAgain()
		}
		if sel&0x10 != 0 {
			d = d.ShortCircuit().WithPending(map[string]any{key: v, msg: fl})
		}
		handled := checkEncode(t, d, "message.outbound")
		if !handled && !math.IsNaN(fl) && !math.IsInf(fl, 0) {
			t.Fatalf("the fast encoder gave up on %+v", d)
		}
	})
}

func unsafeStringData(s string) *byte { return unsafe.StringData(s) }

// TestInvocationDepthIsABIs holds the SDK to the host's depth limit, one
// constant in abi (the SDK used to accept 128 where the host stops at 64).
func TestInvocationDepthIsABIs(t *testing.T) {
	// The context value is nested two deep already (the document, the
	// context object), so nested(n) brings the deepest level to n+2.
	for _, tt := range []struct {
		arrays int
		ok     bool
	}{{abi.DefaultMaxJSONDepth - 2, true}, {abi.DefaultMaxJSONDepth - 1, false}, {100, false}} {
		doc := `{"abi":1,"point":"message.outbound","context":{"outgoing":` + nested(tt.arrays) + `},"settings":{},"meta":{"hook":"h","invocation":"i","tenant":"t"}}`
		_, err := decodeInvocation([]byte(doc))
		if (err == nil) != tt.ok {
			t.Errorf("%d arrays in the context: error %v, want ok %t", tt.arrays, err, tt.ok)
		}
	}
}

// TestLazyInvocation checks what decoding on first use must not change: a
// composite value asked for twice is the same map, a change the handler
// makes to Context() is seen by the accessors, and strings are the
// document's.
func TestLazyInvocation(t *testing.T) {
	doc := []byte(`{"abi":1,"point":"tool.after","context":{"tool":"t","result":"r\u00e9","arguments":{"n":1}},"settings":{"s":"x","l":["a"]},"meta":{"hook":"h","invocation":"i","tenant":"t"}}`)
	inv, err := decodeInvocation(doc)
	if err != nil {
		t.Fatal(err)
	}
	if inv.PrimaryText() != "ré" || inv.ContextString("tool") != "t" || inv.SettingString("s", "") != "x" {
		t.Fatalf("accessors before decoding: %q %q %q", inv.PrimaryText(), inv.ContextString("tool"), inv.SettingString("s", ""))
	}
	if inv.context.m != nil || inv.settings.m != nil {
		t.Error("a string lookup decoded a whole object")
	}
	a, _ := inv.ContextValue("arguments")
	b := inv.Context()["arguments"]
	if a.(map[string]any)["n"] != json.Number("1") || reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Errorf("a composite value is not the one in Context(): %v %v", a, b)
	}
	inv.Context()["tool"] = "changed"
	if inv.ContextString("tool") != "changed" {
		t.Error("a change to Context() is not seen by ContextString")
	}
	if got := inv.SettingStrings("l"); len(got) != 1 || got[0] != "a" {
		t.Errorf("SettingStrings = %v", got)
	}
	if _, ok := inv.ContextValue("missing"); ok {
		t.Error("a missing field is present")
	}
}
