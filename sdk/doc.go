// Package sdk is what a wasmhooks hook written in Go imports. A hook is a
// function from an Invocation (the traffic at a hook point plus the
// operator's settings) to a Decision (continue, modify, block or ask). The
// SDK owns everything of hook ABI v1 in between: the hook_v1_handle export,
// the hook_v1.host_call import, buffers, pointer packing and status codes.
//
// A complete hook that redacts one word from the agent's replies:
//
//	package main
//
//	import (
//		"strings"
//
//		"github.com/wasmhooks/wasmhooks/sdk"
//	)
//
//	func init() { sdk.Handle(handle) }
//
//	func handle(inv *sdk.Invocation) sdk.Decision {
//		word := inv.SettingString("word", "secret")
//		text := inv.PrimaryText()
//		if !strings.Contains(text, word) {
//			return sdk.Continue()
//		}
//		return sdk.ModifyPrimary(strings.ReplaceAll(text, word, "***")).
//			WithReason("redacted " + word)
//	}
//
//	func main() {}
//
// Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hook.wasm .
//
// and test it natively with package sdktest, which runs the same SDK code
// against a fake host.
//
// # Registering
//
// -buildmode=c-shared makes a reactor: the host calls _initialize once per
// instance, which runs package initialisation but never main. So the handler
// is registered from init, with Handle or (for a handler that can fail)
// HandleE, and main stays empty. One instance runs one invocation at a time;
// package-level state survives from one invocation to the next in the same
// instance (useful for caches, such as compiled regular expressions) but the
// host may discard an instance at any time.
//
// # Capabilities
//
// A hook has one way to cause an effect: a capability call through the host,
// such as LLMRun, KVGet, KVSet, Log or the general Call. Each one runs
// exactly once per call, passes the host's grant, schema and credit gates,
// and may fail with an *Error that matches a sentinel (ErrDenied,
// ErrInsufficientCredit, ...). Capabilities are available only while a
// handler runs; from init they return ErrNotInInvocation.
//
// # Failing
//
// A handler that panics, a HandleE handler that returns an error, and an
// invocation document the SDK cannot decode all make the hook fail: the
// export returns 0, the reason goes to stderr (kept in the invocation's log)
// and the host applies the hook's failure policy. A failed hook is never read
// as "continue".
//
// # Builds
//
// The export and the import exist only for GOOS=wasip1. In every other build
// the same code runs against the host that package sdktest installs, so a
// hook's tests run with plain `go test`.
package sdk
