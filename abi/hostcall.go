package abi

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Bounds of host-call traffic shared by the host's runtime, which enforces
// them as a hook calls, and the capability runner, which enforces them again
// for any caller.
const (
	// MaxNameBytes is the longest capability name, in bytes: host_call
	// refuses a longer one with REQUEST_TOO_LARGE, and a registry will not
	// hold one.
	MaxNameBytes = 128
	// DefaultMaxPayloadBytes is the default bound of one host-call payload
	// and of one host-call result (1 MiB).
	DefaultMaxPayloadBytes = 1 << 20
)

// Error is the JSON error object a failing host_call returns as its body,
// {"code": "...", "message": "..."}. Code is always Status.Code() of the
// status it was returned with. Message is meant for the hook author and never
// carries host details (paths, stack traces, provider headers).
type Error struct {
	Status  Status `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// NewError returns an Error for status s with the given message.
func NewError(s Status, message string) *Error {
	return &Error{Status: s, Code: s.Code(), Message: message}
}

// Errorf is NewError with a format string.
func Errorf(s Status, format string, args ...any) *Error {
	return NewError(s, fmt.Sprintf(format, args...))
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Is makes errors.Is(err, &Error{Status: s}) match any Error of status s.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}

// Encode returns the error object as compact JSON.
func (e *Error) Encode() []byte {
	msg := e.Message
	if !utf8.ValidString(msg) {
		msg = string([]rune(msg)) // replaces invalid bytes with U+FFFD
	}
	b, err := Marshal(map[string]any{"code": e.Status.Code(), "message": msg})
	if err != nil { // cannot happen for two strings
		return []byte(`{"code":"` + e.Status.Code() + `","message":""}`)
	}
	return b
}

// DecodeError parses an error body returned with status s. A body that is not
// a well-formed error object still yields an Error of status s, so a guest
// never loses the status.
func DecodeError(s Status, body []byte) *Error {
	e := &Error{Status: s, Code: s.Code()}
	v, err := ParseJSON(body, JSONLimits{MaxBytes: len(body) + 1, MaxDepth: 4})
	if err != nil {
		e.Message = "malformed error body"
		return e
	}
	if m, ok := v.(map[string]any); ok {
		if msg, ok := m["message"].(string); ok {
			e.Message = msg
		}
	}
	return e
}

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Caller identifies who makes a host call. The host fills it from the
// invocation; a hook can neither see nor choose any of it.
type Caller struct {
	// Tenant is the tenant the invocation runs for. Credit, key-value data
	// and instances are all scoped by it.
	Tenant string
	// Hook is the hook's name as bound by the operator.
	Hook string
	// Module is the hex sha256 of the hook's module bytes.
	Module string
	// Invocation is the unique id of the invocation.
	Invocation string
	// Point is the hook point the invocation runs at.
	Point string
	// Granted lists the capabilities the operator granted to the hook.
	Granted []string
	// Requested lists the capabilities the hook's manifest asks for.
	// It is meaningful only when HasManifest is true.
	Requested []string
	// HasManifest reports whether the module carries a manifest. Without
	// one, the operator's grants alone decide.
	HasManifest bool
}

// Call is one host call as the host hands it to the capability runner, after
// the bytes were copied out of guest memory and the per-invocation quotas
// were checked.
type Call struct {
	// Name is the capability name the guest asked for.
	Name string
	// Payload is the request payload, not yet parsed.
	Payload []byte
	// Seq numbers the host calls of one invocation from 1; with
	// Caller.Invocation it makes an idempotency key.
	Seq int
	// MaxResultBytes bounds the encoded result; zero means no bound.
	MaxResultBytes int
	// Caller identifies the hook.
	Caller Caller
}

// IdempotencyKey returns a key unique to this host call, derived from the
// invocation id and the sequence number.
func (c *Call) IdempotencyKey() string {
	var buf [96]byte // one allocation, the string, for ids of usual length
	b := append(buf[:0], c.Caller.Invocation...)
	b = append(b, '/')
	return string(strconv.AppendInt(b, int64(c.Seq), 10))
}

// Reply is the answer to a Call: a status and a body. The body is the
// capability's result (StatusOK) or an encoded Error.
type Reply struct {
	Status Status
	Body   []byte
	// Charged is the credit the call was charged, for the host's report.
	Charged int64
}

// ErrorReply returns the Reply for an error of status s.
func ErrorReply(s Status, message string) Reply {
	return Reply{Status: s, Body: NewError(s, message).Encode()}
}
