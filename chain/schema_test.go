package chain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestConfigSchemaCoversTheParser: every field the parser accepts
// (fileConfig and what it holds, runtime.Limits' JSON form) is in
// config.schema.json at the same place, and the schema has no property the
// parser would refuse.
func TestConfigSchemaCoversTheParser(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(ConfigSchema, &schema); err != nil {
		t.Fatal(err)
	}
	defs := schema["$defs"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			return defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		return s
	}
	var check func(path string, typ reflect.Type, s map[string]any)
	check = func(path string, typ reflect.Type, s map[string]any) {
		s = resolve(s)
		if s["additionalProperties"] != false {
			t.Errorf("%s: the schema allows properties the parser refuses", path)
		}
		props, _ := s["properties"].(map[string]any)
		var names []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			names = append(names, name)
			ps, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("%s.%s: the parser accepts it, the schema does not have it", path, name)
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
				if items, ok := resolve(ps)["items"].(map[string]any); ok {
					ps = items
				}
			}
			switch {
			case name == "limits":
				check(path+".limits", reflect.TypeFor[runtime.Limits](), ps)
			case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[duration]():
				check(path+"."+name, ft, ps)
			}
		}
		for name := range props {
			if !slices.Contains(names, name) {
				t.Errorf("%s.%s: in the schema, not accepted by the parser", path, name)
			}
		}
	}
	check("config", reflect.TypeFor[fileConfig](), schema)
}

// TestConfigSchemaValidates: the demo's configurations match the schema,
// and a configuration the decoder would accept but the schema does not (a
// misspelt phase, a duration that is not one) is refused by ParseConfig.
func TestConfigSchemaValidates(t *testing.T) {
	files, _ := filepath.Glob("../demo/*chain*.json")
	if len(files) == 0 {
		t.Fatal("no demo configurations")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateConfigJSON(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, bad := range []string{
		`{"bindings":[{"name":"a","module":"m","point":"message.inbound","phase":"gaurd"}]}`,
		`{"bindings":[{"name":"a","module":"m","point":"message.inbound","phase":"guard","approval":{"on_expiry":"maybe"}}]}`,
		`{"bindings":[{"name":"a","module":"m","point":"message.inbound","phase":"guard","limits":{"fuel":-1}}]}`,
		`{"bindings":[{"module":"m","point":"message.inbound","phase":"guard"}]}`,
	} {
		_, err := ParseConfig([]byte(bad), func(string) ([]byte, error) { return nil, nil })
		if err == nil || !strings.Contains(err.Error(), "configuration schema") {
			t.Errorf("%s: %v, want a schema error", bad, err)
		}
	}
}

// TestSettingsErrorNamesNoMadeUpURL: a settings-schema error says where the
// settings break it, not the made-up address the schema was compiled under
// (issue 15: it cited file:///<cwd>/settings.json, then
// https://settings.wasmhooks.invalid/schema.json).
func TestSettingsErrorNamesNoMadeUpURL(t *testing.T) {
	m := &abi.Manifest{Name: "x", Version: "1.0.0", SettingsSchema: map[string]any{
		"type": "object", "properties": map[string]any{"word": map[string]any{"type": "string"}}}}
	err := ValidateSettings(m, map[string]any{"word": json.Number("3")})
	if err == nil || !strings.Contains(err.Error(), "at /word: expected string") || strings.Contains(err.Error(), "wasmhooks.invalid") || strings.Contains(err.Error(), "file://") {
		t.Errorf("err = %v", err)
	}
}
