//go:build wasip1

package sdk

import (
	"runtime"
	"unsafe"

	"github.com/wasmhooks/wasmhooks/abi"
)

// yieldEvery is how many invocations share one runtime.Gosched.
const yieldEvery = 16

// invocations counts the invocations of this instance.
var invocations uint32

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
	// A reactor runs Go code only while the host is inside an export:
	// goroutines other than the handler's (background GC workers, the
	// sweeper, any the handler started) run only when it yields. Yielding
	// after every invocation cost an empty hook a fifth of its
	// instructions; once every yieldEvery invocations keeps them from
	// starving. The collector does not depend on it: allocations assist
	// the marking and sweep as they go. See
	// RATIONALE.md#why-the-go-sdk-yields-once-every-16-invocations.
	if invocations++; invocations%yieldEvery == 0 {
		runtime.Gosched()
	}
	if failure != "" {
		return 0
	}
	return abi.PackPtrLen(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out)))), uint32(len(out)))
}
