package abi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// checkFastPath decodes data with the fast path and with the tree path and
// fails unless the fast path either declines or returns exactly the tree
// path's decision. It reports whether the fast path handled data. The fast
// path's decision must not alias data.
func checkFastPath(t testing.TB, data []byte, point Point, lim JSONLimits) bool {
	t.Helper()
	want, wantErr := decodeDecisionTree(data, point, lim)
	buf := bytes.Clone(data)
	d, ok := decodeDecisionFast(buf, point, lim)
	if !ok {
		if d != nil {
			t.Fatalf("fast path declined %q but returned %+v", data, d)
		}
		return false
	}
	for i := range buf {
		buf[i] = 0xFF // a decision that aliased its input would change
	}
	if wantErr != nil {
		t.Fatalf("fast path accepted %q at %s %+v as %+v; the tree path refuses it: %v", data, point.Name, lim, d, wantErr)
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("fast and tree paths disagree on %q at %s:\n fast %#v\n tree %#v", data, point.Name, d, want)
	}
	return true
}

// TestDecodeDecisionFastGolden checks the fast path on every golden case:
// it handles each canonical case and agrees with the tree path on all.
func TestDecodeDecisionFastGolden(t *testing.T) {
	for _, c := range decisionCases(t) {
		t.Run(c.base, func(t *testing.T) {
			handled := checkFastPath(t, c.data, c.point, JSONLimits{})
			if want := strings.HasPrefix(c.name, "canonical-"); handled != want {
				t.Errorf("fast path handled = %t, want %t", handled, want)
			}
		})
	}
}

// TestDecodeDecisionFastHandles lists canonical decisions the fast path
// must decode itself, with what it must decode them to.
func TestDecodeDecisionFastHandles(t *testing.T) {
	outbound, _ := LookupPoint("message.outbound")
	llm, _ := LookupPoint("llm.before")
	tool, _ := LookupPoint("tool.before")
	tests := []struct {
		name  string
		in    string
		point Point
		lim   JSONLimits
		want  Decision
	}{
		{"continue", `{"action":"continue"}`, outbound, JSONLimits{},
			Decision{Action: ActionContinue}},
		{"every field", `{"action":"block","reason":"r","user_message":"u","do_not_reply_again":true}`, outbound, JSONLimits{},
			Decision{Action: ActionBlock, Reason: "r", UserMessage: "u", DoNotReplyAgain: true}},
		{"keys in any order", `{"reason":"r","context":{"outgoing":"x"},"action":"modify"}`, outbound, JSONLimits{},
			Decision{Action: ActionModify, Reason: "r", Context: map[string]any{"outgoing": "x"}}},
		{"whitespace everywhere", " \t\r\n{ \"action\" :\n\"ask\" ,\t\"context\" : { } , \"reason\" : null } \n", outbound, JSONLimits{},
			Decision{Action: ActionAsk}},
		{"empty strings", `{"action":"block","reason":"","user_message":""}`, outbound, JSONLimits{},
			Decision{Action: ActionBlock}},
		{"escapes", `{"action":"modify","context":{"outgoing":"a\"b\\c\/d\b\f\n\r\t\u0000\u00e9\u2028\ud83d\ude00"}}`, outbound, JSONLimits{},
			Decision{Action: ActionModify, Context: map[string]any{"outgoing": "a\"b\\c/d\b\f\n\r\t\x00é\u2028😀"}}},
		{"raw UTF-8", `{"action":"block","reason":"café ☃ 😀","user_message":"\u00e9é"}`, outbound, JSONLimits{},
			Decision{Action: ActionBlock, Reason: "café ☃ 😀", UserMessage: "éé"}},
		{"null value", `{"action":"modify","context":{"outgoing":null}}`, outbound, JSONLimits{},
			Decision{Action: ActionModify, Context: map[string]any{"outgoing": nil}}},
		{"number value", `{"action":"modify","context":{"outgoing":-1.5e3}}`, outbound, JSONLimits{},
			Decision{Action: ActionModify, Context: map[string]any{"outgoing": json.Number("-1.5e3")}}},
		{"two fields", `{"action":"modify","context":{"prompt":"p","messages":[{"role":"user","content":"\u0068i"}]}}`, llm, JSONLimits{},
			Decision{Action: ActionModify, Context: map[string]any{"prompt": "p", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}}},
		{"object at the depth limit", `{"action":"modify","context":{"arguments":{"a":[]}}}`, tool, JSONLimits{MaxDepth: 4},
			Decision{Action: ActionModify, Context: map[string]any{"arguments": map[string]any{"a": []any{}}}}},
		{"at the byte limit", `{"action":"continue"}`, outbound, JSONLimits{MaxBytes: 21},
			Decision{Action: ActionContinue}},
		{"empty context at depth 2", `{"action":"continue","context":{}}`, outbound, JSONLimits{MaxDepth: 2},
			Decision{Action: ActionContinue}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !checkFastPath(t, []byte(tt.in), tt.point, tt.lim) {
				t.Fatalf("the fast path declined %s", tt.in)
			}
			d, err := DecodeDecision([]byte(tt.in), tt.point, tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Shape = ShapeCanonical
			if !reflect.DeepEqual(*d, tt.want) {
				t.Errorf("DecodeDecision(%s) =\n %#v, want\n %#v", tt.in, *d, tt.want)
			}
		})
	}
}

// TestDecodeDecisionFastFallsBack lists documents the fast path must leave
// to the tree path: other shapes, canonical decisions it does not handle,
// and every kind of invalid document. DecodeDecision must then answer
// exactly what the tree path answers.
func TestDecodeDecisionFastFallsBack(t *testing.T) {
	outbound, _ := LookupPoint("message.outbound")
	tool, _ := LookupPoint("tool.before")
	many := Point{Name: "many"}
	for i := range maxFastFields + 1 {
		many.Changeable = append(many.Changeable, fmt.Sprintf("f%d", i))
	}
	var manyFields []string
	for _, f := range many.Changeable {
		manyFields = append(manyFields, fmt.Sprintf("%q:1", f))
	}
	tests := []struct {
		name  string
		in    string
		point Point
		lim   JSONLimits
	}{
		// Valid, but not for the fast path.
		{"top-level modify", `{"action":"modify","outgoing":"x"}`, outbound, JSONLimits{}},
		{"outcome", `{"decision":"allow"}`, outbound, JSONLimits{}},
		{"legacy", `{"abort":true,"reason":"r"}`, outbound, JSONLimits{}},
		{"escaped key", `{"\u0061ction":"continue"}`, outbound, JSONLimits{}},
		{"escaped action word", `{"action":"c\u006fntinue"}`, outbound, JSONLimits{}},
		{"escaped context key", `{"action":"modify","context":{"outg\u006fing":"x"}}`, outbound, JSONLimits{}},
		{"more fields than it holds", `{"action":"modify","context":{` + strings.Join(manyFields, ",") + `}}`, many, JSONLimits{}},
		// Not strict JSON.
		{"empty", ``, outbound, JSONLimits{}},
		{"whitespace", " \n", outbound, JSONLimits{}},
		{"empty object", `{}`, outbound, JSONLimits{}},
		{"array", `[{"action":"continue"}]`, outbound, JSONLimits{}},
		{"truncated", `{"action":"continue"`, outbound, JSONLimits{}},
		{"truncated string", `{"action":"continue","reason":"ab`, outbound, JSONLimits{}},
		{"trailing comma", `{"action":"continue",}`, outbound, JSONLimits{}},
		{"trailing comma in context", `{"action":"modify","context":{"outgoing":"x",}}`, outbound, JSONLimits{}},
		{"missing colon", `{"action" "continue"}`, outbound, JSONLimits{}},
		{"missing comma", `{"action":"continue" "reason":"r"}`, outbound, JSONLimits{}},
		{"trailing data", `{"action":"continue"}x`, outbound, JSONLimits{}},
		{"second document", `{"action":"continue"}{}`, outbound, JSONLimits{}},
		{"NUL after", "{\"action\":\"continue\"}\x00", outbound, JSONLimits{}},
		{"byte order mark", "\xef\xbb\xbf{\"action\":\"continue\"}", outbound, JSONLimits{}},
		{"form feed as space", "{\f\"action\":\"continue\"}", outbound, JSONLimits{}},
		{"non-breaking space", "{\u00a0\"action\":\"continue\"}", outbound, JSONLimits{}},
		{"duplicate action", `{"action":"continue","action":"block"}`, outbound, JSONLimits{}},
		{"duplicate reason", `{"action":"block","reason":"a","reason":"b"}`, outbound, JSONLimits{}},
		{"duplicate context", `{"action":"modify","context":{"outgoing":"a"},"context":{"outgoing":"b"}}`, outbound, JSONLimits{}},
		{"duplicate context key", `{"action":"modify","context":{"outgoing":"a","outgoing":"b"}}`, outbound, JSONLimits{}},
		{"duplicate in a nested value", `{"action":"modify","context":{"arguments":{"a":1,"a":2}}}`, tool, JSONLimits{}},
		{"raw control character", "{\"action\":\"block\",\"reason\":\"a\nb\"}", outbound, JSONLimits{}},
		{"raw tab", "{\"action\":\"block\",\"reason\":\"a\tb\"}", outbound, JSONLimits{}},
		{"raw unit separator", "{\"action\":\"block\",\"reason\":\"a\x1fb\"}", outbound, JSONLimits{}},
		{"raw unit separator in a long string", "{\"action\":\"block\",\"reason\":\"abcdefghijklmnop\x1fqrstuvwxyz\"}", outbound, JSONLimits{}},
		{"raw NUL in a long string", "{\"action\":\"block\",\"reason\":\"abcdefghijklmnop\x00qrstuvwxyz\"}", outbound, JSONLimits{}},
		{"raw DEL is fine but invalid UTF-8 is not", "{\"action\":\"block\",\"reason\":\"\x7f\xff\"}", outbound, JSONLimits{}},
		{"truncated UTF-8", "{\"action\":\"block\",\"reason\":\"caf\xc3\"}", outbound, JSONLimits{}},
		{"overlong UTF-8", "{\"action\":\"block\",\"reason\":\"\xc0\xaf\"}", outbound, JSONLimits{}},
		{"raw surrogate", "{\"action\":\"block\",\"reason\":\"\xed\xa0\x80\"}", outbound, JSONLimits{}},
		{"invalid UTF-8 beside an escape", "{\"action\":\"block\",\"reason\":\"\xe2\\n\x82\xac\"}", outbound, JSONLimits{}},
		{"invalid UTF-8 in a long string", `{"action":"block","reason":"` + strings.Repeat("abcdefgh", 4) + "\xff" + strings.Repeat("abcdefgh", 4) + `"}`, outbound, JSONLimits{}},
		{"lone high surrogate", `{"action":"block","reason":"\ud83d"}`, outbound, JSONLimits{}},
		{"lone high surrogate then text", `{"action":"block","reason":"\ud83dxxxxxx"}`, outbound, JSONLimits{}},
		{"high surrogate then non-surrogate", `{"action":"block","reason":"\ud83d\u0041"}`, outbound, JSONLimits{}},
		{"two high surrogates", `{"action":"block","reason":"\ud83d\ud83d"}`, outbound, JSONLimits{}},
		{"lone low surrogate", `{"action":"block","reason":"\ude00"}`, outbound, JSONLimits{}},
		{"low surrogate then low surrogate", `{"action":"block","reason":"\ude00\ude00"}`, outbound, JSONLimits{}},
		{"low surrogate then high surrogate", `{"action":"block","reason":"\ude00\ud83d"}`, outbound, JSONLimits{}},
		{"high surrogate at the end", `{"action":"block","reason":"\ud83d\u`, outbound, JSONLimits{}},
		{"invalid escape", `{"action":"block","reason":"\x41"}`, outbound, JSONLimits{}},
		{"upper-case escape", `{"action":"block","reason":"\N"}`, outbound, JSONLimits{}},
		{"short unicode escape", `{"action":"block","reason":"\u12"}`, outbound, JSONLimits{}},
		{"bad hex digit", `{"action":"block","reason":"\u12g4"}`, outbound, JSONLimits{}},
		{"escape at the end", `{"action":"block","reason":"\`, outbound, JSONLimits{}},
		{"literal prefix", `{"action":"block","do_not_reply_again":tru}`, outbound, JSONLimits{}},
		{"literal with a tail", `{"action":"block","do_not_reply_again":truex}`, outbound, JSONLimits{}},
		{"upper-case literal", `{"action":"block","do_not_reply_again":True}`, outbound, JSONLimits{}},
		{"leading zero", `{"action":"modify","context":{"outgoing":01}}`, outbound, JSONLimits{}},
		{"unsafe integer", `{"action":"modify","context":{"outgoing":9007199254740993}}`, outbound, JSONLimits{}},
		{"number out of range", `{"action":"modify","context":{"outgoing":1e400}}`, outbound, JSONLimits{}},
		// Strict JSON, but not a valid decision.
		{"no action", `{"reason":"r"}`, outbound, JSONLimits{}},
		{"unknown action", `{"action":"permit"}`, outbound, JSONLimits{}},
		{"upper-case action", `{"action":"Continue"}`, outbound, JSONLimits{}},
		{"action with a NUL", `{"action":"continue\u0000"}`, outbound, JSONLimits{}},
		{"action null", `{"action":null}`, outbound, JSONLimits{}},
		{"action number", `{"action":1}`, outbound, JSONLimits{}},
		{"action with abort", `{"action":"block","abort":true}`, outbound, JSONLimits{}},
		{"extra field", `{"action":"block","why":"x"}`, outbound, JSONLimits{}},
		{"reason number", `{"action":"block","reason":1}`, outbound, JSONLimits{}},
		{"reason object", `{"action":"block","reason":{}}`, outbound, JSONLimits{}},
		{"user_message bool", `{"action":"block","user_message":true}`, outbound, JSONLimits{}},
		{"do_not_reply_again string", `{"action":"block","do_not_reply_again":"true"}`, outbound, JSONLimits{}},
		{"do_not_reply_again number", `{"action":"block","do_not_reply_again":1}`, outbound, JSONLimits{}},
		{"context null", `{"action":"continue","context":null}`, outbound, JSONLimits{}},
		{"context array", `{"action":"modify","context":["outgoing"]}`, outbound, JSONLimits{}},
		{"context on block", `{"action":"block","context":{"outgoing":"x"}}`, outbound, JSONLimits{}},
		{"modify without context", `{"action":"modify"}`, outbound, JSONLimits{}},
		{"modify of nothing", `{"action":"modify","context":{}}`, outbound, JSONLimits{}},
		{"modify of a read-only field", `{"action":"modify","context":{"incoming":"x"}}`, outbound, JSONLimits{}},
		{"modify of an unknown field", `{"action":"modify","context":{"outgoing":"x","nope":"y"}}`, outbound, JSONLimits{}},
		{"modify at the zero point", `{"action":"modify","context":{"outgoing":"x"}}`, Point{}, JSONLimits{}},
		// Over a limit.
		{"over the byte limit", `{"action":"continue"}`, outbound, JSONLimits{MaxBytes: 20}},
		{"context over the depth limit", `{"action":"continue","context":{}}`, outbound, JSONLimits{MaxDepth: 1}},
		{"value over the depth limit", `{"action":"modify","context":{"arguments":{"a":[]}}}`, tool, JSONLimits{MaxDepth: 3}},
		{"deep value", `{"action":"modify","context":{"arguments":` + nest("array", DefaultMaxJSONDepth) + `}}`, tool, JSONLimits{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			if checkFastPath(t, in, tt.point, tt.lim) {
				t.Fatalf("the fast path handled %q", in)
			}
			d, err := DecodeDecision(in, tt.point, tt.lim)
			want, wantErr := decodeDecisionTree(in, tt.point, tt.lim)
			if !reflect.DeepEqual(d, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("DecodeDecision = %+v, %v; the tree path %+v, %v", d, err, want, wantErr)
			}
		})
	}
}

// TestDecodeDecisionFastAllocs pins what the fast path allocates: the
// decision, one string holding every string it keeps, the context map (its
// header and, since Go 1.24, its slots), and each string context value
// boxed in an interface.
func TestDecodeDecisionFastAllocs(t *testing.T) {
	want := map[string]float64{"continue": 1, "modify-1KiB": 5, "modify-1KiB-escapes": 5, "block-reason": 2}
	for _, bd := range benchDecisions() {
		point, _ := LookupPoint(bd.point)
		got := testing.AllocsPerRun(100, func() {
			if _, ok := decodeDecisionFast(bd.doc, point, JSONLimits{}); !ok {
				t.Fatalf("%s: the fast path declined it", bd.name)
			}
		})
		if got > want[bd.name] {
			t.Errorf("%s: %v allocations, want %v", bd.name, got, want[bd.name])
		}
	}
}

// TestSpecial checks the scanner's 8-bytes-at-a-time test against a byte
// loop: its lowest bit marks the first quote, backslash or control byte.
func TestSpecial(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	interesting := []byte{0, 1, 0x1f, 0x20, 0x21, '"', '#', '\\', ']', 0x7f, 0x80, 0x9f, 0xa0, 0xdc, 0xfe, 0xff}
	for range 200000 {
		var b [8]byte
		for i := range b {
			if r.IntN(2) == 0 {
				b[i] = interesting[r.IntN(len(interesting))]
			} else {
				b[i] = byte(r.IntN(256))
			}
		}
		want := 8
		for i, c := range b {
			if c == '"' || c == '\\' || c < 0x20 {
				want = i
				break
			}
		}
		m := special(binary.LittleEndian.Uint64(b[:]))
		got := bits.TrailingZeros64(m) / 8
		if got != want || m&^msb != 0 {
			t.Fatalf("special(%q) = %#x: first special byte %d, want %d", b, m, got, want)
		}
	}
}

// TestDecodeDecisionFastGenerated decodes random canonical decisions, their
// strings written with random escapes and whitespace, on both paths.
func TestDecodeDecisionFastGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		doc, point := genCanonical(r)
		if !checkFastPath(t, doc, point, JSONLimits{}) {
			d, err := decodeDecisionTree(doc, point, JSONLimits{})
			t.Fatalf("the fast path declined generated %q at %s (tree: %+v, %v)", doc, point.Name, d, err)
		}
	}
}

// genCanonical returns a random canonical decision valid at the point it
// returns, written with random escapes, key order and whitespace.
func genCanonical(r *rand.Rand) ([]byte, Point) {
	points := Points()
	point := points[r.IntN(len(points))]
	actions := []Action{ActionContinue, ActionModify, ActionBlock, ActionAsk}
	action := actions[r.IntN(len(actions))]
	if action == ActionModify && len(point.Changeable) == 0 {
		action = ActionContinue // a notification point: nothing to modify
	}
	var members []string
	members = append(members, `"action":`+space(r)+`"`+string(action)+`"`)
	switch {
	case action == ActionModify:
		var fields []string
		for _, f := range point.Changeable {
			if len(fields) == 0 || r.IntN(2) == 0 {
				fields = append(fields, `"`+f+`"`+space(r)+":"+space(r)+genValue(r))
			}
		}
		members = append(members, `"context":{`+space(r)+strings.Join(fields, space(r)+","+space(r))+space(r)+`}`)
	case r.IntN(4) == 0:
		members = append(members, `"context":{`+space(r)+`}`)
	}
	for _, k := range []string{"reason", "user_message"} {
		switch r.IntN(3) {
		case 0:
			members = append(members, `"`+k+`":`+genString(r))
		case 1:
			members = append(members, `"`+k+`":null`)
		}
	}
	if v := r.IntN(4); v < 3 {
		members = append(members, `"do_not_reply_again":`+[]string{"true", "false", "null"}[v])
	}
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	doc := space(r) + "{" + space(r) + strings.Join(members, space(r)+","+space(r)) + space(r) + "}" + space(r)
	return []byte(doc), point
}

// space returns nothing or a little JSON whitespace.
func space(r *rand.Rand) string {
	if r.IntN(3) > 0 {
		return ""
	}
	var b strings.Builder
	for range r.IntN(4) + 1 {
		b.WriteByte(" \t\r\n"[r.IntN(4)])
	}
	return b.String()
}

// genValue returns a random context value: mostly a string.
func genValue(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return []string{"null", "true", "false", "0", "-12.5e-3"}[r.IntN(5)]
	case 1:
		return `{"k":` + genString(r) + `,"n":[1,` + genString(r) + `,{}]}`
	default:
		return genString(r)
	}
}

// genString returns a JSON string of random runes, each written raw or
// escaped at random (and escaped where it must be), of a random length
// around the scanner's 8-byte steps.
func genString(r *rand.Rand) string {
	runes := []rune{'a', 'Z', ' ', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', 0, 0x1f, 0x7f, 'é', 0x2028, '☃', 0xfffd, 0xffff, '😀', 0x10ffff}
	n := r.IntN(20)
	if r.IntN(10) == 0 {
		n = r.IntN(2000)
	}
	var b strings.Builder
	b.WriteByte('"')
	for range n {
		c := runes[r.IntN(len(runes))]
		if r.IntN(3) > 0 {
			c = rune('a' + r.IntN(26)) // mostly plain text
		}
		mustEscape := c == '"' || c == '\\' || c < 0x20
		switch {
		case mustEscape && r.IntN(2) == 0 || !mustEscape && r.IntN(8) == 0:
			if c > 0xffff {
				hi, lo := utf16.EncodeRune(c)
				fmt.Fprintf(&b, `\u%04x\u%04X`, hi, lo)
			} else {
				fmt.Fprintf(&b, `\u%04x`, c)
			}
		case mustEscape:
			switch c {
			case '"', '\\':
				b.WriteByte('\\')
				b.WriteRune(c)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				fmt.Fprintf(&b, `\u%04X`, c)
			}
		case c == '/' && r.IntN(2) == 0:
			b.WriteString(`\/`)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzDecodeDecisionFast holds the fast path to the tree path: whatever the
// bytes, point and limits, the fast path declines or returns exactly the
// tree path's decision; and a canonical decision the tree path accepts is
// declined only if it has an escape somewhere (an escaped key or action
// word, which the fast path leaves to the tree path).
func FuzzDecodeDecisionFast(f *testing.F) {
	docs, points := decisionSeeds(f)
	for i := range docs {
		f.Add(docs[i], points[i], uint8(0))
	}
	ps := Points()
	index := func(name string) uint8 {
		for i, p := range ps {
			if p.Name == name {
				return uint8(i)
			}
		}
		f.Fatalf("no point %s", name)
		return 0
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		doc, point := genCanonical(r)
		f.Add(doc, index(point.Name), uint8(r.IntN(256)))
	}
	f.Add([]byte(`{"action":"modify","context":{"outgoing":"a\ud83d\ude00\u00e9\"\\"},"reason":"\u2028"}`), index("message.outbound"), uint8(0))
	f.Add([]byte("{\"action\":\"block\",\"reason\":\"\xe2\\n\x82\xac\"}"), uint8(0), uint8(0))
	f.Add([]byte(`{"action":"modify","context":{"arguments":{"a":[1]}}}`), index("tool.before"), uint8(3))
	f.Add([]byte(`{"action":"modify","context":{"arguments":{"a":[1]}}}`), index("tool.before"), uint8(4))
	f.Add([]byte(`{"action":"continue","context":{}}`), uint8(0), uint8(1))
	f.Add([]byte(`{"action":"continue"}`), uint8(0), uint8(0x18))
	// ABI 1.2's fields, in and out of place.
	f.Add([]byte(`{"action":"ask","pending":{"a":"\u00e9","b":[1,{"c":null}]}}`), index("tool.before"), uint8(0))
	f.Add([]byte(`{"pending":null,"action":"ask","short_circuit":null}`), uint8(0), uint8(2))
	f.Add([]byte(`{"action":"continue","short_circuit":true,"pending":{}}`), uint8(0), uint8(0))
	f.Add([]byte(`{"action":"block","short_circuit":true}`), uint8(0), uint8(0))
	f.Add([]byte(`{"action":"ask","pending":{"a":{"b":{}}}}`), uint8(0), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, pi, li uint8) {
		point := fuzzPoint(pi)
		// li picks the limits: its low 3 bits the depth (0 is the
		// default), and with bit 3 set its high nibble how many bytes
		// short of the document the byte limit is.
		lim := JSONLimits{MaxDepth: int(li & 7)}
		if li&8 != 0 {
			lim.MaxBytes = len(data) - int(li>>4)
		}
		if checkFastPath(t, data, point, lim) {
			return
		}
		d, err := decodeDecisionTree(data, point, lim)
		// notify (ABI 1.2) is left to the tree path.
		if err == nil && d.Shape == ShapeCanonical && d.Action != ActionNotify && !bytes.Contains(data, []byte{'\\'}) {
			t.Fatalf("the fast path declined %q at %s %+v, a canonical decision without escapes", data, point.Name, lim)
		}
		if err == nil && !utf8.Valid(data) {
			t.Fatalf("accepted invalid UTF-8 %q", data)
		}
	})
}

// benchDecisions are the documents BenchmarkDecodeDecision decodes: the
// decisions a host sees after nearly every hook call.
func benchDecisions() []struct {
	name  string
	point string
	doc   []byte
} {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 23)[:1000]
	// About 1 KiB of escapes and raw and escaped non-ASCII, cut at a
	// unit's boundary.
	unit := `Line \"one\"\n\tcafé \u00e9 ☃ \ud83d\ude00 `
	escaped := strings.Repeat(unit, 1000/len(unit))
	return []struct {
		name  string
		point string
		doc   []byte
	}{
		{"continue", "message.outbound", []byte(`{"action":"continue"}`)},
		{"modify-1KiB", "message.outbound", []byte(`{"action":"modify","context":{"outgoing":"` + text + `"},"reason":"redacted 1 secret"}`)},
		{"modify-1KiB-escapes", "message.outbound", []byte(`{"action":"modify","context":{"outgoing":"` + escaped + `"},"reason":"redacted 1 secret"}`)},
		{"block-reason", "message.inbound", []byte(`{"action":"block","reason":"prompt injection","user_message":"Sorry, I can't help with that.","do_not_reply_again":true}`)},
	}
}

// BenchmarkDecodeDecision measures DecodeDecision on canonical decisions,
// and BenchmarkDecodeDecisionTree the tree path alone (DecodeDecision
// before the fast path) on the same documents.
//
//	go test -run '^$' -bench DecodeDecision -benchmem -count 5 ./abi/
func BenchmarkDecodeDecision(b *testing.B) {
	benchmarkDecodeDecision(b, DecodeDecision)
}

func BenchmarkDecodeDecisionTree(b *testing.B) {
	benchmarkDecodeDecision(b, decodeDecisionTree)
}

func benchmarkDecodeDecision(b *testing.B, decode func([]byte, Point, JSONLimits) (*Decision, error)) {
	for _, bd := range benchDecisions() {
		point, _ := LookupPoint(bd.point)
		b.Run(bd.name, func(b *testing.B) {
			if _, err := decode(bd.doc, point, JSONLimits{}); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(bd.doc)))
			b.ReportAllocs()
			for b.Loop() {
				decode(bd.doc, point, JSONLimits{})
			}
		})
	}
}
