// Command empty is the smallest Go-SDK hook: it lets everything through.
// It measures what the SDK and the Go runtime cost per invocation.
package main

import "github.com/wasmhooks/wasmhooks/sdk"

func init() { sdk.Handle(func(*sdk.Invocation) sdk.Decision { return sdk.Continue() }) }

func main() {}
