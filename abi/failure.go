package abi

import (
	"context"
	"errors"
)

// FailureCode is the stable, lower-case code of an invocation that reached no
// decision: a hook failure (something the hook did or failed to do), a
// refusal (the host did not run the hook), or the platform's own reason not
// to run it. The list below is closed: the host never reports a code that is
// not in FailureCodes, and ABI.md#failure-codes documents each one. The
// caller's fail policy decides what follows any of them; a failure is never
// a decision, and never confused with a hook's block.
//
// Failure codes are seen by the platform; host_call statuses (Status) are
// seen by the hook. The two lists are separate even where a word appears in
// both (invalid_request).
type FailureCode string

// Hook failures: the hook ran and reached no decision.
const (
	// FailTrap: the guest trapped (unreachable, out-of-bounds access,
	// division by zero) or exited (proc_exit, a Go panic).
	FailTrap FailureCode = "trap"
	// FailTimeout: the invocation ran past its wall-clock limit. A
	// *Failure of this code satisfies errors.Is(err,
	// context.DeadlineExceeded).
	FailTimeout FailureCode = "timeout"
	// FailMemory: the guest failed after the host refused to grow its
	// memory past its limit.
	FailMemory FailureCode = "memory"
	// FailInvalidOutput: the hook returned 0, or output that is not a
	// valid decision for the point (or a modify its point or the chain
	// does not allow).
	FailInvalidOutput FailureCode = "invalid_output"
	// FailOutputTooLarge: the decision was over the output limit, or a
	// modify grew the context past what a later binding takes.
	FailOutputTooLarge FailureCode = "output_too_large"
	// FailABIViolation: a host_call pointer or length, or the output
	// pointer, was outside linear memory.
	FailABIViolation FailureCode = "abi_violation"
	// FailInit: creating the instance or running _initialize failed.
	FailInit FailureCode = "init_failed"
	// FailFuelExhausted: the hook used more than its fuel budget (or its
	// init fuel while the instance was being created). Deterministic: the
	// same module and input run out at the same instruction on every run
	// and every machine.
	FailFuelExhausted FailureCode = "fuel_exhausted"
	// FailStackExhausted: the hook's call stack went past its stack limit
	// (or the engine's own ceiling).
	FailStackExhausted FailureCode = "stack_exhausted"
)

// Refusals: the host did not run the hook, or the run did not end with it.
const (
	// FailLimitExceeded: a value was over a limit before the hook ran (the
	// invocation document over the input limit, a module over a load
	// limit).
	FailLimitExceeded FailureCode = "limit_exceeded"
	// FailInvalidModule: the module was refused at load.
	FailInvalidModule FailureCode = "invalid_module"
	// FailInvalidRequest: the invocation request was refused (no tenant,
	// an unknown point or one the manifest does not allow).
	FailInvalidRequest FailureCode = "invalid_request"
	// FailRuntimeClosed: the runtime or the module was closed.
	FailRuntimeClosed FailureCode = "closed"
	// FailPoolExhausted: every instance was busy and the caller's context
	// ended while waiting.
	FailPoolExhausted FailureCode = "pool_exhausted"
	// FailAbandoned: the caller's context ended while the hook ran; the
	// host calls it made and their charges stand.
	FailAbandoned FailureCode = "abandoned"
	// FailCircuitOpen: the chain's circuit breaker skipped the binding;
	// its fail policy applied without running it.
	FailCircuitOpen FailureCode = "circuit_open"
	// FailInternal: an error the host did not expect. Its message is for
	// the operator.
	FailInternal FailureCode = "internal"
)

// failureCodes is the closed list, in the order of ABI.md's table.
var failureCodes = [...]FailureCode{
	FailTrap, FailTimeout, FailMemory, FailInvalidOutput, FailOutputTooLarge,
	FailABIViolation, FailInit, FailFuelExhausted, FailStackExhausted,
	FailLimitExceeded, FailInvalidModule, FailInvalidRequest, FailRuntimeClosed,
	FailPoolExhausted, FailAbandoned, FailCircuitOpen, FailInternal,
}

// FailureCodes returns every failure code, in the order of ABI.md's table.
// The slice is a copy.
func FailureCodes() []FailureCode { return append([]FailureCode(nil), failureCodes[:]...) }

// Known reports whether c is in the closed list.
func (c FailureCode) Known() bool {
	for _, k := range failureCodes {
		if c == k {
			return true
		}
	}
	return false
}

// Failure is an invocation that reached no decision: a stable code and a
// message. It is the error runtime's Invoke returns when the hook fails, the
// failure a chain's step and audit record carry, and what a refusal becomes
// when a fail policy answers it.
type Failure struct {
	Code FailureCode `json:"code"`
	// Message says what happened, for the hook's author and the operator.
	// It never carries a host stack trace.
	Message string `json:"message"`
}

func (f *Failure) Error() string { return "hook failed: " + string(f.Code) + ": " + f.Message }

// Is makes errors.Is(err, &Failure{Code: c}) match any failure of code c
// (and &Failure{} any failure), and errors.Is(err,
// context.DeadlineExceeded) match a timeout.
func (f *Failure) Is(target error) bool {
	if target == context.DeadlineExceeded {
		return f.Code == FailTimeout
	}
	t, ok := target.(*Failure)
	return ok && (t.Code == f.Code || t.Code == "")
}

// AsFailure returns the *Failure in err's chain.
func AsFailure(err error) (*Failure, bool) {
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}
