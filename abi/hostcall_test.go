package abi

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestErrorRoundTrip(t *testing.T) {
	messages := []string{
		"",
		"capability llm.run is not granted to this hook",
		`quotes " and backslashes \ and slashes /`,
		"<html> & friends",
		"new\nlines\tand\x00NUL",
		"unicode é 😀 \u2028",
	}
	for _, s := range Statuses() {
		for i, msg := range messages {
			t.Run(fmt.Sprintf("%s/%d", s, i), func(t *testing.T) {
				e := NewError(s, msg)
				if e.Code != s.Code() || e.Status != s {
					t.Fatalf("NewError = %+v", e)
				}
				body := e.Encode()
				if _, err := ParseJSON(body, JSONLimits{}); err != nil {
					t.Fatalf("Encode gave non-strict JSON %q: %v", body, err)
				}
				back := DecodeError(s, body)
				if *back != *e {
					t.Errorf("DecodeError(Encode()) = %+v, want %+v", back, e)
				}
			})
		}
	}
}

func TestErrorEncodeInvalidUTF8(t *testing.T) {
	tests := []struct {
		name, msg, want string
	}{
		{"lone byte", "bad \xff byte", "bad \uFFFD byte"},
		{"truncated sequence", "cut \xe2\x82", "cut \uFFFD\uFFFD"},
		{"surrogate bytes", "\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"only garbage", "\xfe\xff", "\uFFFD\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := NewError(StatusCapabilityFailed, tt.msg).Encode()
			if !utf8.Valid(body) || !json.Valid(body) {
				t.Fatalf("Encode gave invalid output %q", body)
			}
			v, err := ParseJSON(body, JSONLimits{})
			if err != nil {
				t.Fatalf("Encode gave non-strict JSON %q: %v", body, err)
			}
			want := map[string]any{"code": "capability_failed", "message": tt.want}
			if fmt.Sprint(v) != fmt.Sprint(want) {
				t.Errorf("body %s decodes to %v, want %v", body, v, want)
			}
		})
	}
}

func TestDecodeError(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // the message
	}{
		{"well formed", `{"code":"denied","message":"no"}`, "no"},
		{"status wins over the code", `{"code":"ok","message":"m"}`, "m"},
		{"unknown fields", `{"code":"denied","message":"m","detail":{"x":1}}`, "m"},
		{"no message", `{"code":"denied"}`, ""},
		{"message not a string", `{"code":"denied","message":5}`, ""},
		{"not an object", `"denied"`, ""},
		{"empty body", ``, "malformed error body"},
		{"not JSON", `denied: no`, "malformed error body"},
		{"duplicate keys", `{"message":"a","message":"b"}`, "malformed error body"},
		{"too deep", `{"a":{"b":{"c":{"d":{}}}}}`, "malformed error body"},
		{"invalid UTF-8", "{\"message\":\"\xff\"}", "malformed error body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := DecodeError(StatusDenied, []byte(tt.body))
			if e.Status != StatusDenied || e.Code != "denied" {
				t.Errorf("DecodeError lost the status: %+v", e)
			}
			if e.Message != tt.want {
				t.Errorf("message %q, want %q", e.Message, tt.want)
			}
		})
	}
	t.Run("large body", func(t *testing.T) {
		msg := strings.Repeat("x", 2*DefaultMaxJSONBytes)
		e := DecodeError(StatusResultTooLarge, NewError(StatusResultTooLarge, msg).Encode())
		if e.Message != msg {
			t.Errorf("message of %d bytes, want %d", len(e.Message), len(msg))
		}
	})
}

// TestErrorGolden pins the error object of every status.
func TestErrorGolden(t *testing.T) {
	var b strings.Builder
	for _, s := range append(Statuses(), 13) {
		fmt.Fprintf(&b, "%d %s\n", uint32(s), Errorf(s, "example message for %s", s).Encode())
	}
	checkGolden(t, filepath.Join("testdata", "errors.golden"), []byte(b.String()))
}

func TestErrorReply(t *testing.T) {
	r := ErrorReply(StatusInsufficientCredit, "balance 3, cost 5")
	if r.Status != StatusInsufficientCredit || r.Charged != 0 {
		t.Errorf("ErrorReply = %+v", r)
	}
	if got, want := string(r.Body), `{"code":"insufficient_credit","message":"balance 3, cost 5"}`; got != want {
		t.Errorf("body %s, want %s", got, want)
	}
}

func TestIdempotencyKey(t *testing.T) {
	tests := []struct {
		call Call
		want string
	}{
		{Call{Seq: 1, Caller: Caller{Invocation: "inv_1"}}, "inv_1/1"},
		{Call{Seq: 12, Caller: Caller{Invocation: "inv_1"}}, "inv_1/12"},
		{Call{Seq: 1, Caller: Caller{Invocation: "inv_11"}}, "inv_11/1"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := tt.call.IdempotencyKey()
			if got != tt.want {
				t.Errorf("IdempotencyKey = %q, want %q", got, tt.want)
			}
			if seen[got] {
				t.Errorf("duplicate key %q", got)
			}
			seen[got] = true
		})
	}
}

// TestIdempotencyKeyFormat holds the key to its documented form,
// "invocation/seq", over ids longer than the stack buffer and every sign
// and width of seq.
func TestIdempotencyKeyFormat(t *testing.T) {
	for _, inv := range []string{"", "inv-1", "ünï\xff/x", strings.Repeat("i", 95), strings.Repeat("long", 100)} {
		for _, seq := range []int{0, 1, 9, 10, 99, 100, 12345, -1, math.MaxInt, math.MinInt} {
			call := &Call{Seq: seq, Caller: Caller{Invocation: inv}}
			if got, want := call.IdempotencyKey(), fmt.Sprintf("%s/%d", inv, seq); got != want {
				t.Errorf("IdempotencyKey(%q, %d) = %q, want %q", inv, seq, got, want)
			}
		}
	}
}
