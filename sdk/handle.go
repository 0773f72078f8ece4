package sdk

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk/internal/hostcall"
)

// handler is the hook's handler, set once by Handle or HandleE from an init
// function. It is written only during package initialisation (before any
// invocation) and read by handle afterwards.
var handler func(*Invocation) (Decision, error)

// Handle registers the hook's handler. Call it exactly once, from an init
// function of the hook's main package:
//
//	func init() { sdk.Handle(redact) }
//
// A wasip1 reactor (-buildmode=c-shared) runs package initialisation during
// _initialize, before the first invocation; it never runs main. Handle
// panics if h is nil or a handler is already registered, which fails the
// module's initialisation.
func Handle(h func(*Invocation) Decision) {
	if h == nil {
		panic("sdk: Handle(nil)")
	}
	register(func(inv *Invocation) (Decision, error) { return h(inv), nil })
}

// HandleE is Handle for a handler that can fail. A non-nil error (like a
// panic in any handler) makes the hook fail: hook_v1_handle returns 0 and the
// host applies the hook's failure policy, which is never "allow" by accident.
// Use it for errors the operator must fix, such as invalid settings; for
// optional work that went wrong, return a Decision with a reason instead.
func HandleE(h func(*Invocation) (Decision, error)) {
	if h == nil {
		panic("sdk: HandleE(nil)")
	}
	register(h)
}

func register(h func(*Invocation) (Decision, error)) {
	if handler != nil {
		panic("sdk: a handler is already registered; a hook has exactly one")
	}
	handler = h
}

var (
	// running is true while handle runs: it makes Call fail fast with
	// ErrNotInInvocation outside an invocation and refuses re-entry.
	running atomic.Bool
	// outBuf holds the last decision document so that it stays alive
	// until the host has copied it; the next invocation reuses it (ABI.md:
	// the host copies the output before anything else runs). It is touched
	// only by handle, which never runs twice at once (running guards it).
	outBuf []byte
	// invocation is the Invocation handle passes to the handler, reused
	// (a handler must not keep it after returning); only handle touches
	// it.
	invocation Invocation
)

// decodeLimits bounds the capability replies the SDK parses. The host has
// already checked them strictly, so these only keep the parser's recursion
// bounded. (The invocation document has abi's limits, as the host's.)
func decodeLimits(n int) abi.JSONLimits {
	return abi.JSONLimits{MaxBytes: max(n, 1), MaxDepth: 128}
}

// handle is hook_v1_handle without the pointer packing: it takes the parked
// invocation document of inLen bytes, runs the handler (override, when not
// nil, instead of the registered one) and returns the canonical decision
// document. A non-empty failure means hook_v1_handle must return 0.
func handle(inLen uint32, override any) (out []byte, failure string) {
	if !running.CompareAndSwap(false, true) {
		return nil, "hook_v1_handle was re-entered while an invocation was running"
	}
	defer running.Store(false)

	h := handler
	if override != nil {
		switch f := override.(type) {
		case func(*Invocation) Decision:
			h = func(inv *Invocation) (Decision, error) { return f(inv), nil }
		case func(*Invocation) (Decision, error):
			h = f
		default:
			return nil, fmt.Sprintf("unsupported handler type %T", override)
		}
	}
	if h == nil {
		return nil, "no handler registered: call sdk.Handle or sdk.HandleE from an init function"
	}

	// A fresh buffer each time: the decoded strings are views of it, so
	// it must never be written again. One allocation replaces one per
	// string.
	doc := make([]byte, inLen)
	status, n := hostcall.Take(doc)
	if status != abi.StatusOK || n != inLen {
		return nil, fmt.Sprintf("taking the invocation document returned %s with %d bytes, want OK with %d", status, n, inLen)
	}
	inv := &invocation
	if err := inv.decode(doc); err != nil {
		return nil, err.Error()
	}

	dec, err := runHandler(h, inv)
	if err != nil {
		return nil, err.Error()
	}
	out, ok, err := appendDecision(outBuf[:0], dec, inv.Point)
	if err != nil {
		return nil, err.Error()
	}
	if !ok {
		// A context value of a type the fast encoder does not know:
		// encoding/json encodes it (or says why it cannot).
		if out, err = dec.encode(inv.Point); err != nil {
			return nil, err.Error()
		}
	}
	outBuf = out
	return out, ""
}

// errPanic marks a recovered handler panic.
var errPanic = errors.New("handler panicked")

// maxStack bounds the stack trace reported with a handler panic.
const maxStack = 4 << 10

func runHandler(h func(*Invocation) (Decision, error), inv *Invocation) (dec Decision, err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			if len(stack) > maxStack {
				stack = stack[:maxStack]
			}
			err = fmt.Errorf("%w: %v\n%s", errPanic, r, stack)
		}
	}()
	dec, err = h(inv)
	if err != nil {
		return Decision{}, fmt.Errorf("handler returned an error: %w", err)
	}
	return dec, nil
}
