package capability

import (
	"errors"
	"fmt"

	"github.com/wasmhooks/wasmhooks/abi"
)

// Sentinel errors. Each names a state; the typed errors below wrap them, so
// errors.Is finds them anywhere in a chain.
var (
	// ErrUnknownCapability means no capability of the requested name is
	// registered (status UNKNOWN_CAPABILITY).
	ErrUnknownCapability = errors.New("capability: unknown capability")

	// ErrInvalidName means a capability name is not 1 to 128 bytes of
	// [a-z0-9_.-].
	ErrInvalidName = errors.New("capability: invalid capability name")

	// ErrDuplicateCapability means a capability of that name is already
	// registered.
	ErrDuplicateCapability = errors.New("capability: duplicate capability")

	// ErrInvalidSchema means a capability's JSON Schema is not strict JSON
	// or does not compile.
	ErrInvalidSchema = errors.New("capability: invalid schema")

	// ErrIncomplete means a capability lacks a required field (a schema or
	// an Execute function).
	ErrIncomplete = errors.New("capability: incomplete capability")

	// ErrNotGranted means the operator did not grant the capability to the
	// hook, or the hook's manifest does not request it (status DENIED).
	ErrNotGranted = errors.New("capability: not granted")

	// ErrInvalidRequest means the payload is not strict JSON or fails the
	// capability's schema (status INVALID_REQUEST).
	ErrInvalidRequest = errors.New("capability: invalid request")

	// ErrRequestTooLarge means the payload or the name is over its limit
	// (status REQUEST_TOO_LARGE).
	ErrRequestTooLarge = errors.New("capability: request too large")

	// ErrInsufficientCredit means the account's available balance (balance
	// minus pending reservations) is below the amount asked for (status
	// INSUFFICIENT_CREDIT). It is not retryable, unlike ErrRateLimited.
	ErrInsufficientCredit = errors.New("capability: insufficient credit")

	// ErrRateLimited means a rate gate refused the call; retrying later may
	// succeed (status RATE_LIMITED).
	ErrRateLimited = errors.New("capability: rate limited")

	// ErrSpendCapExceeded means the call would take the invocation over the
	// runner's per-invocation credit cap (status QUOTA_EXCEEDED).
	ErrSpendCapExceeded = errors.New("capability: invocation spend cap exceeded")

	// ErrCapabilityFailed means the capability ran and failed, panicked, or
	// could not be billed (status CAPABILITY_FAILED).
	ErrCapabilityFailed = errors.New("capability: capability failed")

	// ErrCancelled means the call's context was done before the capability
	// ran; nothing ran and nothing was charged (status CAPABILITY_FAILED).
	ErrCancelled = errors.New("capability: cancelled before execute")

	// ErrResultTooLarge means the encoded result is over the call's
	// MaxResultBytes (status RESULT_TOO_LARGE). The work was done and was
	// charged.
	ErrResultTooLarge = errors.New("capability: result too large")

	// ErrReservationResolved means a reservation was already settled or
	// released; every reservation resolves exactly once. Reserve also
	// returns it for an idempotency key whose reservation is resolved.
	ErrReservationResolved = errors.New("capability: reservation already resolved")

	// ErrUnknownReservation means the ledger holds no reservation of that id.
	ErrUnknownReservation = errors.New("capability: unknown reservation")

	// ErrIdempotencyConflict means an idempotency key was reused for a
	// different account or amount.
	ErrIdempotencyConflict = errors.New("capability: idempotency key reused with different parameters")

	// ErrInvalidAmount means a ledger amount is out of range: a reservation
	// or credit that is not positive, or a negative settlement.
	ErrInvalidAmount = errors.New("capability: invalid amount")
)

// RegistrationError reports why Registry.Register refused a capability. Err
// is one of ErrInvalidName, ErrDuplicateCapability, ErrInvalidSchema or
// ErrIncomplete, possibly wrapping the schema compiler's error. Like every
// error type here it is not modified after it is returned, so it is safe to
// read from multiple goroutines.
type RegistrationError struct {
	// Name is the capability's name as given.
	Name string
	// Reason says what is wrong, in lower case.
	Reason string
	// Err is the sentinel, or a chain that contains it.
	Err error
}

// Error implements error.
func (e *RegistrationError) Error() string {
	return fmt.Sprintf("capability: cannot register %q: %s", e.Name, e.Reason)
}

// Unwrap returns Err.
func (e *RegistrationError) Unwrap() error { return e.Err }

// DeniedError is a refusal by the grant step or by a gate. Status is the
// status the hook receives: StatusDenied, StatusInsufficientCredit,
// StatusRateLimited or StatusQuotaExceeded. Reason is shown to the hook, so
// it must not carry host details. errors.Is(err, &abi.Error{Status: s})
// matches a DeniedError of status s. It is not modified after it is
// returned, except that the runner fills an empty Gate before it returns it.
type DeniedError struct {
	// Gate names what refused: "grant", "spend-cap" or a Gate's Name.
	Gate string
	// Status is the status the hook receives.
	Status abi.Status
	// Reason is the message the hook receives.
	Reason string
	// Err is an underlying sentinel such as ErrInsufficientCredit; may be nil.
	Err error
}

// Error implements error.
func (e *DeniedError) Error() string {
	msg := fmt.Sprintf("capability: %s gate refused the call (%s): %s", e.Gate, e.Status.Code(), e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Err.
func (e *DeniedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &abi.Error{Status: s}) true for a DeniedError of
// status s.
func (e *DeniedError) Is(target error) bool {
	t, ok := target.(*abi.Error)
	return ok && t.Status == e.Status
}

// InvalidRequestError reports a payload that is not strict JSON or fails the
// capability's schema. Path is the JSON pointer of the failing value ("" is
// the whole payload); Reason is what is wrong, without the payload's content.
// It wraps ErrInvalidRequest and the parser's or validator's error. It is not
// modified after it is returned.
type InvalidRequestError struct {
	// Capability is the capability's name.
	Capability string
	// Path is the JSON pointer of the failing value.
	Path string
	// Reason says what is wrong, in lower case.
	Reason string
	// Err is the parser's or the validator's error.
	Err error
}

// Error implements error.
func (e *InvalidRequestError) Error() string {
	return fmt.Sprintf("capability: invalid request for %s at %q: %s", e.Capability, e.Path, e.Reason)
}

// Unwrap returns ErrInvalidRequest and Err.
func (e *InvalidRequestError) Unwrap() []error { return []error{ErrInvalidRequest, e.Err} }

// ExecuteError reports a capability whose Execute (or Cost, or a gate) failed
// or panicked. It is for the operator: Err may carry a provider's error text
// and Stack a goroutine stack, none of which ever reaches the hook, which
// sees only "capability X failed". It wraps ErrCapabilityFailed. It is not
// modified after it is returned.
type ExecuteError struct {
	// Capability is the capability's name.
	Capability string
	// Stage is where it failed: "cost", "gate", "execute", "encode" or
	// "settle".
	Stage string
	// Err is the error returned, or a description of the panic.
	Err error
	// Panic is the recovered value when the stage panicked, else nil.
	Panic any
	// Stack is the goroutine stack at the panic, else nil.
	Stack []byte
}

// Error implements error.
func (e *ExecuteError) Error() string {
	if e.Panic != nil {
		return fmt.Sprintf("capability: %s panicked in %s: %v", e.Capability, e.Stage, e.Panic)
	}
	return fmt.Sprintf("capability: %s failed in %s: %v", e.Capability, e.Stage, e.Err)
}

// Unwrap returns ErrCapabilityFailed and Err.
func (e *ExecuteError) Unwrap() []error { return []error{ErrCapabilityFailed, e.Err} }
