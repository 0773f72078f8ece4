package runtime

import (
	"errors"
	"fmt"
)

// Sentinel errors for states of the runtime.
var (
	// ErrClosed is returned by a Runtime or Module that was closed.
	ErrClosed = errors.New("runtime: closed")
	// ErrPoolExhausted is returned when every instance of a module for a
	// tenant is busy and the caller's context ended while waiting.
	ErrPoolExhausted = errors.New("runtime: all instances busy")
	// ErrInvalidRequest wraps problems with a Request (not with the hook).
	ErrInvalidRequest = errors.New("runtime: invalid request")
)

// FailureCode is the stable, lower-case code of a hook failure: something the
// hook did (or failed to do) that kept it from reaching a decision. Failures
// are never confused with a deliberate block; the caller's fail policy decides
// what happens next.
type FailureCode string

// Hook failure codes.
const (
	// FailTrap: the guest trapped (unreachable, out-of-bounds access,
	// division by zero, stack overflow) or exited (proc_exit, a Go panic).
	FailTrap FailureCode = "trap"
	// FailTimeout: the invocation ran past its wall-clock limit.
	FailTimeout FailureCode = "timeout"
	// FailMemory: the guest failed after the host refused to grow its
	// memory past Limits.MemoryPages.
	FailMemory FailureCode = "memory"
	// FailInvalidOutput: the hook returned 0, or output that is not a valid
	// decision for the point.
	FailInvalidOutput FailureCode = "invalid_output"
	// FailOutputTooLarge: the decision was over Limits.MaxOutputBytes.
	FailOutputTooLarge FailureCode = "output_too_large"
	// FailABIViolation: a host_call pointer or length, or the output
	// pointer, was outside linear memory.
	FailABIViolation FailureCode = "abi_violation"
	// FailInit: creating the instance or running _initialize failed.
	FailInit FailureCode = "init_failed"
	// FailFuelExhausted: the hook used more than its fuel budget
	// (Limits.Fuel, or Limits.InitFuel while the instance was being
	// created). Deterministic: the same module and input run out at the
	// same instruction on every run and every machine.
	FailFuelExhausted FailureCode = "fuel_exhausted"
	// FailStackExhausted: the hook's call stack went past
	// Limits.MaxStackBytes (or the engine's own ceiling, which the
	// interpreter reaches at 2000 frames).
	FailStackExhausted FailureCode = "stack_exhausted"
)

// Failure is a hook failure. Invoke returns it as its error, beside a Result
// whose Failure field is the same value.
type Failure struct {
	Code FailureCode `json:"code"`
	// Message says what happened, for the hook's author and the operator.
	// It never carries a host stack trace.
	Message string `json:"message"`
}

func (f *Failure) Error() string { return "hook failed: " + string(f.Code) + ": " + f.Message }

// Is makes errors.Is(err, &Failure{Code: c}) match any failure of code c.
func (f *Failure) Is(target error) bool {
	t, ok := target.(*Failure)
	return ok && (t.Code == f.Code || t.Code == "")
}

// AsFailure returns the *Failure in err's chain.
func AsFailure(err error) (*Failure, bool) {
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}

// LimitError reports a value over a limit.
type LimitError struct {
	// Limit names the limit, as a stable lower-case code.
	Limit string
	Max   uint64
	Got   uint64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("runtime: %s is %d, over the limit of %d", e.Limit, e.Got, e.Max)
}

// AbandonedError is Invoke's error when the caller's context ended while the
// hook ran: not the hook's failure, and no decision. The host calls it made
// stand, and so does the credit they were charged, settled whatever the
// caller's context (issue 10: a charge must never vanish from every report).
// It wraps the context's error and ErrAbandoned.
type AbandonedError struct {
	// InvocationID is the invocation's id.
	InvocationID string
	// HostCalls counts the host calls made, takes excluded.
	HostCalls int
	// CreditCharged is the credit those calls were charged.
	CreditCharged int64
	// Err is the context's error.
	Err error
}

// ErrAbandoned means the caller's context ended during an invocation.
var ErrAbandoned = errors.New("runtime: invocation abandoned")

func (e *AbandonedError) Error() string {
	return fmt.Sprintf("runtime: invocation abandoned (%d host calls, %d credit charged): %v", e.HostCalls, e.CreditCharged, e.Err)
}

// Unwrap returns ErrAbandoned and the context's error.
func (e *AbandonedError) Unwrap() []error { return []error{ErrAbandoned, e.Err} }

// ValidationError reports why a module was refused at load. It names the
// offending import or export when there is one.
type ValidationError struct {
	// Import is "module.name" of the offending import, if any.
	Import string
	// Export is the name of the offending export, if any.
	Export string
	// Reason says what is wrong.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

func (e *ValidationError) Error() string {
	msg := "invalid module: "
	switch {
	case e.Import != "":
		msg += "import " + e.Import + ": "
	case e.Export != "":
		msg += "export " + e.Export + ": "
	}
	msg += e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ValidationError) Unwrap() error { return e.Err }

// Code returns the stable error code of an error from Load or Validate, for
// the CLI and other trust boundaries.
func Code(err error) string {
	var (
		v *ValidationError
		l *LimitError
		f *Failure
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &f):
		return string(f.Code)
	case errors.As(err, &l):
		return "limit_exceeded"
	case errors.As(err, &v):
		return "invalid_module"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrPoolExhausted):
		return "pool_exhausted"
	case errors.Is(err, ErrInvalidRequest):
		return "invalid_request"
	case errors.Is(err, ErrAbandoned):
		return "abandoned"
	}
	return "internal"
}
