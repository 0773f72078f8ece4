package runtime

import (
	"errors"
	"fmt"

	"github.com/wasmhooks/wasmhooks/abi"
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
// caller's context, so that a charge never vanishes from every report.
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

// Code returns the failure code of an error from Load, Validate, Invoke or
// InvokeInto, for the CLI, the chain and other trust boundaries: the code of
// a *abi.Failure, the refusal code of the runtime's other errors, and
// abi.FailInternal for an error it does not know. Every code it returns is
// in abi.FailureCodes; "" only for a nil error.
func Code(err error) abi.FailureCode {
	var (
		v *ValidationError
		l *LimitError
		f *abi.Failure
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &f):
		if !f.Code.Known() {
			return abi.FailInternal
		}
		return f.Code
	case errors.Is(err, ErrAbandoned):
		return abi.FailAbandoned
	case errors.As(err, &l):
		return abi.FailLimitExceeded
	case errors.As(err, &v):
		return abi.FailInvalidModule
	case errors.Is(err, ErrClosed):
		return abi.FailRuntimeClosed
	case errors.Is(err, ErrPoolExhausted):
		return abi.FailPoolExhausted
	case errors.Is(err, ErrInvalidRequest):
		return abi.FailInvalidRequest
	}
	return abi.FailInternal
}
