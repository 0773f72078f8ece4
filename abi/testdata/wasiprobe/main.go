// Command wasiprobe is a minimal Go hook: it links package abi the way every
// hook built with the SDK does, so TestGoWASIImports can check that what Go's
// wasip1 port imports is inside abi.WASIFunctions.
package main

import (
	"fmt"
	"os"

	"github.com/wasmhooks/wasmhooks/abi"
)

//go:wasmexport hook_v1_handle
func handle(inLen int32) int64 {
	d, err := abi.DecodeDecision([]byte(`{"action":"continue"}`), abi.Point{}, abi.JSONLimits{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 0
	}
	_ = d
	return 0
}

func main() {}
