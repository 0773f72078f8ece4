// Package wasmbin is a small, hardened reader for WebAssembly binary modules.
//
// The runtime uses it to check an uploaded hook before wazero ever compiles it:
// Parse walks the module in bounded time and memory, refuses anything malformed,
// oversized or using an unsupported feature with a typed error, and returns a
// Module describing the types, imports, exports, memories, custom sections and
// function bodies that the loader needs to enforce the hook ABI.
//
// Parse is a structural reader, not a full validator: it decodes every section
// except the instructions inside function bodies (which wazero validates when
// it compiles the module), checks every index it decodes against its index
// space, and keeps the position and raw bytes of every section and function
// body so that a later rewriting pass can work from them. InstrReader decodes
// the instructions of a body, for that pass (runtime/internal/meter).
//
// Three error types cover every refusal:
//
//   - *FormatError: the bytes are not a well-formed module (names the section
//     and the byte offset);
//   - *LimitError: a Limits value was exceeded;
//   - *FeatureError: the module uses a WebAssembly feature the runtime does not
//     support (threads, memory64, multi-memory, SIMD, exception handling, ...).
//
// Parse never panics, whatever the input; its time is linear in the input
// size and its memory follows what the module really contains, capped by the
// Limits (a count is never trusted before the bytes left can hold it). The
// package imports only the standard library.
package wasmbin
