package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/abi"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.jsonl (only with the reference encoder)")

// referenceEncode is the encoder the first audit logs were written with
// (encoding/json), kept verbatim as the reference appendRecord is held to.
// Never change it: logs written by it must verify forever.
func referenceEncode(r *Record) ([]byte, string, error) {
	c := *r
	c.Hash = ""
	body, err := json.Marshal(&c)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:])
	line := make([]byte, 0, len(body)+len(h)+10)
	line = append(line, body[:len(body)-1]...)
	line = append(line, `,"hash":"`...)
	line = append(line, h...)
	line = append(line, `"}`...)
	return line, h, nil
}

// referenceDigest is Digest as the first logs computed it (abi.Marshal).
func referenceDigest(v any) string {
	if m, ok := v.(map[string]any); ok && m == nil {
		v = map[string]any{}
	}
	b, err := abi.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf("unencodable %T", v))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// checkRecord holds encode and Hash to the reference for r: the same line
// and hash, or an error for both.
func checkRecord(t *testing.T, r *Record) {
	t.Helper()
	want, wantHash, werr := referenceEncode(r)
	got, gotHash, gerr := encode(r)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("encode error %v, reference error %v", gerr, werr)
	}
	if !bytes.Equal(got, want) || gotHash != wantHash {
		t.Fatalf("encode differs from the reference:\n got  %s\n want %s", got, want)
	}
	h, err := Hash(r)
	if (err == nil) != (werr == nil) || h != wantHash {
		t.Fatalf("Hash = %q, %v; want %q, %v", h, err, wantHash, werr)
	}
}

// tricky are strings that need escaping one way or another.
var tricky = []string{
	"", "plain", `"quoted" \back\slash/`, "<script>&amp;</script>", "tab\tnew\nline\rret\bbs\fff",
	"\x00\x01\x1f\x7f", "invalid \xff\xfe utf-8 \xc3", "\u2028 line sep \u2029", "ünïcödé 日本 🙂",
	"\ufffd literal", strings.Repeat("long &<> ", 300),
}

func fullRecord() *Record {
	return &Record{
		Seq: 42, Time: time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC), Run: "run-1", Tenant: "acme", Point: "message.outbound",
		Config: "sha256:cfg", Binding: "redact", Phase: "transformer", Module: strings.Repeat("ab", 32),
		Decision: "modify", By: "hook", HookAction: "modify", Resolution: "edited", Approval: "ap-1", Actor: "alice",
		Reason: "redacted 1 secret", Failure: &abi.Failure{Code: abi.FailTrap, Message: "unreachable <at> 0x12 & more"},
		Ignored: "a transformer cannot block", Input: "sha256:in", Output: "sha256:out",
		Diff: []Change{
			{Field: "outgoing", Before: "sha256:a", After: "sha256:b"},
			{Field: "n", Before: "sha256:c", After: "", BeforeValue: json.Number("1.50"), AfterValue: nil},
			{Field: "obj", BeforeValue: map[string]any{"z<": []any{1.5, "x&y", nil, true}, "a": map[string]any{}}, AfterValue: []any{}},
		},
		LatencyUS:     1234,
		HostCalls:     []HostCall{{Capability: "llm.run", Status: "ok", Charged: 7, LatencyUS: 99}, {Capability: "kv.get", Status: "denied"}},
		CreditCharged: 7, Prev: strings.Repeat("cd", 32), Hash: "ignored",
	}
}

func TestEncodeMatchesReference(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	odd := time.FixedZone("odd", -(13*3600 + 30*60 + 15))
	type custom struct {
		A string `json:"a"`
	}
	cases := map[string]func(r *Record){
		"zero": func(r *Record) { *r = Record{} },
		"full": func(r *Record) {},
		"no options": func(r *Record) {
			r.HookAction, r.Resolution, r.Approval, r.Actor, r.Reason, r.Failure, r.Ignored = "", "", "", "", "", nil, ""
		},
		"empty slices":     func(r *Record) { r.Diff, r.HostCalls = []Change{}, []HostCall{} },
		"wire":             func(r *Record) { r.Wire = "legacy" },
		"wire escaped":     func(r *Record) { r.Wire = "<\u2028>&" },
		"zone":             func(r *Record) { r.Time = r.Time.In(paris) },
		"odd zone":         func(r *Record) { r.Time = r.Time.In(odd) },
		"no nanoseconds":   func(r *Record) { r.Time = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) },
		"trailing zeros":   func(r *Record) { r.Time = time.Date(2025, 1, 2, 3, 4, 5, 120000000, time.UTC) },
		"local":            func(r *Record) { r.Time = r.Time.Local() },
		"monotonic":        func(r *Record) { r.Time = time.Now() },
		"year 10000":       func(r *Record) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"year -1":          func(r *Record) { r.Time = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		"zone over 24h":    func(r *Record) { r.Time = r.Time.In(time.FixedZone("x", 25*3600)) },
		"max ints":         func(r *Record) { r.Seq, r.LatencyUS, r.CreditCharged = math.MaxUint64, math.MinInt64, math.MaxInt64 },
		"negative charged": func(r *Record) { r.HostCalls[0].Charged = -1 },
		"typed nil map":    func(r *Record) { r.Diff[0].BeforeValue = map[string]any(nil) },
		"nil slice value":  func(r *Record) { r.Diff[0].AfterValue = []any(nil) },
		"floats": func(r *Record) {
			r.Diff[0].BeforeValue = []any{1e21, 1e20, 1e-7, 1e-6, math.Copysign(0, -1), 5e-324, math.MaxFloat64, 0.1, 100.0, 123456789.123}
		},
		"numbers": func(r *Record) {
			r.Diff[0].BeforeValue = []any{json.Number("-0.0e+5"), json.Number(""), int64(-3), uint64(math.MaxUint64), 7}
		},
		"invalid number":   func(r *Record) { r.Diff[0].BeforeValue = json.Number("01") },
		"NaN":              func(r *Record) { r.Diff[0].AfterValue = math.NaN() },
		"struct value":     func(r *Record) { r.Diff[0].AfterValue = custom{A: "<b>"} },
		"bytes value":      func(r *Record) { r.Diff[0].AfterValue = []byte("<x>") },
		"float32 value":    func(r *Record) { r.Diff[0].AfterValue = float32(0.1) },
		"channel value":    func(r *Record) { r.Diff[0].AfterValue = make(chan int) },
		"map string value": func(r *Record) { r.Diff[0].AfterValue = map[string]string{"<": ">", "&": ""} },
		"deep value": func(r *Record) {
			v := any("&")
			for range 700 {
				v = map[string]any{"k": v}
			}
			r.Diff[0].AfterValue = v
		},
	}
	for i, s := range tricky {
		cases[fmt.Sprintf("string %d", i)] = func(r *Record) {
			r.Run, r.Reason, r.Failure.Message, r.Diff[0].Field, r.HostCalls[1].Capability, r.Prev = s, s, s, s, s, s
			r.Diff[2].BeforeValue = map[string]any{s: s, "k" + s: []any{s}}
		}
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			r := fullRecord()
			mod(r)
			checkRecord(t, r)
		})
	}
}

func TestDigestMatchesReference(t *testing.T) {
	nested := map[string]any{"a": []any{map[string]any{"b": json.Number("1e400")}, nil, false}, "<": "&"}
	values := []any{nil, map[string]any(nil), map[string]any{}, []any(nil), "", "x", json.Number("12"), 1.5, 1e21,
		nested, math.NaN(), math.Inf(1), make(chan int), struct{ A int }{1}, []byte("b"), float32(2.5)}
	for _, s := range tricky {
		values = append(values, s, map[string]any{s: s})
	}
	for i, v := range values {
		if got, want := Digest(v), referenceDigest(v); got != want {
			t.Errorf("value %d (%T): Digest = %s, want %s", i, v, got, want)
		}
	}
}

// checkDigests holds a Digests of m to the reference, for the object and for
// each of its fields and for a field it does not have.
func checkDigests(t *testing.T, d *Digests, m map[string]any) {
	t.Helper()
	d.Reset(m)
	if got, want := d.Digest(), referenceDigest(m); got != want {
		t.Fatalf("Digest = %s, want %s", got, want)
	}
	for k, v := range m {
		gv, got, ok := d.Field(k)
		if want := referenceDigest(v); !ok || got != want {
			t.Fatalf("Field(%q) = %s, %v; want %s", k, got, ok, want)
		}
		if fmt.Sprintf("%#v", gv) != fmt.Sprintf("%#v", v) {
			t.Fatalf("Field(%q) value %#v, want %#v", k, gv, v)
		}
	}
	if _, _, ok := d.Field("\x00absent"); ok {
		t.Fatal("Field of an absent key reported present")
	}
}

func TestDigestsMatchReference(t *testing.T) {
	var d Digests // reused across objects, as the chain does
	objects := []map[string]any{
		nil, {}, {"outgoing": strings.Repeat("secret AKIA & <tag> ", 60)},
		{"a": nil, "b": map[string]any(nil), "c": map[string]any{}, "d": []any(nil), "e": json.Number("-1.5e-9")},
		{"z": 1.0, "y": []any{"\u2028", map[string]any{"k": nil}}, "é": "\xff", "": ""},
		{"bad": math.NaN(), "ok": "x"},
		{"struct": struct{ A int }{1}, "ok": "x"},
	}
	for _, s := range tricky {
		objects = append(objects, map[string]any{s: s, "x" + s: []any{s}})
	}
	for i, m := range objects {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkDigests(t, &d, m) })
	}
}

// fuzzValue decodes data as JSON for the fuzzers, with numbers as
// json.Number or float64; it returns the raw string when data is not JSON.
func fuzzValue(data []byte, numbers bool) any {
	if v, err := abi.ParseJSON(data, abi.JSONLimits{}); err == nil && numbers {
		return v
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return string(data)
	}
	return v
}

// FuzzRecordEncoding holds the hand-written record encoding to the reference
// over random records: strings in every field, values decoded from random
// JSON (nested, big and small numbers, escapes, invalid UTF-8), random times
// and zones.
func FuzzRecordEncoding(f *testing.F) {
	f.Add(uint64(0), int64(0), int32(0), "", "", "", []byte(`{}`), []byte(`null`), int64(0), false)
	f.Add(uint64(7), int64(1735787045123456789), int32(3600), "<tag>&\"", "\xff\u2028", "redact", []byte(`{"a":[1.5e300,-0,"\u2029"],"<":null}`), []byte(`"x"`), int64(-5), true)
	f.Add(uint64(math.MaxUint64), int64(math.MaxInt64), int32(-86399), "\x00\x1f", "ünï", "", []byte(`[1e-7, 123456789012345678901234567890]`), []byte(`9007199254740993`), int64(math.MinInt64), false)
	f.Fuzz(func(t *testing.T, seq uint64, nanos int64, zone int32, s1, s2, s3 string, v1, v2 []byte, n int64, numbers bool) {
		tm := time.Unix(0, nanos).In(time.FixedZone(s3, int(zone)))
		if zone%2 == 0 { // as the chain writes them (appendTime's cache)
			tm = tm.UTC()
		}
		r := &Record{
			Seq: seq, Time: tm, Run: s1, Tenant: s2, Point: s3,
			Config: s1 + s2, Binding: s2, Phase: s3, Module: s1, Decision: s2, By: s3, HookAction: s1, Wire: s2, Reason: s2 + s3,
			Input: s3, Output: s1, LatencyUS: n, CreditCharged: -n, Prev: s2,
		}
		if numbers {
			r.Failure = &abi.Failure{Code: abi.FailureCode(s1), Message: s2}
			r.HostCalls = []HostCall{{Capability: s3, Status: s1, Charged: n, LatencyUS: n / 3}}
		}
		if len(v1) > 0 || len(v2) > 0 {
			r.Diff = []Change{{Field: s1, Before: s2, After: s3, BeforeValue: fuzzValue(v1, numbers), AfterValue: fuzzValue(v2, !numbers)}}
		}
		checkRecord(t, r)
	})
}

// FuzzDigests holds Digest and Digests to the reference over random objects.
func FuzzDigests(f *testing.F) {
	f.Add([]byte(`{"outgoing":"hello <b>","n":1.5,"x":null,"y":{"z":[true,"\u2028"]}}`), false)
	f.Add([]byte(`{"":"","\u00ff":"\ud83d\ude42","big":1e400,"neg":-0.0e-10}`), true)
	f.Fuzz(func(t *testing.T, data []byte, numbers bool) {
		v := fuzzValue(data, numbers)
		if got, want := Digest(v), referenceDigest(v); got != want {
			t.Fatalf("Digest = %s, want %s", got, want)
		}
		if m, ok := v.(map[string]any); ok {
			var d Digests
			checkDigests(t, &d, m)
		}
	})
}

// goldenRecords are the records of testdata/golden.jsonl, a log the
// encoding/json encoder wrote: the chain must verify it forever.
func goldenRecords() []*Record {
	var out []*Record
	for i, s := range tricky {
		r := fullRecord()
		r.Time = r.Time.Add(time.Duration(i) * time.Second)
		r.Reason, r.Diff[0].Field = s, s
		r.Diff[2].BeforeValue = map[string]any{"v": s, "n": json.Number("1.50"), "f": 1e-7}
		out = append(out, r)
	}
	z := &Record{}
	out = append(out, z)
	// Added with ABI 1.2: a legacy {"abort":true} block, with its wire
	// shape. The lines before it are as they were.
	w := fullRecord()
	w.Decision, w.HookAction, w.Wire, w.Diff = "block", "block", "legacy", nil
	return append(out, w)
}

// TestGoldenLog verifies a log written by the encoding/json encoder, and
// re-encodes each of its records, read back, to the very bytes of its line.
func TestGoldenLog(t *testing.T) {
	path := filepath.Join("testdata", "golden.jsonl")
	if *update {
		var buf bytes.Buffer
		var (
			next uint64
			head string
		)
		for _, r := range goldenRecords() {
			r.Seq, r.Prev = next, head
			line, h, err := referenceEncode(r)
			if err != nil {
				t.Fatal(err)
			}
			r.Hash = h
			next, head = r.Seq+1, h
			buf.Write(append(line, '\n'))
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := VerifyFile(path)
	if err != nil || n != len(goldenRecords()) {
		t.Fatalf("VerifyFile = %d, %v", n, err)
	}
	records, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	for i := range records {
		if i < len(tricky) && !utf8.ValidString(tricky[i]) {
			// Invalid UTF-8 is stored as U+FFFD, so the record read
			// back is not the record written (VerifyFile, on the
			// bytes, is what checks such a line).
			continue
		}
		if err := VerifyFrom(records[i].Prev, records[i].Seq, records[i:i+1]); err != nil {
			t.Errorf("record %d read back: %v", i, err)
		}
		line, _, err := encode(&records[i])
		if err != nil || !bytes.Equal(line, lines[i]) {
			t.Errorf("record %d re-encodes as\n %s, %v\nstored\n %s", i, line, err, lines[i])
		}
	}
	// And the records as the chain makes them encode as they did then.
	for i, r := range goldenRecords() {
		r.Seq, r.Prev = records[i].Seq, records[i].Prev
		line, _, err := encode(r)
		if err != nil || !bytes.Equal(line, lines[i]) {
			t.Errorf("record %d encodes as\n %s, %v\nstored\n %s", i, line, err, lines[i])
		}
	}
}

// TestAppendTimeMatchesAppendText holds appendTime to Time.AppendText for
// times with and without fractions (trailing zeros included), before 1970,
// at the ends of the years RFC 3339 allows and past them (refused), and in
// zones other than UTC (the cache serves only UTC): each twice, so that the
// second is written from the cache where it can be, and each after a time of
// another second, so that it is not.
func TestAppendTimeMatchesAppendText(t *testing.T) {
	base := time.Date(2026, 11, 24, 5, 36, 7, 0, time.UTC)
	times := []time.Time{
		base, base.Add(1), base.Add(120), base.Add(123456789), base.Add(100 * time.Millisecond),
		base.Add(999999999), base.Add(time.Second), base.Add(-time.Second + 5000),
		time.Date(1969, 12, 31, 23, 59, 59, 999000000, time.UTC), time.Unix(-1, 1).UTC(), time.Unix(0, 0).UTC(),
		time.Date(0, 1, 1, 0, 0, 0, 10, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		base.In(time.FixedZone("UTC", 0)), base.Add(42).In(time.FixedZone("CET", 3600)), base.Add(7).Local(),
		{}, time.Now(), time.Now().UTC(),
	}
	other := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	for _, tm := range times {
		want, wantErr := tm.AppendText([]byte("x"))
		for i, before := range []time.Time{other, tm, tm} {
			appendTime(nil, before)
			got, ok := appendTime([]byte("x"), tm)
			if ok != (wantErr == nil) || (ok && string(got) != string(want)) {
				t.Errorf("%d: appendTime(%v) = %q, %v; AppendText gives %q, %v", i, tm, got, ok, want, wantErr)
			}
		}
	}
}

// BenchmarkRecordHash hashes a record as a chain step writes one (a guard's
// continue): appendRecord's encoding alone, and with the sha256 of it.
func BenchmarkRecordHash(b *testing.B) {
	d := func(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }
	r := &Record{Seq: 123456, Time: time.Date(2026, 11, 24, 5, 40, 1, 123456789, time.UTC), Run: "bench", Tenant: "acme",
		Point: "message.outbound", Config: d('c'), Binding: "g3", Phase: "guard", Module: strings.Repeat("m", 64),
		Decision: "continue", By: "hook", HookAction: "continue", Input: d('i'), Output: d('i'), LatencyUS: 2,
		Prev: strings.Repeat("p", 64)}
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			bp, body, _ := storedBody(r)
			releaseBody(bp, body)
		}
	})
	b.Run("hash", func(b *testing.B) {
		for b.Loop() {
			if _, err := Hash(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPlainMemo checks the record encoder's memo of strings that need no
// escaping (plainMemo) against the reference encoder, record after record
// on one memo: the same strings again (found in the memo), a string of the
// same length that needs escaping, a prefix of a remembered string (same
// address, shorter), equal bytes at another address, and a string longer
// than the memo keeps; and that a string that needs escaping is never
// remembered.
func TestPlainMemo(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	base := Record{Seq: 1, Time: time.Date(2026, 11, 24, 6, 0, 0, 5, time.UTC), Run: "run-1", Tenant: "acme",
		Point: "message.outbound", Config: digest, Binding: "g0", Phase: "guard", Module: strings.Repeat("m", 64),
		Decision: "continue", By: "hook", Input: digest, Output: digest, Prev: strings.Repeat("p", 64)}
	same := func(r *Record) {}
	variants := []func(r *Record){
		same, same,
		func(r *Record) { r.Tenant = "<cme" },                               // same length, escaped
		func(r *Record) { r.Run = base.Run[:3] },                            // a prefix: same address
		func(r *Record) { r.Input = strings.Clone(digest) },                 // equal bytes elsewhere
		func(r *Record) { r.Binding = strings.Repeat("b", maxMemoBytes+1) }, // too long to keep
		func(r *Record) { r.Phase = "gu&rd" }, same,
		func(r *Record) { r.Output = "sha256:\"" + digest[8:] }, same,
	}
	var memo plainMemo
	for i, v := range variants {
		r := base
		v(&r)
		want, _, err := referenceEncode(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendRecord(nil, &r, &memo)
		want = append(want[:len(want)-len(`,"hash":""}`)-64], '}')
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("%d: appendRecord with the memo:\n got  %s\n want %s", i, got, want)
		}
		for slot, s := range memo {
			if !plainASCII(s) || len(s) > maxMemoBytes {
				t.Fatalf("%d: memo slot %d holds %q", i, slot, s)
			}
		}
	}
}
