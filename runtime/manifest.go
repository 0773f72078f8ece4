package runtime

import (
	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// EmbedManifest returns wasm with manifest in its hook_v1.manifest custom
// section, replacing any manifest it had. The manifest is checked with
// abi.DecodeManifest first. Toolchains that cannot emit custom sections (Go's)
// use it after building; `wasmhooks manifest embed` wraps it.
func EmbedManifest(wasm, manifest []byte) ([]byte, error) {
	if _, err := abi.DecodeManifest(manifest); err != nil {
		return nil, err
	}
	stripped, err := wasmbin.RemoveCustomSections(wasm, abi.ManifestSection)
	if err != nil {
		return nil, &ValidationError{Reason: "not a valid WebAssembly module", Err: err}
	}
	return wasmbin.AppendCustomSection(stripped, abi.ManifestSection, manifest), nil
}
