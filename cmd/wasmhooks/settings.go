package main

import (
	"errors"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
)

// validateSettings checks settings against the manifest's settings_schema
// (absent: any object). The chain owns the logic (it validates every
// binding's settings once, when its configuration is built); `run` invokes a
// hook without a chain and uses it directly.
func validateSettings(m *abi.Manifest, settings map[string]any) error {
	return chain.ValidateSettings(m, settings)
}

// checkSettingsSchema is chain.CheckSettingsSchema, the one check of a
// settings schema: `validate` and `manifest embed` refuse exactly the schemas
// `run` and `chain` refuse.
func checkSettingsSchema(m *abi.Manifest) error {
	return chain.CheckSettingsSchema(m)
}

// settingsCode is the error code of a settings failure: the hook's schema
// refused, or the settings not matching it.
func settingsCode(err error) string {
	if errors.Is(err, chain.ErrInvalidSettingsSchema) {
		return "invalid_settings_schema"
	}
	return "invalid_settings"
}
