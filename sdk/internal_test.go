//go:build !wasip1

package sdk

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk/internal/hostcall"
)

// scripted is a host whose replies a test scripts call by call, to reach
// protocol paths a well-behaved host never takes.
type scripted struct {
	doc     []byte
	taken   bool
	replies []func(name string, payload, out []byte) (abi.Status, uint32)
	n       int
}

func (s *scripted) HostCall(name string, payload, out []byte) (abi.Status, uint32) {
	if !s.taken && name == "" && len(payload) == 0 {
		s.taken = true
		return abi.StatusOK, uint32(copy(out, s.doc))
	}
	if s.n >= len(s.replies) {
		return abi.StatusUnknownCapability, 0
	}
	r := s.replies[s.n]
	s.n++
	return r(name, payload, out)
}

func reply(s abi.Status, body string) func(string, []byte, []byte) (abi.Status, uint32) {
	return func(_ string, _, out []byte) (abi.Status, uint32) {
		if len(body) <= len(out) {
			copy(out, body)
		}
		return s, uint32(len(body))
	}
}

const doc = `{"abi":1,"point":"message.outbound","context":{"outgoing":"hi"},"settings":{},"meta":{}}`

// invoke runs handler against a scripted host.
func invoke(t *testing.T, s *scripted, handler func(*Invocation) (Decision, error)) ([]byte, string) {
	t.Helper()
	if s.doc == nil {
		s.doc = []byte(doc)
	}
	out, failure, err := hostcall.Invoke(s, uint32(len(s.doc)), handler)
	if err != nil {
		t.Fatal(err)
	}
	return out, failure
}

func TestTakeProtocolErrors(t *testing.T) {
	big := strings.Repeat("x", scratchSize+1)
	tests := []struct {
		name    string
		replies []func(string, []byte, []byte) (abi.Status, uint32)
		status  abi.Status
		message string
	}{
		{
			name:    "take answers NO_PENDING",
			replies: []func(string, []byte, []byte) (abi.Status, uint32){reply(abi.StatusOK, big), reply(abi.StatusNoPending, "")},
			status:  abi.StatusNoPending,
			message: "taking a parked reply",
		},
		{
			name:    "take answers BUFFER_TOO_SMALL",
			replies: []func(string, []byte, []byte) (abi.Status, uint32){reply(abi.StatusOK, big), reply(abi.StatusBufferTooSmall, big+"y")},
			status:  abi.StatusBufferTooSmall,
			message: "taking a parked reply",
		},
		{
			name:    "error body that is not an error object",
			replies: []func(string, []byte, []byte) (abi.Status, uint32){reply(abi.StatusDenied, "nope")},
			status:  abi.StatusDenied,
			message: "malformed error body",
		},
		{
			name:    "large error body is taken too",
			replies: []func(string, []byte, []byte) (abi.Status, uint32){reply(abi.StatusCapabilityFailed, `{"code":"capability_failed","message":"`+big+`"}`), reply(abi.StatusCapabilityFailed, `{"code":"capability_failed","message":"`+big+`"}`)},
			status:  abi.StatusCapabilityFailed,
			message: big,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{replies: tt.replies}
			var got error
			_, failure := invoke(t, s, func(*Invocation) (Decision, error) {
				got = Call("x.y", nil, nil)
				return Continue(), nil
			})
			if failure != "" {
				t.Fatal(failure)
			}
			var e *Error
			if !errors.As(got, &e) {
				t.Fatalf("error = %v, want *Error", got)
			}
			if e.Status != tt.status || e.Capability != "x.y" || !strings.Contains(e.Message, tt.message) {
				t.Errorf("error = %+v, want status %s, message containing %.40q", e, tt.status, tt.message)
			}
			if s.n != len(tt.replies) {
				t.Errorf("made %d host calls after the input take, want %d", s.n, len(tt.replies))
			}
		})
	}
}

func TestInputTakeFails(t *testing.T) {
	s := &scripted{doc: []byte(doc), taken: true} // nothing to take
	out, failure := invoke(t, s, func(*Invocation) (Decision, error) { return Continue(), nil })
	if out != nil || !strings.Contains(failure, "taking the invocation document returned UNKNOWN_CAPABILITY") {
		t.Fatalf("out %q, failure %q", out, failure)
	}
}

func TestReentryIsRefused(t *testing.T) {
	var inner string
	s := &scripted{replies: []func(string, []byte, []byte) (abi.Status, uint32){
		func(_ string, _, out []byte) (abi.Status, uint32) {
			// A broken host calling hook_v1_handle from inside host_call.
			_, inner = handle(10, nil)
			return abi.StatusOK, uint32(copy(out, "{}"))
		},
	}}
	out, failure := invoke(t, s, func(*Invocation) (Decision, error) {
		return Continue(), Call("x.y", nil, nil)
	})
	if failure != "" || string(out) != `{"action":"continue"}` {
		t.Fatalf("outer: out %q, failure %q", out, failure)
	}
	if !strings.Contains(inner, "re-entered") {
		t.Fatalf("inner failure = %q, want a re-entry failure", inner)
	}
}

func TestUnsupportedOverride(t *testing.T) {
	s := &scripted{doc: []byte(doc)}
	_, failure, err := hostcall.Invoke(s, uint32(len(doc)), func() {})
	if err != nil || !strings.Contains(failure, "unsupported handler type") {
		t.Fatalf("failure %q, err %v", failure, err)
	}
}

func TestEncodeCanonical(t *testing.T) {
	tests := []struct {
		name  string
		d     Decision
		point string
		want  string
	}{
		{"zero is continue", Decision{}, "message.outbound", `{"action":"continue"}`},
		{"continue", Continue(), "message.outbound", `{"action":"continue"}`},
		{"continue with reason", Continue().WithReason("ok"), "message.outbound", `{"action":"continue","reason":"ok"}`},
		{"modify", Modify("outgoing", "<b>&"), "message.outbound", `{"action":"modify","context":{"outgoing":"<b>&"}}`},
		{"modify fields sorted", ModifyFields(map[string]any{"b": 1, "a": []any{true, nil}}), "llm.before", `{"action":"modify","context":{"a":[true,null],"b":1}}`},
		{"modify primary", ModifyPrimary("x"), "tool.after", `{"action":"modify","context":{"result":"x"}}`},
		{"block", Block("no").WithUserMessage("sorry").DoNotReplyAgain(), "message.inbound", `{"action":"block","reason":"no","user_message":"sorry","do_not_reply_again":true}`},
		{"ask", Ask("approve?"), "tool.before", `{"action":"ask","reason":"approve?"}`},
		{"ask with pending", Ask("approve?").WithPending(map[string]any{"tool": "rm"}), "tool.before", `{"action":"ask","reason":"approve?","pending":{"tool":"rm"}}`},
		{"ask with empty pending", Ask("approve?").WithPending(map[string]any{}), "tool.before", `{"action":"ask","reason":"approve?"}`},
		{"short circuit", Continue().WithReason("trusted").ShortCircuit(), "message.inbound", `{"action":"continue","reason":"trusted","short_circuit":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.d.encode(tt.point)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("encode = %s\nwant     %s", got, tt.want)
			}
		})
	}
	if _, err := ModifyPrimary("x").encode("context.assemble"); !errors.Is(err, errNoPrimary) {
		t.Errorf("ModifyPrimary at context.assemble: err = %v, want errNoPrimary", err)
	}
}

func TestModifyFieldsCopies(t *testing.T) {
	m := map[string]any{"outgoing": "a"}
	d := ModifyFields(m)
	m["outgoing"] = "b"
	got, _ := d.encode("message.outbound")
	if string(got) != `{"action":"modify","context":{"outgoing":"a"}}` {
		t.Errorf("decision changed with the caller's map: %s", got)
	}
}

func TestSettingAccessors(t *testing.T) {
	inv := NewInvocation("message.inbound",
		map[string]any{
			"incoming": "hello",
			"user":     map[string]any{"id": "u1"},
		},
		map[string]any{
			"s":      "str",
			"n":      json.Number("2.5"),
			"i":      json.Number("42"),
			"goint":  7,
			"b":      true,
			"list":   []any{"a", "b"},
			"empty":  []any{},
			"golist": []string{"x"},
			"null":   nil,
		},
		Meta{})
	if got := inv.PrimaryField(); got != "incoming" {
		t.Errorf("PrimaryField = %q", got)
	}
	if got := inv.PrimaryText(); got != "hello" {
		t.Errorf("PrimaryText = %q", got)
	}
	if got := inv.ContextString("user"); got != "" {
		t.Errorf("ContextString(object) = %q, want empty", got)
	}
	if v, ok := inv.ContextValue("user"); !ok || v.(map[string]any)["id"] != "u1" {
		t.Errorf("ContextValue(user) = %v, %t", v, ok)
	}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"SettingString", inv.SettingString("s", "d"), "str"},
		{"SettingString absent", inv.SettingString("nope", "d"), "d"},
		{"SettingString null", inv.SettingString("null", "d"), "d"},
		{"SettingFloat", inv.SettingFloat("n", 1), 2.5},
		{"SettingFloat absent", inv.SettingFloat("nope", 1), 1.0},
		{"SettingFloat go int", inv.SettingFloat("goint", 1), 7.0},
		{"SettingInt", inv.SettingInt("i", 1), 42},
		{"SettingBool", inv.SettingBool("b", false), true},
		{"SettingBool absent", inv.SettingBool("nope", true), true},
		{"SettingStrings", strings.Join(inv.SettingStrings("list"), ","), "a,b"},
		{"SettingStrings go", strings.Join(inv.SettingStrings("golist"), ","), "x"},
		{"SettingStrings empty is not nil", inv.SettingStrings("empty") != nil, true},
		{"SettingStrings absent is nil", inv.SettingStrings("nope") == nil, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if err := inv.SettingsErr(); err != nil {
		t.Fatalf("SettingsErr = %v, want nil", err)
	}

	// Wrong types return the default and are recorded.
	if got := inv.SettingString("n", "d"); got != "d" {
		t.Errorf("SettingString(number) = %q", got)
	}
	if got := inv.SettingInt("n", 3); got != 3 {
		t.Errorf("SettingInt(2.5) = %d", got)
	}
	if got := inv.SettingStrings("s"); got != nil {
		t.Errorf("SettingStrings(string) = %v", got)
	}
	inv.Settings()["mixed"] = []any{"a", json.Number("1")}
	if got := inv.SettingStrings("mixed"); got != nil {
		t.Errorf("SettingStrings(mixed) = %v", got)
	}
	if got := inv.SettingBool("s", false); got {
		t.Errorf("SettingBool(string) = %t", got)
	}
	if got := inv.SettingFloat("b", 9); got != 9 {
		t.Errorf("SettingFloat(bool) = %v", got)
	}
	err := inv.SettingsErr()
	var se *SettingError
	if !errors.As(err, &se) || se.Key != "n" {
		t.Fatalf("SettingsErr = %v, want a *SettingError for \"n\" first", err)
	}
	for _, want := range []string{
		`setting "n": want a string, got the number 2.5`,
		`setting "n": want an integer, got the number 2.5`,
		`setting "s": want an array of strings, got the string "str"`,
		`setting "mixed": want an array of strings, got an array`,
		`setting "s": want a boolean, got the string "str"`,
		`setting "b": want a number, got true`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("SettingsErr = %q\nmissing %q", err, want)
		}
	}
}

func TestSettingIntRange(t *testing.T) {
	for _, tt := range []struct {
		v  any
		ok bool
	}{
		{json.Number("-3"), true},
		{json.Number("1e3"), true},
		{json.Number("9007199254740993"), false},
		{1.5, false},
		{"1", false},
	} {
		inv := NewInvocation("", nil, map[string]any{"k": tt.v}, Meta{})
		inv.SettingInt("k", 0)
		if ok := inv.SettingsErr() == nil; ok != tt.ok {
			t.Errorf("SettingInt(%#v): ok = %t, want %t", tt.v, ok, tt.ok)
		}
	}
}

// SettingFloat takes a JSON number and a Go number of every predeclared
// float, int and uint type, and nothing else.
func TestSettingFloatGoNumbers(t *testing.T) {
	type myInt int
	for _, tt := range []struct {
		v    any
		want float64
		ok   bool
	}{
		{json.Number("2.5"), 2.5, true}, {json.Number("x"), 0, false},
		{float64(1.5), 1.5, true}, {float32(0.5), 0.5, true},
		{int(-1), -1, true}, {int8(-8), -8, true}, {int16(16), 16, true}, {int32(32), 32, true}, {int64(-64), -64, true},
		{uint(1), 1, true}, {uint8(8), 8, true}, {uint16(16), 16, true}, {uint32(32), 32, true}, {uint64(64), 64, true},
		{uintptr(1), 0, false}, {myInt(1), 0, false}, {complex(1, 0), 0, false}, {"1", 0, false}, {true, 0, false},
	} {
		inv := NewInvocation("", nil, map[string]any{"k": tt.v}, Meta{})
		got := inv.SettingFloat("k", 0)
		if ok := inv.SettingsErr() == nil; ok != tt.ok || got != tt.want {
			t.Errorf("SettingFloat(%T %v) = %v, ok %t; want %v, %t", tt.v, tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestHandleRegistersOnce(t *testing.T) {
	defer func() { handler = nil }()
	Handle(func(*Invocation) Decision { return Continue() })
	for name, f := range map[string]func(){
		"second Handle":  func() { Handle(func(*Invocation) Decision { return Continue() }) },
		"second HandleE": func() { HandleE(func(*Invocation) (Decision, error) { return Continue(), nil }) },
		"Handle(nil)":    func() { Handle(nil) },
		"HandleE(nil)":   func() { HandleE(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

// FuzzHandle feeds arbitrary invocation documents to the entry point: it must
// never panic, and whatever it returns must be a decision the host accepts
// for the document's point.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(doc))
	f.Add([]byte(`{"abi":1,"point":"tool.after","context":{"result":{"a":[1,2.5,"\u00e9"]}},"settings":{"k":null}}`))
	f.Add([]byte(`{"abi":1,"point":"context.assemble","context":{"items":[]}}`))
	f.Add([]byte(`{"abi":1,"point":"nope","context":{}}`))
	f.Add([]byte(`[]`))
	handler := func(inv *Invocation) (Decision, error) {
		if v, ok := inv.ContextValue(inv.PrimaryField()); ok {
			return ModifyPrimary(v), nil
		}
		return Continue().WithReason(inv.Point), nil
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		out, failure, err := hostcall.Invoke(&scripted{doc: d}, uint32(len(d)), handler)
		if err != nil {
			t.Fatal(err)
		}
		if failure != "" {
			return
		}
		inv, err := abi.DecodeInvocation(d, abi.JSONLimits{})
		if err != nil {
			t.Fatalf("the SDK accepted a document abi refuses: %v", err)
		}
		p, ok := abi.LookupPoint(inv.Point)
		if !ok {
			p = abi.Point{Name: inv.Point}
		}
		if _, err := abi.DecodeDecision(out, p, abi.JSONLimits{}); err != nil {
			t.Fatalf("output %s is not a valid decision at %s: %v", out, inv.Point, err)
		}
	})
}
