//go:build wasip1

package sdk

import (
	"runtime"
	"unsafe"

	"github.com/wasmhooks/wasmhooks/abi"
)

// hookV1Handle is the module's hook_v1_handle export. See ABI.md: the host has
// parked the invocation document of inLen bytes; the result packs the pointer
// and length of the decision document, which stays alive in outBuf until the
// next invocation. 0 means the hook failed; the reason goes to stderr, which
// the host keeps in the invocation's log.
//
//go:wasmexport hook_v1_handle
func hookV1Handle(inLen uint32) uint64 {
	out, failure := handle(inLen, nil)
	if failure != "" {
		// println writes to stderr through the runtime, without package os.
		println("wasmhooks/sdk: hook failed: " + failure)
	}
	// A reactor runs Go code only while the host is inside an export, so
	// let the scheduler run pending goroutines and background GC work
	// before returning, or they starve between invocations.
	runtime.Gosched()
	if failure != "" {
		return 0
	}
	return abi.PackPtrLen(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out)))), uint32(len(out)))
}
