package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// jsonCase is one ParseJSON case. offset is the JSONError offset expected of a
// rejected document, or -1 to only check it is within the document.
type jsonCase struct {
	name   string
	in     string
	ok     bool
	want   any    // the value, for accepted documents (nil: not checked)
	reason string // a substring of the JSONError reason
	offset int
}

func accept(name, in string, want any) jsonCase {
	return jsonCase{name: name, in: in, ok: true, want: want}
}

func reject(name, in, reason string, offset int) jsonCase {
	return jsonCase{name: name, in: in, reason: reason, offset: offset}
}

func jsonCases() []jsonCase {
	return []jsonCase{
		// Top-level values of every kind.
		accept("empty object", `{}`, map[string]any{}),
		accept("empty array", `[]`, []any{}),
		accept("top-level string", `"x"`, "x"),
		accept("top-level zero", `0`, json.Number("0")),
		accept("top-level true", `true`, true),
		accept("top-level false", `false`, false),
		accept("top-level null", `null`, nil),
		accept("surrounding whitespace", " \t\r\n{} \n\t\r ", map[string]any{}),
		accept("nested", `{"a":[1,{"b":null},"c"],"d":{"e":false}}`, map[string]any{
			"a": []any{json.Number("1"), map[string]any{"b": nil}, "c"},
			"d": map[string]any{"e": false},
		}),
		accept("keys differing in case", `{"a":1,"A":2}`, map[string]any{"a": json.Number("1"), "A": json.Number("2")}),
		accept("same key in two objects", `{"a":{"a":1}}`, map[string]any{"a": map[string]any{"a": json.Number("1")}}),
		accept("empty key", `{"":1}`, map[string]any{"": json.Number("1")}),

		// Numbers.
		accept("negative zero", `-0`, json.Number("-0")),
		accept("negative zero fraction", `-0.0e-0`, json.Number("-0.0e-0")),
		accept("fraction", `1.5`, json.Number("1.5")),
		accept("exponent", `1.5e3`, json.Number("1.5e3")),
		accept("exponent with plus", `1E+2`, json.Number("1E+2")),
		accept("max safe integer", `9007199254740991`, json.Number("9007199254740991")),
		accept("min safe integer", `-9007199254740991`, json.Number("-9007199254740991")),
		accept("large integer written with an exponent", `1e20`, json.Number("1e20")),
		accept("underflow to zero", `1e-400`, json.Number("1e-400")),
		accept("max float64", `1.7976931348623157e308`, json.Number("1.7976931348623157e308")),
		accept("number literal of 128 bytes", "0."+strings.Repeat("1", 126), json.Number("0."+strings.Repeat("1", 126))),
		reject("number literal of 129 bytes", "0."+strings.Repeat("1", 127), "longer than 128", 0),
		reject("overflow", `1e400`, "out of range", 0),
		reject("negative overflow", `-1e400`, "out of range", 0),
		reject("overflow in an array", `[1,1e400]`, "out of range", 3),
		reject("2^53", `9007199254740992`, "beyond", 0),
		reject("2^53+1", `9007199254740993`, "beyond", 0),
		reject("-(2^53+1)", `-9007199254740993`, "beyond", 0),
		reject("huge integer", `123456789012345678901234567890`, "beyond", 0),
		reject("leading zero", `01`, "leading zero", 1),
		reject("negative leading zero", `-01`, "leading zero", 2),
		reject("double zero", `00`, "leading zero", 1),
		reject("minus alone", `-`, "invalid number", 1),
		reject("minus then letter", `-a`, "invalid number", 1),
		reject("trailing dot", `1.`, "no digits after '.'", 2),
		reject("dot then exponent", `1.e5`, "no digits after '.'", 2),
		reject("leading dot", `.5`, "unexpected character", 0),
		reject("bare exponent", `1e`, "no digits in exponent", 2),
		reject("exponent sign only", `1e+`, "no digits in exponent", 3),
		reject("leading plus", `+1`, "unexpected character", 0),
		reject("NaN", `NaN`, "unexpected character", 0),
		reject("Infinity", `Infinity`, "unexpected character", 0),
		reject("hex", `0x10`, "unexpected data after the value", 1),

		// Strings and escapes.
		accept("every escape", `"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"),
		accept("unicode escape", `"\u00e9\u00C9"`, "éÉ"),
		accept("escaped NUL", `"\u0000"`, "\x00"),
		accept("escaped max BMP", `"\uFFFF"`, "\uFFFF"),
		accept("surrogate pair", `"\uD83D\uDE00"`, "😀"),
		accept("surrogate pair lower case", `"\ud83d\ude00"`, "😀"),
		accept("surrogate pair at the top", `"\uDBFF\uDFFF"`, "\U0010FFFF"),
		accept("raw UTF-8", `"héllo 😀 世界"`, "héllo 😀 世界"),
		accept("raw DEL", "\"\x7f\"", "\x7f"),
		accept("raw U+2028", "\"\u2028\"", "\u2028"),
		accept("escapes and raw text mixed", `"a\nb\u00e9c😀\td"`, "a\nbéc😀\td"),
		reject("lone high surrogate", `"\ud800"`, "lone high surrogate", 1),
		reject("lone low surrogate", `"\udc00"`, "lone low surrogate", 1),
		reject("lone low surrogate after text", `"ab\uDFFF"`, "lone low surrogate", 3),
		reject("high surrogate then a letter escape", `"\ud800\u0041"`, "not followed by a low surrogate", 1),
		reject("high surrogate then a high surrogate", `"\ud800\ud800"`, "not followed by a low surrogate", 1),
		reject("high surrogate then raw text", `"\ud800x"`, "lone high surrogate", 1),
		reject("high surrogate then another escape", `"\ud800\n"`, "lone high surrogate", 1),
		reject("high surrogate then truncated escape", `"\ud800\u12"`, "truncated", 9),
		reject("reversed pair", `"\ude00\ud83d"`, "lone low surrogate", 1),
		reject("invalid escape letter", `"\x41"`, "invalid escape", 1),
		reject("escaped single quote", `"\'"`, "invalid escape", 1),
		reject("upper-case U escape", `"\U0041"`, "invalid escape", 1),
		reject("bad hex digit", `"\u00G0"`, "invalid hex digit", 5),
		reject("truncated unicode escape", `"\u12"`, "truncated", 3),
		reject("unterminated escape", `"\`, "unterminated escape", 1),
		reject("unterminated string", `"abc`, "unterminated string", 4),
		reject("unterminated string after escape", `"a\n`, "unterminated string", 4),
		reject("raw tab", "\"a\tb\"", "control character 0x09", 2),
		reject("raw newline", "\"a\nb\"", "control character 0x0a", 2),
		reject("raw NUL", "\"\x00\"", "control character 0x00", 1),
		reject("raw 0x1f", "\"\x1f\"", "control character 0x1f", 1),
		reject("raw control char after an escape", "\"\\n\x01\"", "control character 0x01", 3),
		reject("invalid UTF-8 byte", "\"\xff\"", "invalid UTF-8", 1),
		reject("invalid UTF-8 later in a string", "\"abc\xfe\"", "invalid UTF-8", 4),
		reject("invalid UTF-8 after an escape", "\"\\n\xff\"", "invalid UTF-8", 3),
		reject("invalid UTF-8 in a key", "{\"\xc3\":1}", "invalid UTF-8", 2),
		reject("truncated multibyte sequence", "\"\xe2\x82\"", "invalid UTF-8", 1),
		reject("overlong encoding", "\"\xc0\xaf\"", "invalid UTF-8", 1),
		reject("UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", "invalid UTF-8", 1),
		reject("code point above U+10FFFF", "\"\xf4\x90\x80\x80\"", "invalid UTF-8", 1),
		reject("invalid UTF-8 outside a string", "\xff", "unexpected character", 0),
		reject("byte order mark", "\xef\xbb\xbf{}", "unexpected character", 0),

		// Duplicate keys, however they are spelled.
		reject("duplicate key", `{"a":1,"a":2}`, `duplicate key "a"`, 7),
		reject("duplicate key via escape", `{"a":1,"\u0061":2}`, `duplicate key "a"`, 7),
		reject("duplicate key via escaped slash", `{"/":1,"\/":2}`, `duplicate key "/"`, 7),
		reject("duplicate key via surrogate pair", `{"😀":1,"\ud83d\ude00":2}`, "duplicate key", 10),
		reject("duplicate key nested", `{"x":{"b":1,"b":2}}`, `duplicate key "b"`, 12),
		reject("duplicate key with different types", `{"a":{},"a":[]}`, "duplicate key", 8),
		reject("duplicate empty key", `{"":1,"":2}`, "duplicate key", 6),
		reject("duplicate key in an array element", `[{"k":1,"k":1}]`, "duplicate key", 8),

		// Structure.
		reject("empty input", ``, "unexpected end of document", 0),
		reject("whitespace only", " \n\t\r", "unexpected end of document", 4),
		reject("trailing object", `{} {}`, "unexpected data after the value", 3),
		reject("trailing number", `1 2`, "unexpected data after the value", 2),
		reject("trailing garbage", `{}x`, "unexpected data after the value", 2),
		reject("extra close bracket", `[]]`, "unexpected data after the value", 2),
		reject("two strings", `"a""b"`, "unexpected data after the value", 3),
		reject("trailing NUL", "{}\x00", "unexpected data after the value", 2),
		reject("truncated literal", `tru`, "expected true", 0),
		reject("capitalised literal", `True`, "unexpected character", 0),
		reject("truncated null", `nul`, "expected null", 0),
		reject("long null", `nulll`, "unexpected data after the value", 4),
		reject("missing colon", `{"a" 1}`, "expected ':'", 5),
		reject("trailing comma in object", `{"a":1,}`, "expected a string key", 7),
		reject("trailing comma in array", `[1,]`, "unexpected character", 3),
		reject("leading comma in array", `[,1]`, "unexpected character", 1),
		reject("comma only object", `{,}`, "expected a string key", 1),
		reject("number key", `{1:2}`, "expected a string key", 1),
		reject("single-quoted key", `{'a':1}`, "expected a string key", 1),
		reject("missing comma in array", `[1 2]`, "expected ',' or ']'", 3),
		reject("missing comma in object", `{"a":1 "b":2}`, "expected ',' or '}'", 7),
		reject("unclosed array", `[`, "unexpected end of document", 1),
		reject("unclosed object", `{`, "expected a string key", 1),
		reject("unclosed object after a value", `{"a":1`, "unexpected end of document in object", 6),
		reject("unclosed array after a value", `[1`, "unexpected end of document in array", 2),
		reject("missing value", `{"a":}`, "unexpected character", 5),
		reject("line comment", "// x\n{}", "unexpected character", 0),
		reject("block comment", "/* x */{}", "unexpected character", 0),
		reject("comment inside", "[1/*x*/]", "expected ',' or ']'", 2),
		reject("form feed is not whitespace", "\f{}", "unexpected character", 0),
		reject("non-breaking space is not whitespace", "\u00a0{}", "unexpected character", 0),
	}
}

func TestParseJSON(t *testing.T) {
	for _, tt := range jsonCases() {
		t.Run(tt.name, func(t *testing.T) {
			v, err := ParseJSON([]byte(tt.in), JSONLimits{})
			if tt.ok {
				if err != nil {
					t.Fatalf("ParseJSON(%q) = %v, want success", tt.in, err)
				}
				if !reflect.DeepEqual(v, tt.want) {
					t.Errorf("ParseJSON(%q) = %#v, want %#v", tt.in, v, tt.want)
				}
				return
			}
			checkJSONError(t, tt.in, err, tt.reason, tt.offset)
		})
	}
}

func checkJSONError(t *testing.T, in string, err error, reason string, offset int) {
	t.Helper()
	if err == nil {
		t.Fatalf("ParseJSON(%.60q) succeeded, want an error containing %q", in, reason)
	}
	var je *JSONError
	if !errors.As(err, &je) {
		t.Fatalf("error %v is a %T, want *JSONError", err, err)
	}
	if !strings.Contains(je.Reason, reason) {
		t.Errorf("reason %q does not contain %q", je.Reason, reason)
	}
	if je.Offset < 0 || je.Offset > len(in) {
		t.Errorf("offset %d outside the document of %d bytes", je.Offset, len(in))
	}
	if offset >= 0 && je.Offset != offset {
		t.Errorf("offset %d, want %d (%v)", je.Offset, offset, err)
	}
	if !strings.HasPrefix(err.Error(), "invalid JSON at byte ") {
		t.Errorf("Error() = %q", err.Error())
	}
}

// nest returns depth levels of nesting around a scalar: "[[[1]]]" or
// {"a":{"a":{"a":1}}}; mixed alternates the two.
func nest(kind string, depth int) string {
	var open, close strings.Builder
	for i := 0; i < depth; i++ {
		k := kind
		if kind == "mixed" {
			k = [...]string{"array", "object"}[i%2]
		}
		if k == "array" {
			open.WriteString("[")
			close.WriteString("]")
		} else {
			open.WriteString(`{"a":`)
			close.WriteString("}")
		}
	}
	c := []byte(close.String())
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	return open.String() + "1" + string(c)
}

func TestParseJSONDepth(t *testing.T) {
	tests := []struct {
		name  string
		lim   JSONLimits
		depth int
		ok    bool
	}{
		{"default limit", JSONLimits{}, DefaultMaxJSONDepth, true},
		{"one over the default limit", JSONLimits{}, DefaultMaxJSONDepth + 1, false},
		{"negative limit means default", JSONLimits{MaxDepth: -1}, DefaultMaxJSONDepth, true},
		{"negative limit, one over", JSONLimits{MaxDepth: -1}, DefaultMaxJSONDepth + 1, false},
		{"limit of one", JSONLimits{MaxDepth: 1}, 1, true},
		{"limit of one, two deep", JSONLimits{MaxDepth: 1}, 2, false},
		{"limit of five", JSONLimits{MaxDepth: 5}, 5, true},
		{"limit of five, six deep", JSONLimits{MaxDepth: 5}, 6, false},
		{"above the default", JSONLimits{MaxDepth: 200}, 200, true},
		{"above the default, one over", JSONLimits{MaxDepth: 200}, 201, false},
	}
	for _, tt := range tests {
		for _, kind := range []string{"array", "object", "mixed"} {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				doc := nest(kind, tt.depth)
				_, err := ParseJSON([]byte(doc), tt.lim)
				if tt.ok {
					if err != nil {
						t.Fatalf("%d deep: %v", tt.depth, err)
					}
					return
				}
				// The error is at the first bracket over the limit.
				idx := 0
				for i := 0; i < tt.depth-1; i++ {
					idx = strings.IndexAny(doc[idx+1:], "[{") + idx + 1
				}
				checkJSONError(t, doc, err, "nesting deeper than", idx)
			})
		}
	}
	t.Run("scalars do not count", func(t *testing.T) {
		if _, err := ParseJSON([]byte(`"deep"`), JSONLimits{MaxDepth: 1}); err != nil {
			t.Error(err)
		}
		if _, err := ParseJSON([]byte(`[1,"a",true,null]`), JSONLimits{MaxDepth: 1}); err != nil {
			t.Error(err)
		}
	})
	t.Run("siblings do not add up", func(t *testing.T) {
		doc := "[" + strings.Repeat(nest("array", 3)+",", 1000) + "1]"
		if _, err := ParseJSON([]byte(doc), JSONLimits{MaxDepth: 4}); err != nil {
			t.Error(err)
		}
	})
}

func TestParseJSONDeepNestingIsQuick(t *testing.T) {
	tests := []struct {
		name string
		doc  string
	}{
		{"10,000 arrays", strings.Repeat("[", 10000) + strings.Repeat("]", 10000)},
		{"10,000 objects", strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)},
		{"10,000 unclosed arrays", strings.Repeat("[", 10000)},
		{"a full document of brackets", strings.Repeat("[", DefaultMaxJSONBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := ParseJSON([]byte(tt.doc), JSONLimits{})
			elapsed := time.Since(start)
			var je *JSONError
			if !errors.As(err, &je) || !strings.Contains(je.Reason, "nesting deeper than 64") {
				t.Fatalf("err = %v, want a nesting error", err)
			}
			// It stops at the 65th bracket rather than scanning on.
			if je.Offset > 65*len(`{"a":`) {
				t.Errorf("offset %d: the parser went past the limit", je.Offset)
			}
			if elapsed > time.Second {
				t.Errorf("took %v", elapsed)
			}
		})
	}
}

func TestParseJSONSize(t *testing.T) {
	pad := func(doc string, size int) string { return doc + strings.Repeat(" ", size-len(doc)) }
	tests := []struct {
		name string
		doc  string
		lim  JSONLimits
		ok   bool
	}{
		{"exactly the limit", pad(`{"a":1}`, 100), JSONLimits{MaxBytes: 100}, true},
		{"one byte over", pad(`{"a":1}`, 101), JSONLimits{MaxBytes: 100}, false},
		{"over the limit and not JSON", strings.Repeat("\xff", 101), JSONLimits{MaxBytes: 100}, false},
		{"over the limit and deep", strings.Repeat("[", 101), JSONLimits{MaxBytes: 100}, false},
		{"exactly the default limit", pad(`[]`, DefaultMaxJSONBytes), JSONLimits{}, true},
		{"one over the default limit", pad(`[]`, DefaultMaxJSONBytes+1), JSONLimits{}, false},
		{"negative limit means default", pad(`[]`, DefaultMaxJSONBytes+1), JSONLimits{MaxBytes: -5}, false},
		{"limit above the default", pad(`[]`, DefaultMaxJSONBytes+1), JSONLimits{MaxBytes: 2 << 20}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseJSON([]byte(tt.doc), tt.lim)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			// Rejected on its size alone, before anything is parsed.
			max := tt.lim.withDefaults().MaxBytes
			checkJSONError(t, tt.doc, err, "over the limit", max)
		})
	}
}

// TestParseJSONRoundTrip checks that every accepted document's value
// survives Marshal and ParseJSON unchanged, and that Marshal is a fixed point.
func TestParseJSONRoundTrip(t *testing.T) {
	docs := []string{
		`{"z":1,"a":[true,false,null,"<&>"],"m":{"\u2028":"\u2029","é":-0.5e-7}}`,
		`"\u0000\u001f\u007f\\\"/"`,
		`[1E+2,-0,0.0,1e-400,9007199254740991]`,
	}
	for _, tt := range jsonCases() {
		if tt.ok {
			docs = append(docs, tt.in)
		}
	}
	for _, doc := range docs {
		t.Run(doc, func(t *testing.T) {
			checkRoundTrip(t, []byte(doc))
		})
	}
}

// checkRoundTrip is the round-trip property shared with FuzzParseJSON: an
// accepted document is valid for encoding/json, means the same to it, and
// ParseJSON(Marshal(v)) deep-equals v.
func checkRoundTrip(t *testing.T, doc []byte) {
	t.Helper()
	v, err := ParseJSON(doc, JSONLimits{})
	if err != nil {
		t.Fatalf("ParseJSON(%q): %v", doc, err)
	}
	if !json.Valid(doc) {
		t.Fatalf("ParseJSON accepted %q, which encoding/json rejects", doc)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var std any
	if err := dec.Decode(&std); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	if !reflect.DeepEqual(v, std) {
		t.Fatalf("ParseJSON(%q) = %#v, encoding/json reads %#v", doc, v, std)
	}
	enc, err := Marshal(v)
	if err != nil {
		t.Fatalf("Marshal(%#v): %v", v, err)
	}
	// Marshal may grow a document (U+2028 becomes \u2028), so the second
	// parse allows for that; the depth is unchanged.
	v2, err := ParseJSON(enc, JSONLimits{MaxBytes: max(2*len(doc), DefaultMaxJSONBytes)})
	if err != nil {
		t.Fatalf("ParseJSON(Marshal(v)) = %v; Marshal gave %q", err, enc)
	}
	if !reflect.DeepEqual(v, v2) {
		t.Fatalf("round trip changed the value:\n before %#v\n after  %#v", v, v2)
	}
	enc2, err := Marshal(v2)
	if err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("Marshal is not a fixed point: %q then %q (%v)", enc, enc2, err)
	}
}

// TestParseJSONStricterThanEncodingJSON checks the one-way agreement with the
// standard library: whatever ParseJSON accepts, json.Valid accepts.
func TestParseJSONStricterThanEncodingJSON(t *testing.T) {
	stdAccepts := 0
	for _, tt := range jsonCases() {
		_, err := ParseJSON([]byte(tt.in), JSONLimits{})
		valid := json.Valid([]byte(tt.in))
		if err == nil && !valid {
			t.Errorf("%s: ParseJSON accepts %q, encoding/json does not", tt.name, tt.in)
		}
		if err != nil && valid {
			stdAccepts++
		}
	}
	// encoding/json is more lenient (duplicates, invalid UTF-8, lone
	// surrogates, big integers); make sure the table exercises that.
	if stdAccepts < 10 {
		t.Errorf("only %d documents are rejected here but accepted by encoding/json", stdAccepts)
	}
}

func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"keys sorted", map[string]any{"b": 1, "a": 2, "C": 3}, `{"C":3,"a":2,"b":1}`},
		{"no HTML escaping", "<a href=\"x\">&</a>", `"<a href=\"x\">&</a>"`},
		{"no trailing newline", []any{}, `[]`},
		{"line separators escaped", "\u2028\u2029", `"\u2028\u2029"`},
		{"control characters escaped", "\x00\x1f\n", `"\u0000\u001f\n"`},
		{"numbers kept verbatim", json.Number("1E+2"), `1E+2`},
		{"nil", nil, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal = %s, want %s", got, tt.want)
			}
		})
	}
	t.Run("unencodable", func(t *testing.T) {
		if _, err := Marshal(func() {}); err == nil {
			t.Error("Marshal(func) succeeded")
		}
	})
}

func TestJSONErrorMessage(t *testing.T) {
	err := &JSONError{Offset: 7, Reason: `duplicate key "a"`}
	if got, want := err.Error(), `invalid JSON at byte 7: duplicate key "a"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
