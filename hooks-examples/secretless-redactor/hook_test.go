//go:build !wasip1

package main

import (
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk/sdktest"
)

func request(session string, payload map[string]any, settings map[string]any) sdktest.Invocation {
	return sdktest.Invocation{Point: "tool.before", Settings: settings, Context: map[string]any{
		"tool": "tools/call", "arguments": payload, "mcp": map[string]any{"event": "tools/call", "phase": "request", "sessionId": session},
	}}
}

func TestRedactor(t *testing.T) {
	secrets := []string{
		"sk_live_4eC39HqLyjWDarjtT1zdp7dc",
		"pk_live_TYooMQauvdEDq54NiTphI7jx",
		"ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
		"gho_16C7e42F292c6912E7710c838347Ae178B4a",
		"AKIAIOSFODNN7EXAMPLE",
		"xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy",
		"xoxr-1-2-3-4-5-6-7-8",
	}
	// Each alone, and glued to word characters on either side (a word
	// boundary in the patterns let "x" + secret and an AWS key + "X"
	// through unredacted).
	for _, glue := range [][2]string{{"Bearer ", ""}, {"x", ""}, {"a_", "X"}, {"Bearer ", "X"}} {
		for _, s := range secrets {
			t.Run(glue[0]+s[:6]+glue[1], func(t *testing.T) { redacts(t, glue[0]+s+glue[1], s) })
		}
	}
}

// redacts checks that the redactor replaces secret in v, in a request.
func redacts(t *testing.T, v, s string) {
	h := sdktest.NewHost()
	if err := h.UseManifest("manifest.json"); err != nil {
		t.Fatal(err)
	}
	payload := map[string]any{"name": "fetch", "arguments": map[string]any{
		"headers": []any{map[string]any{"Authorization": v}}, "n": 1,
	}}
	dec, err := h.Run(request("s1", payload, nil))
	if err != nil {
		t.Fatal(err)
	}
	if dec.Action != abi.ActionModify {
		t.Fatalf("decision %s, want modify", dec.Action)
	}
	b, _ := abi.Marshal(dec.Context["arguments"])
	if strings.Contains(string(b), s) || !strings.Contains(string(b), "[secret:1]") {
		t.Fatalf("redacted payload %s", b)
	}
}

func TestRedactorHandlesPerSession(t *testing.T) {
	h := sdktest.NewHost()
	if err := h.UseManifest("manifest.json"); err != nil {
		t.Fatal(err)
	}
	a, b := "ghp_AAAAAAAAAAAAAAAAAAAAAAAA", "AKIAQQQQQQQQQQQQQQQQ"
	run := func(session string, v string) string {
		dec, err := h.Run(request(session, map[string]any{"name": "x", "arguments": map[string]any{"v": v}}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if dec.Action != abi.ActionModify {
			return v
		}
		return dec.Context["arguments"].(map[string]any)["arguments"].(map[string]any)["v"].(string)
	}
	if got := run("s1", a+" "+b); got != "[secret:1] [secret:2]" {
		t.Errorf("first: %q", got)
	}
	if got := run("s1", b); got != "[secret:2]" {
		t.Errorf("same session, same secret: %q, want its handle again", got)
	}
	if got := run("s2", b); got != "[secret:1]" {
		t.Errorf("another session: %q, want a handle of its own", got)
	}
	if got := run("s1", "nothing here"); got != "nothing here" {
		t.Errorf("no secret: %q", got)
	}
	if v, _ := h.KV("handles/s1"); strings.Contains(stringify(v), a) {
		t.Errorf("state keeps the secret verbatim: %v", v)
	}
}

func TestRedactorLeavesResponses(t *testing.T) {
	h := sdktest.NewHost()
	if err := h.UseManifest("manifest.json"); err != nil {
		t.Fatal(err)
	}
	dec, err := h.Run(sdktest.Invocation{Point: "tool.after", Context: map[string]any{
		"tool": "tools/call", "arguments": map[string]any{}, "result": "AKIAIOSFODNN7EXAMPLE", "mcp": map[string]any{"phase": "response"},
	}})
	if err != nil || dec.Action != abi.ActionContinue {
		t.Fatalf("%v %v", dec, err)
	}
}

func stringify(v any) string {
	b, _ := abi.Marshal(v)
	return string(b)
}

// A key whose secret, replaced, is another key of the object would make the
// two one, dropping a member of the request without a word: the redactor
// fails instead (and the binding's fail policy decides).
func TestRedactorKeysCollide(t *testing.T) {
	h := sdktest.NewHost()
	if err := h.UseManifest("manifest.json"); err != nil {
		t.Fatal(err)
	}
	payload := map[string]any{"name": "x", "arguments": map[string]any{"AKIAIOSFODNN7EXAMPLE": "a", "[secret:1]": "b"}}
	dec, err := h.Run(request("s1", payload, nil))
	if err == nil && dec.Action == abi.ActionModify {
		t.Fatalf("redacted to %s: a member dropped", stringify(dec.Context["arguments"]))
	}
	payload = map[string]any{"name": "x", "arguments": map[string]any{"AKIAIOSFODNN7EXAMPLE": "a", "[secret:2]": "b"}}
	if dec, err := h.Run(request("s2", payload, nil)); err != nil || dec.Action != abi.ActionModify {
		t.Fatalf("no collision: %v %v", dec, err)
	}
}
