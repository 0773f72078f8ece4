package main

import (
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
