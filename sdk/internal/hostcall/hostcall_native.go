//go:build !wasip1

package hostcall

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/wasmhooks/wasmhooks/abi"
)

// Host is the host side of hook_v1.host_call for native builds.
type Host interface {
	// HostCall has exactly the semantics of hook_v1.host_call in ABI.md:
	// a call with an empty name and an empty payload is a take; otherwise
	// it runs capability name once with payload, drops anything parked,
	// and writes the body into out if it fits or parks it if it does not.
	// It returns the status and the full length of the body.
	HostCall(name string, payload, out []byte) (abi.Status, uint32)
}

// Entry is the SDK's hook_v1_handle for native builds: it takes the parked
// invocation document of inLen bytes, runs a handler and returns the
// decision document. A non-empty failure is the reason the wasm export would
// return 0; out is then nil. handler, when not nil, is run instead of the
// registered one; package sdk documents which function types it accepts.
type Entry func(inLen uint32, handler any) (out []byte, failure string)

var (
	// entry is set once by package sdk's init.
	entry atomic.Pointer[Entry]
	// host is the host of the running invocation, nil outside Invoke.
	host atomic.Pointer[Host]
	// instance serialises Invoke: the SDK's state is process-wide, as a
	// wasm instance's is, and one instance runs one invocation at a time.
	instance sync.Mutex
)

// ErrNoSDK is returned by Invoke when package sdk is not linked into the
// program, so there is no hook_v1_handle to call.
var ErrNoSDK = errors.New("hostcall: package sdk is not linked")

// SetEntry registers the SDK's entry point. Package sdk calls it from init.
func SetEntry(e Entry) { entry.Store(&e) }

// Invoke runs the SDK's entry point as the host calls hook_v1_handle: h must
// already have parked the invocation document of inLen bytes. Calls to Invoke
// are serialised process-wide; calling it from inside a handler or from a
// Host's HostCall deadlocks. out is a copy the caller owns.
func Invoke(h Host, inLen uint32, handler any) (out []byte, failure string, err error) {
	e := entry.Load()
	if e == nil {
		return nil, "", ErrNoSDK
	}
	instance.Lock()
	defer instance.Unlock()
	host.Store(&h)
	defer host.Store(nil)
	out, failure = (*e)(inLen, handler)
	if out != nil {
		out = append([]byte(nil), out...)
	}
	return out, failure, nil
}

// Call makes one host call to the Host of the running invocation, with the
// semantics of hook_v1.host_call. With no invocation running it answers as
// the real host does: StatusNotInInvocation, with the error body written to
// out when it fits.
func Call(name string, payload, out []byte) (abi.Status, uint32) {
	h := host.Load()
	if h == nil {
		body := abi.NewError(abi.StatusNotInInvocation, "host_call is not available outside an invocation").Encode()
		if len(body) <= len(out) {
			copy(out, body)
		}
		return abi.StatusNotInInvocation, uint32(len(body))
	}
	return (*h).HostCall(name, payload, out)
}
