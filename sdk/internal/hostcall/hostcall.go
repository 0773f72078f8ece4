// Package hostcall is the seam between package sdk and the host: the one
// import of hook ABI v1, hook_v1.host_call, and (in native builds) the way a
// fake host drives the SDK's hook_v1_handle entry point.
//
// On GOOS=wasip1 Call is the //go:wasmimport binding itself. Everywhere else
// Call forwards to the Host installed by Invoke, with the same park and take
// semantics, so the SDK's buffering, take and error-decoding code runs
// unchanged under `go test` (package sdktest is that host).
package hostcall

import "github.com/wasmhooks/wasmhooks/abi"

// Take performs a take: it copies the parked body into out and returns the
// status and length it was parked with, or StatusBufferTooSmall with the
// length if out is too small (the body stays parked), or StatusNoPending.
func Take(out []byte) (abi.Status, uint32) {
	return Call("", nil, out)
}
