//go:build wasip1

package sdk

import "github.com/wasmhooks/wasmhooks/sdk/internal/hostcall"

// handleDoc runs handle with doc parked. bench/cmd/guestbench's host parks
// the payload of a call to "bench.park" for the next take.
func handleDoc(doc []byte, h func(*Invocation) (Decision, error)) ([]byte, string) {
	hostcall.Call("bench.park", doc, nil)
	return handle(uint32(len(doc)), h)
}
