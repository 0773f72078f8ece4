package abi

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// abiMDManifest is the example manifest of ABI.md.
const abiMDManifest = `{"name": "redact-secrets", "version": "1.2.0", "description": "...",
 "capabilities": ["llm.run"],
 "points": ["message.outbound"],
 "settings_schema": {"type": "object", "properties": {"patterns": {"type": "array"}}}}`

func TestDecodeManifest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Manifest
	}{
		{"ABI.md example", abiMDManifest, Manifest{
			Name: "redact-secrets", Version: "1.2.0", Description: "...",
			Capabilities: []string{"llm.run"}, Points: []string{"message.outbound"},
			SettingsSchema: map[string]any{"type": "object", "properties": map[string]any{"patterns": map[string]any{"type": "array"}}},
		}},
		{"empty object", `{}`, Manifest{}},
		{"unknown fields ignored", `{"name":"n","license":"MIT","homepage":{"url":"x"},"min_abi":[1,1]}`, Manifest{Name: "n"}},
		{"empty capabilities", `{"capabilities":[]}`, Manifest{Capabilities: []string{}}},
		{"several points", `{"points":["tool.before","tool.after"]}`, Manifest{Points: []string{"tool.before", "tool.after"}}},
		{"empty strings", `{"name":"","version":"","description":""}`, Manifest{}},
		{"empty schema", `{"settings_schema":{}}`, Manifest{SettingsSchema: map[string]any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeManifest([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*m, tt.want) {
				t.Errorf("DecodeManifest = %+v\nwant %+v", *m, tt.want)
			}
		})
	}
}

func TestDecodeManifestRejects(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		field  string // the ManifestError's Field
		reason string
	}{
		{"name a number", `{"name":5}`, "name", "must be a string"},
		{"version null", `{"version":null}`, "version", "must be a string"},
		{"description an object", `{"description":{}}`, "description", "must be a string"},
		{"capabilities a string", `{"capabilities":"llm.run"}`, "capabilities", "must be an array of strings"},
		{"capabilities null", `{"capabilities":null}`, "capabilities", "must be an array of strings"},
		{"capability a number", `{"capabilities":["llm.run",1]}`, "capabilities", "non-empty strings"},
		{"capability empty", `{"capabilities":[""]}`, "capabilities", "non-empty strings"},
		{"points a string", `{"points":"message.outbound"}`, "points", "must be an array of strings"},
		{"point a number", `{"points":[1]}`, "points", "non-empty strings"},
		{"unknown point", `{"points":["message.outbound","message.sideways"]}`, "points", `unknown point "message.sideways"`},
		{"point in the wrong case", `{"points":["Message.Outbound"]}`, "points", "unknown point"},
		{"empty points", `{"points":[]}`, "points", "at least one point"},
		{"settings_schema an array", `{"settings_schema":[]}`, "settings_schema", "must be an object"},
		{"settings_schema true", `{"settings_schema":true}`, "settings_schema", "must be an object"},
		{"several bad fields", `{"points":5,"capabilities":5,"description":5,"version":5,"name":5}`, "name", "must be a string"},
		{"not an object", `["llm.run"]`, "", "not a JSON object"},
		{"trailing comma", `{"name":"n",}`, "", "not strict JSON"},
		{"duplicate key", `{"capabilities":[],"capabilities":["kv.write"]}`, "", "duplicate key"},
		{"invalid UTF-8", "{\"name\":\"\xff\"}", "", "invalid UTF-8"},
		{"big integer", `{"x":9007199254740993}`, "", "beyond"},
		{"empty", ``, "", "not strict JSON"},
		{"too large", `{"description":"` + strings.Repeat("x", MaxManifestBytes) + `"}`, "", "over the limit of 65536"},
		{"too deep", `{"settings_schema":` + strings.Repeat(`{"a":`, 32) + `1` + strings.Repeat(`}`, 33), "", "nesting deeper than 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeManifest([]byte(tt.in))
			if err == nil {
				t.Fatalf("DecodeManifest accepted %.80q: %+v", tt.in, m)
			}
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v (%T), want *ManifestError", err, err)
			}
			if me.Field != tt.field {
				t.Errorf("Field = %q, want %q (%v)", me.Field, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.reason) || !strings.HasPrefix(err.Error(), "invalid hook_v1.manifest: ") {
				t.Errorf("err = %q, want it to contain %q", err, tt.reason)
			}
		})
	}
	t.Run("at the size and depth limits", func(t *testing.T) {
		doc := `{"description":"` + strings.Repeat("x", MaxManifestBytes-18) + `"}`
		if len(doc) != MaxManifestBytes {
			t.Fatalf("test document is %d bytes", len(doc))
		}
		if _, err := DecodeManifest([]byte(doc)); err != nil {
			t.Errorf("%d bytes: %v", len(doc), err)
		}
		deep := `{"settings_schema":` + strings.Repeat(`{"a":`, 31) + `1` + strings.Repeat(`}`, 32)
		if _, err := DecodeManifest([]byte(deep)); err != nil {
			t.Errorf("32 deep: %v", err)
		}
	})
}

func TestManifestErrorMessage(t *testing.T) {
	tests := []struct {
		err  *ManifestError
		want string
	}{
		{&ManifestError{Reason: "not a JSON object"}, "invalid hook_v1.manifest: not a JSON object"},
		{&ManifestError{Field: "name", Reason: "must be a string"}, `invalid hook_v1.manifest: field "name": must be a string`},
		{&ManifestError{Reason: "not strict JSON", Err: &JSONError{Offset: 3, Reason: "x"}}, "invalid hook_v1.manifest: not strict JSON: invalid JSON at byte 3: x"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestManifestAllowsAndRequests(t *testing.T) {
	var none *Manifest
	anywhere := &Manifest{}
	outbound := &Manifest{Points: []string{"message.outbound"}, Capabilities: []string{"llm.run"}}
	tests := []struct {
		name     string
		m        *Manifest
		point    string
		allows   bool
		cap      string
		requests bool
	}{
		{"no manifest", none, "tool.before", true, "llm.run", false},
		{"no points", anywhere, "tool.before", true, "llm.run", false},
		{"listed point", outbound, "message.outbound", true, "llm.run", true},
		{"other point", outbound, "message.inbound", false, "kv.read", false},
		{"prefix of a capability", outbound, "message.outbound", true, "llm", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.AllowsPoint(tt.point); got != tt.allows {
				t.Errorf("AllowsPoint(%q) = %t, want %t", tt.point, got, tt.allows)
			}
			if got := tt.m.Requests(tt.cap); got != tt.requests {
				t.Errorf("Requests(%q) = %t, want %t", tt.cap, got, tt.requests)
			}
		})
	}
}
