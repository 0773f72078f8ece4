package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threat: a hook's settings_schema that costs exponential work (issue 10,
// section 3): 40 $defs, each an allOf of two $refs to the previous, made
// New and Reload (under its lock) validate {} 2^40 times. Defence:
// CheckSettingsSchema refuses references anywhere, schemas over
// MaxSettingsSchemaValues and schemas that do not compile, with a
// *SettingsSchemaError naming the hook and the place in the schema; New
// and Reload refuse the configuration, Reload keeps the old one.
func TestSettingsSchemaRefused(t *testing.T) {
	var exp strings.Builder
	exp.WriteString(`{"type":"object","$defs":{"d0":{"type":"object"}`)
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&exp, `,"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i-1, i-1)
	}
	exp.WriteString(`},"$ref":"#/$defs/d40"}`)
	tests := []struct {
		name, schema, path, reason string
	}{
		{"exponential", exp.String(), "/$defs/d1/allOf/0/$ref", "$ref is not allowed"},
		{"dynamic ref", `{"properties":{"a~b/c":{"$dynamicRef":"#x"}}}`, "/properties/a~0b~1c/$dynamicRef", "$dynamicRef is not allowed"},
		{"recursive ref", `{"$recursiveRef":"#"}`, "/$recursiveRef", "$recursiveRef is not allowed"},
		{"does not compile", `{"type":"objekt"}`, "", "does not compile"},
		{"too many values", `{"enum":[` + strings.Repeat("0,", MaxSettingsSchemaValues) + `0]}`, "", "more than 4096 values"},
	}
	e := newEnv(t, policyConfig(t, Binding{Name: "keep", Point: outbound, Phase: Guard}))
	before, ok := e.c.Info()
	if !ok {
		t.Fatal("no configuration")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			man := fmt.Sprintf(`{"name":"evil","settings_schema":%s}`, tt.schema)
			m, err := abi.DecodeManifest([]byte(man))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = CheckSettingsSchema(m)
			var se *SettingsSchemaError
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalidSettingsSchema) {
				t.Fatalf("CheckSettingsSchema = %v, want a *SettingsSchemaError", err)
			}
			if se.Hook != "evil" || se.Path != tt.path || !strings.Contains(se.Reason, tt.reason) {
				t.Errorf("error %+v, want hook evil, path %q, reason %q", se, tt.path, tt.reason)
			}
			if verr := ValidateSettings(m, map[string]any{}); !errors.As(verr, &se) {
				t.Errorf("ValidateSettings = %v, want the same refusal", verr)
			}
			wasm, err := runtime.EmbedManifest(policyWasm(t), []byte(man))
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Modules: map[string][]byte{"evil": wasm}, Bindings: []Binding{{Name: "x", Module: "evil", Point: outbound, Phase: Guard}}}
			rerr := e.c.Reload(context.Background(), cfg)
			if !errors.As(rerr, &se) {
				t.Errorf("Reload = %v, want the *SettingsSchemaError", rerr)
			}
			var ce *ConfigError
			if !errors.As(rerr, &ce) || !strings.Contains(rerr.Error(), `module "evil": hook "evil": settings_schema`) {
				t.Errorf("Reload = %v, want a *ConfigError naming the module and the schema", rerr)
			}
			if _, nerr := New(context.Background(), cfg, Options{Runtime: testRuntime(t), Logger: quiet()}); !errors.As(nerr, &se) {
				t.Errorf("New = %v, want the *SettingsSchemaError", nerr)
			}
			if after, ok := e.c.Info(); !ok || after.Digest != before.Digest {
				t.Error("a refused Reload changed the configuration")
			}
			if el := time.Since(start); el > 10*time.Second { // coarse: refused in milliseconds
				t.Errorf("refusing took %v", el)
			}
		})
	}
}

// Schemas without references are accepted and enforced as before.
func TestSettingsSchemaAccepted(t *testing.T) {
	m, err := abi.DecodeManifest([]byte(`{"name":"ok","settings_schema":{"type":"object","$defs":{"s":{"type":"string"}},
		"properties":{"when":{"type":"string","maxLength":8}},"additionalProperties":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSettingsSchema(m); err != nil {
		t.Fatal(err)
	}
	if err := ValidateSettings(m, map[string]any{"when": "x"}); err != nil {
		t.Error(err)
	}
	if err := ValidateSettings(m, map[string]any{"other": "x"}); err == nil || errors.Is(err, ErrInvalidSettingsSchema) {
		t.Errorf("ValidateSettings of a bad setting = %v, want a settings mismatch", err)
	}
	if err := CheckSettingsSchema(nil); err != nil {
		t.Error(err)
	}
}
