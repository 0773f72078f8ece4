package chain

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

// FuzzSettingsSchema: any JSON object as a manifest's settings_schema (the
// hook author's: it arrives in an uploaded module's custom section) and any
// JSON as settings (what is not JSON, a regular expression as a "pattern"
// and a "patternProperties" name, and a string it is applied to), seeded with the example hooks' manifests. Neither
// CheckSettingsSchema nor ValidateSettings panics, and neither needs its
// recover: the checks before the third-party compiler and validator keep
// them from panicking (a recovered panic fails the test); a refused schema
// is a *SettingsSchemaError wrapping ErrInvalidSettingsSchema, from both,
// every time (its message is not always the same: a schema with two faults
// the compiler finds is refused for either, as its maps iterate); refused
// settings wrap ErrInvalidSettings.
func FuzzSettingsSchema(f *testing.F) {
	for _, b := range fuzzSeedFiles(f, "hooks-examples/*/manifest.json") {
		var m struct {
			Schema json.RawMessage `json:"settings_schema"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			f.Fatal(err)
		}
		if m.Schema != nil {
			f.Add([]byte(m.Schema), []byte(`{}`))
		}
	}
	for _, s := range [][2]string{
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":1e-400}}}`, `{"n":1e-400}`},
		{`{"type":"object","properties":{"n":{"type":"number","multipleOf":1e-300}}}`, `{"n":1e300}`},
		{`{"type":"object","patternProperties":{"^a{1000}$":{}}}`, `{"aaa":1}`},
		{`{"$defs":{"a":{}},"allOf":[{"$ref":"#/$defs/a"}]}`, `{}`},
		{`{"type":"objekt"}`, `{}`},
		{`{"properties":{"n":{"maximum":1}}}`, `{"n":1e-9999999}`},
		{`{"properties":{"s":{"type":"string","format":"regex"}}}`, `{"s":"(("}`},
		{`{"properties":{"s":{"type":"string","pattern":"\\pL{1000}"}}}`, `{"s":"x"}`},
		{`{"properties":{"e":{"enum":[1,"a",null,{"x":[]}]},"c":{"const":1.0}}}`, `{"e":{"x":[]},"c":1}`},
		{`{"if":{"required":["a"]},"then":{"minProperties":2},"else":{"maxProperties":0}}`, `{"a":1}`},
		{`{"dependentSchemas":{"a":{"not":{}}},"unevaluatedProperties":false}`, `{"a":1,"b":2}`},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","id":"x"}`, `{}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	recovered := func(err error) bool {
		return err != nil && (strings.Contains(err.Error(), "the schema compiler failed") || strings.Contains(err.Error(), "the schema validator failed"))
	}
	f.Fuzz(func(t *testing.T, schema, settings []byte) {
		sv, err := abi.ParseJSON(schema, abi.JSONLimits{MaxBytes: 64 << 10})
		obj, ok := sv.(map[string]any)
		if err != nil || !ok {
			// Not an object (most mutations of JSON are not JSON): a
			// regular expression then, and settings a string it is
			// applied to, as a value and as a member's name.
			obj = map[string]any{"properties": map[string]any{"s": map[string]any{"pattern": string(schema)}},
				"patternProperties": map[string]any{string(schema): map[string]any{"const": 1}}}
			if _, err := abi.ParseJSON(settings, abi.JSONLimits{}); err != nil {
				if settings, err = json.Marshal(map[string]any{"s": string(settings), string(settings): 1}); err != nil {
					return
				}
			}
		}
		m := &abi.Manifest{Name: "fuzz", SettingsSchema: obj}
		checkErr := CheckSettingsSchema(m)
		var se *SettingsSchemaError
		if checkErr != nil && (!errors.As(checkErr, &se) || !errors.Is(checkErr, ErrInvalidSettingsSchema) || recovered(checkErr)) {
			t.Fatalf("%s: %T %v", schema, checkErr, checkErr)
		}
		if again := CheckSettingsSchema(m); (again == nil) != (checkErr == nil) {
			t.Fatalf("%s: %v, then %v", schema, checkErr, again)
		}
		stv, err := abi.ParseJSON(settings, abi.JSONLimits{MaxBytes: 64 << 10})
		st, ok := stv.(map[string]any)
		if err != nil || !ok {
			return // settings are an object
		}
		err = ValidateSettings(m, st)
		switch {
		case checkErr != nil:
			if !errors.As(err, &se) {
				t.Fatalf("%s: the schema refused by CheckSettingsSchema (%v), ValidateSettings says %v", schema, checkErr, err)
			}
		case err != nil && (!errors.Is(err, ErrInvalidSettings) || recovered(err)):
			t.Fatalf("%s, %s: %v", schema, settings, err)
		}
	})
}
