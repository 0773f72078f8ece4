package abi

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The fuzzers below cover every decoder at the trust boundary. Seeds come from
// f.Add, from the table and golden cases of the other tests, and from
// testdata/fuzz/FuzzXxx. Run one with, for example:
//
//	go test ./abi -run '^$' -fuzz '^FuzzDecodeDecision$' -fuzztime 30s

func FuzzParseJSON(f *testing.F) {
	for _, tt := range jsonCases() {
		f.Add([]byte(tt.in))
	}
	for _, s := range []string{
		`{"a":[1,2,{"b":"c"}],"d":-0.5e+10}`,
		`["\ud83d\ude00","\u2028",""]`,
		nest("mixed", DefaultMaxJSONDepth),
		nest("array", DefaultMaxJSONDepth+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data, JSONLimits{})
		checkSkip(t, data, err)
		if err != nil {
			var je *JSONError
			if !errors.As(err, &je) {
				t.Fatalf("error %v is a %T, want *JSONError", err, err)
			}
			if je.Offset < 0 || je.Offset > len(data) {
				t.Fatalf("offset %d outside a document of %d bytes", je.Offset, len(data))
			}
			if v != nil {
				t.Fatalf("a value (%v) beside an error", v)
			}
			return
		}
		checkRoundTrip(t, data)
	})
}

// checkSkip holds Lexer.Skip, which checks without building, to ParseJSON,
// which builds with Lexer.Value: the same documents accepted and the same
// error for the others.
func checkSkip(t *testing.T, data []byte, want error) {
	t.Helper()
	var l Lexer
	l.Reset(data, 0)
	l.SkipSpace()
	ok := l.Skip(0)
	l.SkipSpace()
	if ok && !l.AtEnd() {
		ok = l.fail(l.Pos(), "unexpected data after the value")
	}
	got := l.Err()
	if ok != (want == nil) || (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
		t.Fatalf("document %q: Skip ok=%t error %v, ParseJSON error %v", data, ok, got, want)
	}
}

// decisionSeeds returns the golden decision cases with the index of their
// point in Points().
func decisionSeeds(f *testing.F) (docs [][]byte, points []uint8) {
	for _, c := range decisionCases(f) {
		for i, p := range Points() {
			if p.Name == c.point.Name {
				docs = append(docs, c.data)
				points = append(points, uint8(i))
			}
		}
	}
	return docs, points
}

// fuzzPoint maps a fuzzed byte to a point; the last values give the zero
// Point, which allows no change at all.
func fuzzPoint(i uint8) Point {
	ps := Points()
	if int(i) >= 256-8 {
		return Point{}
	}
	return ps[int(i)%len(ps)]
}

func FuzzDecodeDecision(f *testing.F) {
	docs, points := decisionSeeds(f)
	for i := range docs {
		f.Add(docs[i], points[i])
	}
	f.Add([]byte(`{"action":"modify","messages":[[[[1]]]],"prompt":"p"}`), uint8(3))
	f.Add([]byte(`{"decision":"transform","transformed_body":"\u2028"}`), uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, pi uint8) {
		point := fuzzPoint(pi)
		d, err := DecodeDecision(data, point, JSONLimits{})
		if err != nil {
			var de *DecisionError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is a %T, want *DecisionError", err, err)
			}
			if d != nil {
				t.Fatalf("a decision beside an error")
			}
			return
		}
		// Whatever the shape, the result is a well-formed canonical decision.
		if !d.Action.Valid() {
			t.Fatalf("action %q", d.Action)
		}
		switch d.Action {
		case ActionModify:
			if len(d.Context) == 0 {
				t.Fatalf("modify without fields from %q", data)
			}
			for k := range d.Context {
				if !point.CanChange(k) {
					t.Fatalf("modify of %q at %s from %q", k, point.Name, data)
				}
			}
		default:
			if len(d.Context) != 0 {
				t.Fatalf("%s with a context from %q", d.Action, data)
			}
		}
		// ABI 1.2's fields: pending on an ask only, never empty;
		// short_circuit on a continue only.
		if d.Pending != nil && (d.Action != ActionAsk || len(d.Pending) == 0) {
			t.Fatalf("%s with pending %v from %q", d.Action, d.Pending, data)
		}
		if d.ShortCircuit && d.Action != ActionContinue {
			t.Fatalf("%s with short_circuit from %q", d.Action, data)
		}
		// The canonical form is a fixed point.
		enc, err := d.Encode()
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		checkFixedPoint(t, d, enc, point, JSONLimits{})
	})
}

func FuzzDecodeInvocation(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "invocations", "*.golden"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{"abi":1,"point":"p","context":{}}`,
		`{"abi":1,"point":"p","context":{},"settings":null,"meta":null}`,
		`{"abi":1,"point":"p","context":{},"meta":{"hook":"h","x":1},"extra":[1]}`,
		`{"abi":2,"point":"p","context":{}}`,
		`{"abi":1.0,"point":"p","context":{}}`,
		`{"abi":1,"point":"p"}`,
		`{"abi":1,"point":"p","context":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := DecodeInvocation(data, JSONLimits{})
		if err != nil {
			var ie *InvocationError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v is a %T, want *InvocationError", err, err)
			}
			return
		}
		if inv.ABI != Major || inv.Context == nil || inv.Settings == nil {
			t.Fatalf("incomplete invocation %+v", inv)
		}
		enc, err := inv.Encode()
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		checkInvocationRoundTrip(t, inv, enc)
	})
}

func FuzzDecodeManifest(f *testing.F) {
	for _, s := range []string{
		abiMDManifest,
		`{}`,
		`{"name":"n","capabilities":[],"settings_schema":{}}`,
		`{"points":[]}`,
		`{"points":["tool.before","nowhere"]}`,
		`{"capabilities":["llm.run",""]}`,
		`{"name":"n","license":{"spdx":"MIT"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("error %v is a %T, want *ManifestError", err, err)
			}
			return
		}
		for _, p := range m.Points {
			if _, ok := LookupPoint(p); !ok {
				t.Fatalf("unknown point %q accepted", p)
			}
		}
		if m.Points != nil && len(m.Points) == 0 {
			t.Fatal("empty points accepted")
		}
		// Marshalling the manifest and decoding it again changes nothing,
		// except that omitempty drops an empty capabilities list or
		// settings schema (the same meaning: ask for nothing, check
		// nothing).
		enc, err := Marshal(m)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		m2, err := DecodeManifest(enc)
		if err != nil {
			t.Fatalf("DecodeManifest(%s): %v", enc, err)
		}
		want := *m
		if len(want.Capabilities) == 0 {
			want.Capabilities = nil
		}
		if len(want.SettingsSchema) == 0 {
			want.SettingsSchema = nil
		}
		if !reflect.DeepEqual(*m2, want) {
			t.Fatalf("round trip changed the manifest:\n before %+v\n after  %+v", want, *m2)
		}
	})
}

// TestFuzzCorpusFormat checks the committed seed corpora parse, so a broken
// file fails here rather than silently in the fuzzing engine.
func TestFuzzCorpusFormat(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "Fuzz*"))
	if len(dirs) < 4 {
		t.Fatalf("%d seed corpus directories, want one per fuzzer", len(dirs))
	}
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) == 0 {
			t.Errorf("%s is empty", dir)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), "go test fuzz v1\n[]byte(") {
				t.Errorf("%s is not in the go test fuzz v1 format", file)
			}
		}
	}
}
