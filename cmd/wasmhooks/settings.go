package main

import (
	"errors"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
)

// checkSettingsSchema is chain.CheckSettingsSchema, the one check of a
// settings schema: `validate` and `manifest embed` refuse exactly the schemas
// `run` and `chain` (both chains) refuse.
func checkSettingsSchema(m *abi.Manifest) error {
	return chain.CheckSettingsSchema(m)
}

// settingsCode is the error code of a settings failure: the hook's schema
// refused (chain.ErrInvalidSettingsSchema), or the settings not matching it
// (chain.ErrInvalidSettings).
func settingsCode(err error) string {
	if errors.Is(err, chain.ErrInvalidSettingsSchema) {
		return "invalid_settings_schema"
	}
	return "invalid_settings"
}
