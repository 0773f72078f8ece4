package abi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeDecisionGolden runs every document in testdata/decisions through
// DecodeDecision. A file is named CASE@POINT.json: POINT is the hook point the
// decision is decoded for, and a CASE starting with "reject-" must be refused.
// The golden file CASE@POINT.golden holds the detected shape and the
// canonical encoding, or the error text.
//
// go test ./abi -run Golden -update rewrites the golden files.
func TestDecodeDecisionGolden(t *testing.T) {
	for _, c := range decisionCases(t) {
		in, name, point := c.data, c.name, c.point
		t.Run(c.base, func(t *testing.T) {
			wantReject := strings.HasPrefix(name, "reject-")
			d, err := DecodeDecision(in, point, JSONLimits{})
			var got string
			switch {
			case err != nil:
				var de *DecisionError
				if !errors.As(err, &de) {
					t.Errorf("error %v is a %T, want *DecisionError", err, err)
				}
				if !wantReject {
					t.Errorf("DecodeDecision(%q) = %v, want success", in, err)
				}
				got = "error: " + err.Error() + "\n"
			default:
				if wantReject {
					t.Errorf("DecodeDecision(%q) succeeded (%+v), want an error", in, d)
				}
				enc, err := d.Encode()
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				checkFixedPoint(t, d, enc, point, JSONLimits{})
				got = fmt.Sprintf("shape: %s\n%s\n", d.Shape, enc)
			}
			checkGolden(t, filepath.Join("testdata", "decisions", c.base+".golden"), []byte(got))
		})
	}
}

// decisionCase is a document of testdata/decisions, CASE@POINT.json.
type decisionCase struct {
	base, name string // CASE@POINT and CASE
	point      Point
	data       []byte
}

// decisionCases reads testdata/decisions, whose every file must be named
// CASE@POINT.json for a point of Points().
func decisionCases(tb testing.TB) []decisionCase {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "decisions", "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) < 50 {
		tb.Fatalf("only %d decision cases found", len(files))
	}
	cases := make([]decisionCase, len(files))
	for i, file := range files {
		base := strings.TrimSuffix(filepath.Base(file), ".json")
		name, pointName, ok := strings.Cut(base, "@")
		if !ok || strings.Contains(pointName, "@") {
			tb.Fatalf("%s: name is not CASE@POINT.json", file)
		}
		point, ok := LookupPoint(pointName)
		if !ok {
			tb.Fatalf("%s: unknown point %q in the file name", file, pointName)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		cases[i] = decisionCase{base: base, name: name, point: point, data: data}
	}
	return cases
}

// checkFixedPoint checks that the canonical encoding of an accepted decision
// decodes, at the same point and depth limit, to an equal decision in the
// canonical shape. The byte limit is relaxed by what the encoding may add.
func checkFixedPoint(t *testing.T, d *Decision, enc []byte, point Point, lim JSONLimits) {
	t.Helper()
	lim = lim.withDefaults()
	lim.MaxBytes = max(lim.MaxBytes, len(enc))
	d2, err := DecodeDecision(enc, point, lim)
	if err != nil {
		t.Fatalf("the canonical form %s does not decode: %v", enc, err)
	}
	if d2.Shape != ShapeCanonical {
		t.Errorf("the canonical form %s decodes as shape %q", enc, d2.Shape)
	}
	if !sameDecision(d, d2) {
		t.Errorf("the canonical form %s changes the decision:\n before %+v\n after  %+v", enc, d, d2)
	}
	enc2, err := d2.Encode()
	if err != nil || string(enc2) != string(enc) {
		t.Errorf("Encode is not a fixed point: %s then %s (%v)", enc, enc2, err)
	}
}

// checkEncode checks that encode succeeds and returns want.
func checkEncode(t *testing.T, encode func() ([]byte, error), want string) {
	t.Helper()
	got, err := encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("Encode = %s\nwant     %s", got, want)
	}
}

// sameDecision compares two decisions, ignoring the shape they arrived in.
func sameDecision(a, b *Decision) bool {
	return a.Action == b.Action && a.Reason == b.Reason && a.UserMessage == b.UserMessage &&
		a.DoNotReplyAgain == b.DoNotReplyAgain && len(a.Context) == len(b.Context) &&
		(len(a.Context) == 0 || reflect.DeepEqual(a.Context, b.Context))
}

// TestDecodeDecisionSeeds pins the decoded values of the seed shapes, field
// by field, so they do not rest on the golden files alone.
func TestDecodeDecisionSeeds(t *testing.T) {
	inbound, _ := LookupPoint("message.inbound")
	outbound, _ := LookupPoint("message.outbound")
	tests := []struct {
		name  string
		in    string
		point Point
		want  Decision
	}{
		{"seed 003 continue", `{"abort":false,"decision":"allow"}`, inbound,
			Decision{Action: ActionContinue, Shape: ShapeOutcome}},
		{"seed 003 abort", `{"abort":true,"decision":"block","reason":"spam"}`, inbound,
			Decision{Action: ActionBlock, Reason: "spam", Shape: ShapeOutcome}},
		{"seed 003 block", `{"abort":true,"decision":"block","reason":"loop","do_not_reply_again":true}`, inbound,
			Decision{Action: ActionBlock, Reason: "loop", DoNotReplyAgain: true, Shape: ShapeOutcome}},
		{"seed 003 transform", `{"abort":false,"decision":"transform","transformed_body":"Hasta luego","reason":"opt-out keyword","do_not_reply_again":true}`, inbound,
			Decision{Action: ActionModify, Context: map[string]any{"incoming": "Hasta luego"}, Reason: "opt-out keyword", DoNotReplyAgain: true, Shape: ShapeOutcome}},
		{"seed 003 transform outbound", `{"decision":"transform","transformed_body":"[redacted]"}`, outbound,
			Decision{Action: ActionModify, Context: map[string]any{"outgoing": "[redacted]"}, Shape: ShapeOutcome}},
		{"seed 004 modify", `{"action": "modify", "outgoing": "my *** is safe"}`, outbound,
			Decision{Action: ActionModify, Context: map[string]any{"outgoing": "my *** is safe"}, Shape: ShapeTopLevel}},
		{"legacy abort", `{"abort":true,"reason":"policy"}`, inbound,
			Decision{Action: ActionBlock, Reason: "policy", Shape: ShapeLegacy}},
		{"legacy continue", `{"abort":false}`, inbound,
			Decision{Action: ActionContinue, Shape: ShapeLegacy}},
		{"canonical", `{"action":"ask","user_message":"Allow?","reason":"risky"}`, inbound,
			Decision{Action: ActionAsk, Reason: "risky", UserMessage: "Allow?", Shape: ShapeCanonical}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeDecision([]byte(tt.in), tt.point, JSONLimits{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*d, tt.want) {
				t.Errorf("DecodeDecision(%s) =\n %+v, want\n %+v", tt.in, *d, tt.want)
			}
		})
	}
}

// TestDecodeDecisionEveryPoint checks, at every point, that each changeable
// field can be modified in both modify shapes, that no other context field
// can, and where a transform lands.
func TestDecodeDecisionEveryPoint(t *testing.T) {
	for _, p := range Points() {
		t.Run(p.Name, func(t *testing.T) {
			for _, f := range p.Fields {
				canonical := fmt.Sprintf(`{"action":"modify","context":{%q:"x"}}`, f)
				topLevel := fmt.Sprintf(`{"action":"modify",%q:"x"}`, f)
				for _, in := range []string{canonical, topLevel} {
					d, err := DecodeDecision([]byte(in), p, JSONLimits{})
					if p.CanChange(f) {
						if err != nil {
							t.Errorf("%s: %v", in, err)
						} else if d.Context[f] != "x" {
							t.Errorf("%s: context %v", in, d.Context)
						}
					} else if err == nil || !strings.Contains(err.Error(), "does not allow") {
						t.Errorf("%s: err = %v, want a refusal of field %q", in, err, f)
					}
				}
			}
			d, err := DecodeDecision([]byte(`{"decision":"transform","transformed_body":"new"}`), p, JSONLimits{})
			if p.Primary == "" {
				if err == nil || !strings.Contains(err.Error(), "no primary text field") {
					t.Errorf("transform: err = %v, want a refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("transform: %v", err)
			}
			if want := map[string]any{p.Primary: "new"}; !reflect.DeepEqual(d.Context, want) {
				t.Errorf("transform context %v, want %v", d.Context, want)
			}
		})
	}
}

func TestDecodeDecisionUnknownPoint(t *testing.T) {
	// The zero Point lets nothing be changed: a caller that forgot to
	// look the point up gets refusals, never silent modifications.
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"continue", `{"action":"continue"}`, true},
		{"block", `{"abort":true}`, true},
		{"modify", `{"action":"modify","context":{"outgoing":"x"}}`, false},
		{"transform", `{"decision":"transform","transformed_body":"x"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeDecision([]byte(tt.in), Point{}, JSONLimits{})
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%t", err, tt.ok)
			}
		})
	}
}

// TestDecodeDecisionTopLevelDepth checks that a top-level modify is accepted
// only if its canonical form, which nests the field one level deeper, still
// fits the depth limit.
func TestDecodeDecisionTopLevelDepth(t *testing.T) {
	llm, _ := LookupPoint("llm.before")
	lim := JSONLimits{MaxDepth: 4}
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"canonical at the limit", `{"action":"modify","context":{"messages":[[1]]}}`, true},
		{"canonical over the limit", `{"action":"modify","context":{"messages":[[[1]]]}}`, false},
		{"top-level one under the limit", `{"action":"modify","messages":[[1]]}`, true},
		{"top-level at the limit", `{"action":"modify","messages":[[[1]]]}`, false},
		{"top-level, deep field among flat ones", `{"action":"modify","prompt":"p","messages":[{"a":[1]}]}`, false},
		{"top-level scalar", `{"action":"modify","prompt":"p"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeDecision([]byte(tt.in), llm, lim)
			if !tt.ok {
				if err == nil {
					t.Fatalf("accepted %s", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			enc, err := d.Encode()
			if err != nil {
				t.Fatal(err)
			}
			checkFixedPoint(t, d, enc, llm, lim)
		})
	}
	t.Run("default limit", func(t *testing.T) {
		deep := func(n int) string {
			return `{"action":"modify","messages":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
		}
		if _, err := DecodeDecision([]byte(deep(DefaultMaxJSONDepth-2)), llm, JSONLimits{}); err != nil {
			t.Errorf("%d deep: %v", DefaultMaxJSONDepth-2, err)
		}
		_, err := DecodeDecision([]byte(deep(DefaultMaxJSONDepth-1)), llm, JSONLimits{})
		if err == nil || !strings.Contains(err.Error(), `nests deeper than 64 once moved into "context"`) {
			t.Errorf("%d deep: err = %v", DefaultMaxJSONDepth-1, err)
		}
	})
}

func TestDecodeDecisionLimits(t *testing.T) {
	in := []byte(`{"action":"block","reason":"` + strings.Repeat("x", 100) + `"}`)
	_, err := DecodeDecision(in, Point{}, JSONLimits{MaxBytes: 64})
	var je *JSONError
	if !errors.As(err, &je) || !strings.Contains(je.Reason, "over the limit of 64") {
		t.Fatalf("err = %v, want a size error", err)
	}
	if _, err := DecodeDecision(in, Point{}, JSONLimits{MaxBytes: len(in)}); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

// TestDecodeDecisionErrorsAreStable checks that a document with several
// faults always gets the same error, whatever the map order.
func TestDecodeDecisionErrorsAreStable(t *testing.T) {
	p, _ := LookupPoint("message.outbound")
	docs := []string{
		`{"decision":"allow","z":1,"y":2,"x":3,"w":4}`,
		`{"abort":true,"z":1,"y":2,"x":3,"w":4}`,
		`{"action":"block","z":1,"y":2,"x":3,"w":4}`,
		`{"action":"modify","context":{"z":1,"y":2,"x":3,"outgoing":4}}`,
		`{"action":"modify","z":1,"y":2,"x":3}`,
	}
	for _, doc := range docs {
		t.Run(doc, func(t *testing.T) {
			_, first := DecodeDecision([]byte(doc), p, JSONLimits{})
			if first == nil {
				t.Fatal("accepted")
			}
			for i := 0; i < 50; i++ {
				if _, err := DecodeDecision([]byte(doc), p, JSONLimits{}); err.Error() != first.Error() {
					t.Fatalf("error changed: %q then %q", first, err)
				}
			}
		})
	}
}

func TestDecisionEncode(t *testing.T) {
	tests := []struct {
		name string
		d    Decision
		want string
	}{
		{"continue", Decision{Action: ActionContinue}, `{"action":"continue"}`},
		{"shape is not encoded", Decision{Action: ActionBlock, Shape: ShapeLegacy}, `{"action":"block"}`},
		{"empty context omitted", Decision{Action: ActionContinue, Context: map[string]any{}}, `{"action":"continue"}`},
		{"field order", Decision{Action: ActionModify, Context: map[string]any{"outgoing": "x"}, Reason: "r", UserMessage: "u", DoNotReplyAgain: true},
			`{"action":"modify","context":{"outgoing":"x"},"reason":"r","user_message":"u","do_not_reply_again":true}`},
		{"no HTML escaping", Decision{Action: ActionBlock, Reason: "<script>&"}, `{"action":"block","reason":"<script>&"}`},
		{"context keys sorted", Decision{Action: ActionModify, Context: map[string]any{"prompt": "p", "messages": []any{}}},
			`{"action":"modify","context":{"messages":[],"prompt":"p"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkEncode(t, tt.d.Encode, tt.want) })
	}
}

func TestDecisionError(t *testing.T) {
	_, err := DecodeDecision([]byte(`{"action":"continue",}`), Point{}, JSONLimits{})
	var de *DecisionError
	if !errors.As(err, &de) || de.Reason != "not strict JSON" {
		t.Fatalf("err = %v, want a *DecisionError", err)
	}
	var je *JSONError
	if !errors.As(err, &je) || je.Offset != 21 {
		t.Errorf("the JSONError is not reachable with its offset: %v", err)
	}
	if got, want := (&DecisionError{Reason: "r"}).Error(), "invalid decision: r"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestActionValid(t *testing.T) {
	for _, a := range []Action{ActionContinue, ActionModify, ActionBlock, ActionAsk} {
		if !a.Valid() {
			t.Errorf("%q.Valid() = false", a)
		}
	}
	for _, a := range []Action{"", "allow", "transform", "Continue", "deny", "abort"} {
		if a.Valid() {
			t.Errorf("%q.Valid() = true", a)
		}
	}
}

// TestDecisionContextValues checks that modified values keep their JSON
// types (numbers stay json.Number) through the canonical form.
func TestDecisionContextValues(t *testing.T) {
	p, _ := LookupPoint("tool.before")
	d, err := DecodeDecision([]byte(`{"action":"modify","context":{"arguments":{"n":12,"f":1.5,"s":"x","b":true,"z":null}}}`), p, JSONLimits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": json.Number("12"), "f": json.Number("1.5"), "s": "x", "b": true, "z": nil}
	if !reflect.DeepEqual(d.Context["arguments"], want) {
		t.Errorf("arguments = %#v, want %#v", d.Context["arguments"], want)
	}
}
