// Package wasmhooks holds the hook SDKs' sources as files, for `wasmhooks
// new` (cmd/wasmhooks/new.go), which writes them next to a new hook: the
// module path github.com/wasmhooks/wasmhooks is not fetchable from the
// module proxy, and the C, Rust and AssemblyScript SDKs are not packages of
// any registry. It is a package at the module's root because go:embed
// reaches only files under the embedding package's directory.
package wasmhooks

import "embed"

// SDKFiles is the SDKs' sources, at their paths in this repository: the Go
// SDK and what it imports of this module (abi; their _test.go files too,
// which `wasmhooks new` leaves out), the C headers, the Rust crate's source,
// the AssemblyScript SDK, and go.mod (for its go directive).
//
//go:embed go.mod abi/*.go sdk/*.go sdk/internal/hostcall/*.go sdk/sdktest/*.go
//go:embed sdk/c/*.h sdk/rust/src/*.rs sdk/rust/Cargo.toml
//go:embed sdk/assemblyscript/assembly/*.ts sdk/assemblyscript/package.json sdk/assemblyscript/package-lock.json sdk/assemblyscript/test/*.mjs
var SDKFiles embed.FS
