//go:build !wasip1

package sdk

import "github.com/wasmhooks/wasmhooks/sdk/internal/hostcall"

// In native builds there is no wasm export; package sdktest reaches the same
// entry point through hostcall.Invoke.
func init() { hostcall.SetEntry(handle) }
