package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/wasmhooks/wasmhooks/abi"
)

// validateSettings checks settings against the manifest's settings_schema
// (absent: any object). Settings come from the operator, not the hook, but a
// hook must never see settings its author did not plan for.
func validateSettings(m *abi.Manifest, settings map[string]any) error {
	if m == nil || m.SettingsSchema == nil {
		return nil
	}
	src, err := abi.Marshal(m.SettingsSchema)
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("settings schema may not reference %s", s)
	}
	if err := c.AddResource("settings.json", strings.NewReader(string(src))); err != nil {
		return fmt.Errorf("the manifest's settings_schema: %w", err)
	}
	schema, err := c.Compile("settings.json")
	if err != nil {
		return fmt.Errorf("the manifest's settings_schema does not compile: %w", err)
	}
	// Settings from abi.ParseJSON hold json.Number, which the validator
	// compares exactly.
	if err := schema.Validate(any(settings)); err != nil {
		return fmt.Errorf("settings do not match the hook's settings_schema: %w", err)
	}
	return nil
}
