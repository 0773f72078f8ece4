package abi

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// pointExamples is an example context for every hook point. ABI.md shows the
// same contexts (TestABIDoc checks it) and testdata/invocations holds the
// invocation document of each.
var pointExamples = map[string]string{
	"message.inbound":  `{"incoming":"What's the status of order 1234?","conversation":"c_9f2","user":"u_77"}`,
	"message.outbound": `{"incoming":"What's the status of order 1234?","outgoing":"It shipped today. Your API key is sk-live-abc123.","conversation":"c_9f2","user":"u_77"}`,
	"tool.before":      `{"tool":"shell.exec","arguments":{"command":"rm -rf /tmp/cache"}}`,
	"tool.after":       `{"tool":"web.fetch","arguments":{"url":"https://example.com"},"result":"<html>...</html>"}`,
	"llm.before":       `{"model":"small-chat","prompt":"Summarise the thread.","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}]}`,
	"llm.after":        `{"model":"small-chat","prompt":"Summarise the thread.","response":"The user greeted the assistant."}`,
	"context.assemble": `{"items":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hi"}],"tokens":412}`,
	"compaction":       `{"items":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}],"summary":"The user said hello."}`,
	"memory.read":      `{"key":"user.preferences","value":"Prefers short answers."}`,
	"memory.write":     `{"key":"user.phone","value":"+1 555 0100"}`,

	"session.created":      `{"session":"s_41","user":"u_77"}`,
	"session.forked":       `{"session":"s_42","parent":"s_41","user":"u_77"}`,
	"session.ended":        `{"session":"s_41","user":"u_77"}`,
	"tool.gap":             `{"tool":"calendar.book","arguments":{"when":"tomorrow 10:00"}}`,
	"tool.failed":          `{"tool":"web.fetch","arguments":{"url":"https://example.com"},"error":"timeout after 30s"}`,
	"llm.failed":           `{"model":"small-chat","error":"rate limited by the provider"}`,
	"agent.created":        `{"agent":"researcher-2","parent":"planner","definition":{"tools":["web.fetch"],"model":"small-chat"}}`,
	"context.overflow":     `{"tokens":131072,"limit":128000}`,
	"skill.injected":       `{"skills":["pdf-reading","sql"],"tokens":2310}`,
	"compaction.triggered": `{"items":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}],"tokens":120500}`,
	"compaction.completed": `{"summary":"The user said hello.","tokens_before":120500,"tokens_after":8200}`,
	"loop.exit":            `{"response":"Done: the report is attached.","iterations":7}`,
	"steering.inject":      `{"messages":[{"role":"user","content":"Focus on the EU figures."}]}`,
	"steering.skip":        `{"messages":[{"role":"user","content":"Also check the US."}]}`,

	"llm.output.stream":       `{"model":"small-chat","prompt":"Write a deploy note.","response":"Set OPENAI_KEY to sk-proj-","offset":120,"final":false}`,
	"message.outbound.stream": `{"incoming":"How do I deploy?","outgoing":"Run make deploy, then check","conversation":"c_9f2","user":"u_77","offset":0,"final":true}`,
}

func exampleInvocation(t *testing.T, point string) *Invocation {
	t.Helper()
	v, err := ParseJSON([]byte(pointExamples[point]), JSONLimits{})
	if err != nil {
		t.Fatalf("example context of %s: %v", point, err)
	}
	return &Invocation{
		ABI:      Major,
		Point:    point,
		Context:  v.(map[string]any),
		Settings: map[string]any{"patterns": []any{"sk-live-[a-z0-9]+"}},
		Meta:     Meta{Hook: "redact-secrets", Invocation: "inv_01J9Z", Tenant: "acme"},
	}
}

// TestInvocationGolden pins the encoding of the invocation document at every
// point, plus one with awkward characters.
func TestInvocationGolden(t *testing.T) {
	if len(pointExamples) != len(Points()) {
		t.Errorf("%d example contexts for %d points", len(pointExamples), len(Points()))
	}
	for _, p := range Points() {
		t.Run(p.Name, func(t *testing.T) {
			inv := exampleInvocation(t, p.Name)
			// The example carries exactly the point's fields.
			var keys []string
			for k := range inv.Context {
				keys = append(keys, k)
			}
			if !sameSet(keys, p.Fields) {
				t.Errorf("example context has fields %v, the point %v", keys, p.Fields)
			}
			enc, err := inv.Encode()
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "invocations", p.Name+".golden"), append(enc, '\n'))
			checkInvocationRoundTrip(t, inv, enc)
		})
	}
	t.Run("awkward characters", func(t *testing.T) {
		inv := &Invocation{
			Point:   "message.inbound",
			Context: map[string]any{"incoming": "<b>&</b> \"quoted\" \\ \u2028 \x00 é 😀"},
			Meta:    Meta{Hook: "h", Invocation: "i", Tenant: "t"},
		}
		enc, err := inv.Encode()
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, filepath.Join("testdata", "invocations", "awkward-characters.golden"), append(enc, '\n'))
	})
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !contains(b, s) {
			return false
		}
	}
	return true
}

// checkInvocationRoundTrip checks that enc, the encoding of inv, decodes to
// inv and encodes again to the same bytes.
func checkInvocationRoundTrip(t *testing.T, inv *Invocation, enc []byte) {
	t.Helper()
	back, err := DecodeInvocation(enc, JSONLimits{MaxBytes: max(len(enc), DefaultMaxJSONBytes)})
	if err != nil {
		t.Fatalf("DecodeInvocation(%s): %v", enc, err)
	}
	want := *inv
	want.ABI = Major
	if want.Context == nil {
		want.Context = map[string]any{}
	}
	if want.Settings == nil {
		want.Settings = map[string]any{}
	}
	if !reflect.DeepEqual(*back, want) {
		t.Errorf("round trip changed the invocation:\n before %+v\n after  %+v", want, *back)
	}
	enc2, err := back.Encode()
	if err != nil || string(enc2) != string(enc) {
		t.Errorf("Encode is not a fixed point: %s then %s (%v)", enc, enc2, err)
	}
}

func TestInvocationEncode(t *testing.T) {
	tests := []struct {
		name string
		inv  Invocation
		want string
	}{
		{"zero value", Invocation{},
			`{"abi":1,"point":"","context":{},"settings":{},"meta":{"hook":"","invocation":"","tenant":""}}`},
		{"abi filled in", Invocation{Point: "memory.read", Context: map[string]any{"key": "k", "value": "v"}},
			`{"abi":1,"point":"memory.read","context":{"key":"k","value":"v"},"settings":{},"meta":{"hook":"","invocation":"","tenant":""}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkEncode(t, tt.inv.Encode, tt.want) })
	}
	t.Run("does not modify the receiver", func(t *testing.T) {
		inv := Invocation{}
		if _, err := inv.Encode(); err != nil {
			t.Fatal(err)
		}
		if inv.ABI != 0 || inv.Context != nil || inv.Settings != nil {
			t.Errorf("Encode changed its receiver: %+v", inv)
		}
	})
}

func TestDecodeInvocation(t *testing.T) {
	const ok = `{"abi":1,"point":"message.inbound","context":{"incoming":"hi"},"settings":{"a":1},"meta":{"hook":"h","invocation":"i","tenant":"t"}}`
	tests := []struct {
		name   string
		in     string
		reason string // "" for success
		want   *Invocation
	}{
		{"full", ok, "", &Invocation{ABI: 1, Point: "message.inbound", Context: map[string]any{"incoming": "hi"},
			Settings: map[string]any{"a": json.Number("1")}, Meta: Meta{"h", "i", "t"}}},
		{"minimal", `{"abi":1,"point":"p","context":{}}`, "",
			&Invocation{ABI: 1, Point: "p", Context: map[string]any{}, Settings: map[string]any{}}},
		{"null settings and meta", `{"abi":1,"point":"p","context":{},"settings":null,"meta":null}`, "",
			&Invocation{ABI: 1, Point: "p", Context: map[string]any{}, Settings: map[string]any{}}},
		{"unknown fields ignored", `{"abi":1,"point":"p","context":{},"deadline_ms":250,"meta":{"hook":"h","region":"eu"}}`, "",
			&Invocation{ABI: 1, Point: "p", Context: map[string]any{}, Settings: map[string]any{}, Meta: Meta{Hook: "h"}}},
		{"partial meta", `{"abi":1,"point":"p","context":{},"meta":{"tenant":"t"}}`, "",
			&Invocation{ABI: 1, Point: "p", Context: map[string]any{}, Settings: map[string]any{}, Meta: Meta{Tenant: "t"}}},

		{"abi 2", strings.Replace(ok, `"abi":1`, `"abi":2`, 1), `"abi" is 2, this code speaks 1`, nil},
		{"abi 0", strings.Replace(ok, `"abi":1`, `"abi":0`, 1), `"abi" is 0`, nil},
		{"abi 1.0", strings.Replace(ok, `"abi":1`, `"abi":1.0`, 1), `"abi" is 1.0`, nil},
		{"abi as a string", strings.Replace(ok, `"abi":1`, `"abi":"1"`, 1), `"abi" must be a number`, nil},
		{"abi missing", `{"point":"p","context":{}}`, `"abi" must be a number`, nil},
		{"point missing", `{"abi":1,"context":{}}`, `"point" must be a string`, nil},
		{"point a number", `{"abi":1,"point":3,"context":{}}`, `"point" must be a string`, nil},
		{"context missing", `{"abi":1,"point":"p"}`, `"context" must be an object`, nil},
		{"context null", `{"abi":1,"point":"p","context":null}`, `"context" must be an object`, nil},
		{"context an array", `{"abi":1,"point":"p","context":[]}`, `"context" must be an object`, nil},
		{"context a string", `{"abi":1,"point":"p","context":"hi"}`, `"context" must be an object`, nil},
		{"settings an array", `{"abi":1,"point":"p","context":{},"settings":[]}`, `"settings" must be an object`, nil},
		{"meta a string", `{"abi":1,"point":"p","context":{},"meta":"m"}`, `"meta" must be an object`, nil},
		{"meta.hook a number", `{"abi":1,"point":"p","context":{},"meta":{"hook":1}}`, `"meta.hook" must be a string`, nil},
		{"meta.tenant null", `{"abi":1,"point":"p","context":{},"meta":{"tenant":null}}`, `"meta.tenant" must be a string`, nil},
		{"several bad meta fields", `{"abi":1,"point":"p","context":{},"meta":{"tenant":1,"invocation":2,"hook":3}}`, `"meta.hook" must be a string`, nil},
		{"not an object", `[1]`, "not a JSON object", nil},
		{"invalid JSON", `{"abi":1,}`, "not strict JSON", nil},
		{"duplicate key", `{"abi":1,"abi":1,"point":"p","context":{}}`, "duplicate key", nil},
		{"empty", ``, "not strict JSON", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeInvocation([]byte(tt.in), JSONLimits{})
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("DecodeInvocation = %+v\nwant %+v", got, tt.want)
				}
				return
			}
			var ie *InvocationError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v (%T), want *InvocationError", err, err)
			}
			if !strings.Contains(err.Error(), tt.reason) || !strings.HasPrefix(err.Error(), "invalid invocation: ") {
				t.Errorf("err = %q, want it to contain %q", err, tt.reason)
			}
		})
	}
	t.Run("limits", func(t *testing.T) {
		_, err := DecodeInvocation([]byte(ok), JSONLimits{MaxBytes: len(ok) - 1})
		var je *JSONError
		if !errors.As(err, &je) {
			t.Errorf("over the byte limit: err = %v", err)
		}
		_, err = DecodeInvocation([]byte(`{"abi":1,"point":"p","context":{"a":[[]]}}`), JSONLimits{MaxDepth: 3})
		if !errors.As(err, &je) {
			t.Errorf("over the depth limit: err = %v", err)
		}
	})
}
