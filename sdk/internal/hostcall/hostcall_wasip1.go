//go:build wasip1

package hostcall

import (
	"unsafe"

	"github.com/wasmhooks/wasmhooks/abi"
)

// hostCall is hook_v1.host_call. See ABI.md. Passing unsafe.Pointer (not
// uint32 addresses) keeps the three buffers alive for the duration of the
// call without runtime.KeepAlive.
//
//go:wasmimport hook_v1 host_call
func hostCall(namePtr unsafe.Pointer, nameLen uint32, inPtr unsafe.Pointer, inLen uint32, outPtr unsafe.Pointer, outCap uint32) uint64

// Call makes one hook_v1.host_call with capability name, request payload and
// reply buffer out, and returns the status and the body length. The body was
// written to out if and only if the length is at most len(out); otherwise the
// host parked it for a Take. An empty name with an empty payload is a take.
func Call(name string, payload, out []byte) (abi.Status, uint32) {
	r := hostCall(
		unsafe.Pointer(unsafe.StringData(name)), uint32(len(name)),
		unsafe.Pointer(unsafe.SliceData(payload)), uint32(len(payload)),
		unsafe.Pointer(unsafe.SliceData(out)), uint32(len(out)),
	)
	return abi.UnpackResult(r)
}
