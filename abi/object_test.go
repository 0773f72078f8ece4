package abi

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// objectCases are objects whose canonical bytes are Marshal's.
var objectCases = []struct {
	name string
	m    map[string]any
}{
	{"nil", nil},
	{"empty", map[string]any{}},
	{"one", map[string]any{"outgoing": "hello"}},
	{"sorted byte-wise", map[string]any{"b": 1, "a": "x", "B": true, "é": nil, "aa": []any{}, "": json.Number("1.5")}},
	{"nested", map[string]any{"thread": map[string]any{"z": 1, "a": []any{"x", map[string]any{"k": false}}}, "to": []string{"a", "b"}}},
	{"escapes", map[string]any{"q\"uote": "a\\b\n\u2028<&>\x01", "bad\xffutf8": "\xfe"}},
	{"nil inside", map[string]any{"m": map[string]any(nil), "a": []any(nil), "s": map[string]string{"y": "1", "x": "2"}}},
	{"numbers", map[string]any{"f": 1e21, "g": 1e-7, "i": int64(-3), "u": uint64(1 << 60), "z": 0.0}},
	{"marshal fallback", map[string]any{"ints": []int{1, 2}, "s": struct {
		A int `json:"a"`
	}{7}, "x": "y"}},
}

func TestObjectFromMapBytesAndSpans(t *testing.T) {
	for _, tc := range objectCases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ObjectFromMap(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			want := marshalMap(t, tc.m)
			if !bytes.Equal(o.Bytes(), want) || o.Len() != len(want) {
				t.Fatalf("bytes %s, want %s", o.Bytes(), want)
			}
			if o.NumField() != len(tc.m) {
				t.Fatalf("%d fields, want %d", o.NumField(), len(tc.m))
			}
			keys := slices.Sorted(maps.Keys(tc.m))
			for i, k := range keys {
				key, v := o.Field(i)
				got, ok := o.Get(k)
				wantV, err := Marshal(tc.m[k])
				if err != nil {
					t.Fatal(err)
				}
				if key != k || !ok || !bytes.Equal(v, wantV) || !bytes.Equal(got, wantV) {
					t.Errorf("field %d: %q %s / Get %s %v, want %q %s", i, key, v, got, ok, k, wantV)
				}
			}
			if _, ok := o.Get("absent key"); ok {
				t.Error("Get of an absent key")
			}
			// The reused form writes the same, over another object.
			var r Object
			if err := r.SetMap(map[string]any{"zzz": "previous", "a": 1}); err != nil {
				t.Fatal(err)
			}
			if err := r.SetMap(tc.m); err != nil || !bytes.Equal(r.Bytes(), want) {
				t.Errorf("SetMap over another: %s, %v", r.Bytes(), err)
			}
		})
	}
}

func marshalMap(t testing.TB, m map[string]any) []byte {
	t.Helper()
	if m == nil {
		m = map[string]any{}
	}
	b, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestObjectMerge(t *testing.T) {
	base := map[string]any{"outgoing": "hello", "channel": "email", "n": json.Number("3")}
	for _, tc := range []struct {
		name    string
		changes map[string]any
		changed []string
	}{
		{"none", nil, nil},
		{"same value", map[string]any{"outgoing": "hello"}, nil},
		{"same encoding, other type", map[string]any{"n": 3}, nil},
		{"replace", map[string]any{"outgoing": "bye"}, []string{"outgoing"}},
		{"add first", map[string]any{"a": 1}, []string{"a"}},
		{"add last", map[string]any{"z": []any{1, "x"}}, []string{"z"}},
		{"add between and replace", map[string]any{"d": true, "outgoing": "x", "channel": "email"}, []string{"d", "outgoing"}},
		{"to null", map[string]any{"channel": nil}, []string{"channel"}},
		{"marshal fallback", map[string]any{"m": []int{1}}, []string{"m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ObjectFromMap(base)
			if err != nil {
				t.Fatal(err)
			}
			before := bytes.Clone(o.Bytes())
			n, changed, err := o.Merge(tc.changes)
			if err != nil {
				t.Fatal(err)
			}
			merged := maps.Clone(base)
			maps.Copy(merged, tc.changes)
			want := marshalMap(t, merged)
			if !bytes.Equal(n.Bytes(), want) || !slices.Equal(changed, tc.changed) {
				t.Errorf("merge: %s %v, want %s %v", n.Bytes(), changed, want, tc.changed)
			}
			if !bytes.Equal(o.Bytes(), before) {
				t.Errorf("the base changed: %s", o.Bytes())
			}
			// Its spans are right, and With of each change agrees.
			for i := range n.NumField() {
				k, v := n.Field(i)
				if w := marshalValue(t, merged[k]); !bytes.Equal(v, w) {
					t.Errorf("field %q: %s, want %s", k, v, w)
				}
			}
			w := o
			for _, k := range slices.Sorted(maps.Keys(tc.changes)) {
				if w, err = w.With(k, tc.changes[k]); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(w.Bytes(), want) {
				t.Errorf("With: %s, want %s", w.Bytes(), want)
			}
		})
	}
}

func marshalValue(t testing.TB, v any) []byte {
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseObjectCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{` { "b" : 1 , "a" : [ 1 , 2 ] } `, `{"a":[1,2],"b":1}`},
		{`{"s":"\u0041\/","n":1.50,"o":{"y":null,"x":{}}}`, `{"n":1.50,"o":{"x":{},"y":null},"s":"A/"}`},
	} {
		o, err := ParseObject([]byte(tc.in), JSONLimits{})
		if err != nil || string(o.Bytes()) != tc.want {
			t.Errorf("ParseObject(%s) = %s, %v; want %s", tc.in, o.Bytes(), err, tc.want)
		}
	}
	for _, in := range []string{`[]`, `"x"`, `{"a":1,"a":2}`, `{`, `{} x`} {
		if _, err := ParseObject([]byte(in), JSONLimits{}); err == nil {
			t.Errorf("ParseObject(%s) accepted", in)
		}
	}
}

// FuzzObjectMerge holds a splice to decode, modify, encode: for any two
// objects, Merge gives the bytes Marshal gives for the first with the
// second's fields set, the spans of its fields are their values' encodings,
// and the changed keys are those whose encoding changed.
func FuzzObjectMerge(f *testing.F) {
	f.Add([]byte(`{"outgoing":"hello","n":1}`), []byte(`{"outgoing":"bye"}`))
	f.Add([]byte(`{"a":{"y":1,"x":[true,null]},"b":"\u00e9"}`), []byte(`{"a":{"x":[true,null],"y":1},"c":2,"0":-0.5e3}`))
	f.Add([]byte(`{}`), []byte(`{"":""}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		av, err := ParseJSON(a, JSONLimits{})
		if err != nil {
			return
		}
		bv, err := ParseJSON(b, JSONLimits{})
		if err != nil {
			return
		}
		am, ok1 := av.(map[string]any)
		bm, ok2 := bv.(map[string]any)
		if !ok1 || !ok2 {
			return
		}
		o, err := ParseObject(a, JSONLimits{})
		if err != nil {
			t.Fatal(err)
		}
		n, changed, err := o.Merge(bm)
		if err != nil {
			t.Fatal(err)
		}
		merged := maps.Clone(am)
		var want []string
		for _, k := range slices.Sorted(maps.Keys(bm)) {
			if old, had := am[k]; !had || !bytes.Equal(marshalValue(t, old), marshalValue(t, bm[k])) {
				want = append(want, k)
			}
			merged[k] = bm[k]
		}
		if enc := marshalMap(t, merged); !bytes.Equal(n.Bytes(), enc) {
			t.Fatalf("merge %s, want %s", n.Bytes(), enc)
		}
		if !slices.Equal(changed, want) {
			t.Fatalf("changed %v, want %v", changed, want)
		}
		for i := range n.NumField() {
			k, v := n.Field(i)
			if w := marshalValue(t, merged[k]); !bytes.Equal(v, w) {
				t.Fatalf("field %q: %s, want %s", k, v, w)
			}
		}
		back, err := n.Map(JSONLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if enc := marshalMap(t, back); !bytes.Equal(enc, n.Bytes()) {
			t.Fatalf("round trip %s, want %s", enc, n.Bytes())
		}
	})
}

// TestAppendObjectsIsAppendTo: the invocation document spliced from objects
// is the one encoded from their maps.
func TestAppendObjectsIsAppendTo(t *testing.T) {
	for _, tc := range objectCases {
		ctx, err := ObjectFromMap(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]any{"mode": "strict", "n": 3}
		so, _ := ObjectFromMap(settings)
		inv := Invocation{Point: "message.outbound", Context: tc.m, Settings: settings, Meta: Meta{Hook: "h", Invocation: "i", Tenant: "t\"x"}}
		want, err := inv.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := inv.AppendObjects(nil, ctx, so); ok && !bytes.Equal(got, mustEncode(t, inv)) {
			t.Errorf("%s: maps win: %s", tc.name, got)
		}
		objs := Invocation{Point: inv.Point, Meta: inv.Meta}
		if got, ok := objs.AppendObjects(nil, ctx, so); !ok || !bytes.Equal(got, want) {
			t.Errorf("%s: %s, want %s", tc.name, got, want)
		}
		if got, _ := objs.AppendObjects(nil, Object{}, Object{}); !bytes.Equal(got, mustEncode(t, objs)) {
			t.Errorf("zero objects: %s", got)
		}
	}
}

func mustEncode(t *testing.T, inv Invocation) []byte {
	b, err := inv.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
