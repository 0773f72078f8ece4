package abi

import (
	"encoding/json"
	"testing"
)

// Every field of every point has a type, and nothing else does.
func TestPointTypesCoverFields(t *testing.T) {
	for _, p := range Points() {
		if len(p.Types) != len(p.Fields) {
			t.Errorf("%s: %d types for %d fields", p.Name, len(p.Types), len(p.Fields))
		}
		for _, f := range p.Fields {
			if _, ok := p.Types[f]; !ok {
				t.Errorf("%s: field %q has no type", p.Name, f)
			}
		}
	}
}

func TestCheckField(t *testing.T) {
	in, _ := LookupPoint("message.inbound")
	ca, _ := LookupPoint("context.assemble")
	tb, _ := LookupPoint("tool.before")
	msgs := []any{map[string]any{"role": "user", "content": "hi", "name": "x"}}
	tests := []struct {
		p     Point
		field string
		v     any
		ok    bool
	}{
		{in, "incoming", "text", true},
		{in, "incoming", nil, false},
		{in, "incoming", json.Number("1"), false},
		{in, "incoming", map[string]any{}, false},
		{in, "nonsense", "x", false},
		{ca, "items", msgs, true},
		{ca, "items", []any{}, true},
		{ca, "items", []any{map[string]any{"role": "user"}}, false},
		{ca, "items", []any{"x"}, false},
		{ca, "tokens", json.Number("412"), true},
		{ca, "tokens", json.Number("4.5"), false},
		{tb, "arguments", map[string]any{"a": true}, true},
		{tb, "arguments", "a string a transform made", true},
		{tb, "arguments", []any{}, false},
	}
	for _, tt := range tests {
		if err := tt.p.CheckField(tt.field, tt.v); (err == nil) != tt.ok {
			t.Errorf("%s.%s = %v: %v", tt.p.Name, tt.field, tt.v, err)
		}
	}
}
