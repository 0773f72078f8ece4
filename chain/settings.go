package chain

import (
	"fmt"
	"io"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/wasmhooks/wasmhooks/abi"
)

// settingsSchema is a manifest's compiled settings_schema; nil accepts any
// object. See RATIONALE.md#why-are-settings-validated-outside-the-runtime.
type settingsSchema struct {
	s *jsonschema.Schema
}

// compileSettingsSchema compiles m's settings_schema, refusing references to
// any URL (a schema must not reach the disk or the network).
func compileSettingsSchema(m *abi.Manifest) (*settingsSchema, error) {
	if m == nil || m.SettingsSchema == nil {
		return &settingsSchema{}, nil
	}
	src, err := abi.Marshal(m.SettingsSchema)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("settings schema may not reference %s", s)
	}
	if err := c.AddResource("settings.json", strings.NewReader(string(src))); err != nil {
		return nil, fmt.Errorf("the manifest's settings_schema: %w", err)
	}
	schema, err := c.Compile("settings.json")
	if err != nil {
		return nil, fmt.Errorf("the manifest's settings_schema does not compile: %w", err)
	}
	return &settingsSchema{s: schema}, nil
}

func (s *settingsSchema) validate(settings map[string]any) error {
	if s == nil || s.s == nil {
		return nil
	}
	// Settings in the form abi.ParseJSON produces hold json.Number, which
	// the validator compares exactly.
	if err := s.s.Validate(any(settings)); err != nil {
		return fmt.Errorf("settings do not match the hook's settings_schema: %w", err)
	}
	return nil
}

// ValidateSettings checks settings against m's settings_schema (absent: any
// object). Settings come from the operator, not the hook, but a hook must
// never see settings its author did not plan for. A Chain validates each
// binding's settings once, when its configuration is built; this is for
// callers that invoke a hook without a chain.
func ValidateSettings(m *abi.Manifest, settings map[string]any) error {
	s, err := compileSettingsSchema(m)
	if err != nil {
		return err
	}
	return s.validate(settings)
}
