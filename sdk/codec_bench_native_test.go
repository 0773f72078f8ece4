//go:build !wasip1

package sdk

import (
	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk/internal/hostcall"
)

// takeHost serves one document to takes, as the host parks the invocation.
type takeHost struct{ doc []byte }

func (h takeHost) HostCall(name string, payload, out []byte) (abi.Status, uint32) {
	if name != "" || len(payload) != 0 {
		return abi.StatusUnknownCapability, 0
	}
	if len(h.doc) > len(out) {
		return abi.StatusBufferTooSmall, uint32(len(h.doc))
	}
	return abi.StatusOK, uint32(copy(out, h.doc))
}

// handleDoc runs handle with doc parked, as the host calls hook_v1_handle.
func handleDoc(doc []byte, h func(*Invocation) (Decision, error)) ([]byte, string) {
	out, failure, err := hostcall.Invoke(takeHost{doc}, uint32(len(doc)), h)
	if err != nil {
		return nil, err.Error()
	}
	return out, failure
}
