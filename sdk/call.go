package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk/internal/hostcall"
)

// Error is a capability call the host answered with a status other than OK:
// the capability was refused, failed, or the call broke a limit. Compare it
// with the sentinels (errors.Is(err, sdk.ErrInsufficientCredit)) or read its
// Status with errors.As.
type Error struct {
	// Capability is the name the hook called.
	Capability string
	// Status is the host_call status.
	Status abi.Status
	// Code is the stable lower-case code of Status, such as
	// "insufficient_credit".
	Code string
	// Message is the host's explanation, meant for the hook author.
	Message string
}

// Error returns "sdk: CAPABILITY: CODE: MESSAGE".
func (e *Error) Error() string {
	s := "sdk: "
	if e.Capability != "" {
		s += e.Capability + ": "
	}
	s += e.Code
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is an *Error (such as one of the sentinels) or an
// *abi.Error of the same status.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *Error:
		return t.Status == e.Status
	case *abi.Error:
		return t.Status == e.Status
	}
	return false
}

func newError(capability string, s abi.Status, message string) *Error {
	return &Error{Capability: capability, Status: s, Code: s.Code(), Message: message}
}

// Sentinels for the statuses a capability call can fail with. errors.Is
// matches any *Error of the same status.
var (
	// ErrUnknownCapability: the host has no capability of that name.
	ErrUnknownCapability = newError("", abi.StatusUnknownCapability, "no capability of that name")
	// ErrInvalidRequest: the payload failed the capability's schema.
	ErrInvalidRequest = newError("", abi.StatusInvalidRequest, "the payload does not fit the capability's schema")
	// ErrDenied: the hook was not granted the capability (by the operator,
	// or because its manifest does not ask for it), or a gate refused it.
	ErrDenied = newError("", abi.StatusDenied, "the capability was denied")
	// ErrInsufficientCredit: the credit gate refused the call; the tenant's
	// balance is too low.
	ErrInsufficientCredit = newError("", abi.StatusInsufficientCredit, "not enough credit")
	// ErrCapabilityFailed: the capability ran and failed.
	ErrCapabilityFailed = newError("", abi.StatusCapabilityFailed, "the capability failed")
	// ErrResultTooLarge: the result is over the host's limit.
	ErrResultTooLarge = newError("", abi.StatusResultTooLarge, "the result is too large")
	// ErrRequestTooLarge: the payload or name is over the host's limit.
	ErrRequestTooLarge = newError("", abi.StatusRequestTooLarge, "the request is too large")
	// ErrQuotaExceeded: this invocation's host-call count or byte budget is
	// spent.
	ErrQuotaExceeded = newError("", abi.StatusQuotaExceeded, "the invocation's host-call quota is spent")
	// ErrNotInInvocation: the call was made outside a handler, from init
	// say. The SDK returns it without calling the host.
	ErrNotInInvocation = newError("", abi.StatusNotInInvocation, "capabilities can only be called while a handler runs, not from init")
	// ErrRateLimited: a rate gate refused the call; retrying later may
	// succeed.
	ErrRateLimited = newError("", abi.StatusRateLimited, "rate limited")
)

// ErrMalformedResult is wrapped by the error a capability call returns when
// the host answered OK with a result the SDK cannot decode into the result
// argument (or, for the typed helpers, that lacks a field they need).
var ErrMalformedResult = errors.New("sdk: malformed capability result")

const (
	// scratchSize is the size of the reusable reply buffer. Replies that
	// fit take one host call; larger ones are parked by the host and
	// fetched with one take.
	scratchSize = 16 << 10
	// maxKeptScratch is the largest reply buffer kept for reuse after a
	// large reply; bigger buffers are dropped after the call.
	maxKeptScratch = 1 << 20
)

var (
	// callMu guards scratch and keeps each call and its take together:
	// the host has one parked slot per instance, so a second goroutine's
	// call in between would drop a parked reply.
	callMu  sync.Mutex
	scratch []byte
)

// Call calls capability name with payload and decodes its result into
// result. It makes exactly one capability call: a reply too large for the
// SDK's buffer is fetched with a take, never by calling again, so a
// capability never runs (or charges credit) twice.
//
// payload is encoded as JSON: json.RawMessage is sent as is, nil as {}, and
// anything else with encoding/json's rules (keys sorted, no HTML escaping).
// result may be nil (the result is discarded), *json.RawMessage (the raw
// result), *any, *map[string]any or *string (decoded by the SDK's strict
// parser: numbers become json.Number), or anything encoding/json can
// unmarshal into.
//
// A failure status returns an *Error (compare with ErrDenied and the other
// sentinels). Called outside a handler, such as from init, Call returns
// ErrNotInInvocation without calling the host. Call is safe for use by
// multiple goroutines of a handler; calls are serialised. A goroutine must
// not outlive the handler that started it: in a wasm instance it would run
// during a later invocation, and its calls would count against that one.
func Call(name string, payload, result any) error {
	if !running.Load() {
		return newError(name, abi.StatusNotInInvocation, ErrNotInInvocation.Message)
	}
	body, err := encodePayload(payload)
	if err != nil {
		return fmt.Errorf("sdk: %s: encoding the payload: %w", name, err)
	}
	var raw []byte // a copy of the result, for encoding/json
	err = roundTrip(name, body, func(b []byte) error {
		switch r := result.(type) {
		case nil:
			return nil
		case *json.RawMessage:
			*r = append((*r)[:0], b...)
			return nil
		case *any:
			v, err := parseResult(b)
			if err != nil {
				return err
			}
			*r = v
			return nil
		case *map[string]any:
			v, err := parseObject(b)
			if err != nil {
				return err
			}
			*r = v
			return nil
		case *string:
			v, err := parseResult(b)
			if err != nil {
				return err
			}
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("%w: want a string", ErrMalformedResult)
			}
			*r = s
			return nil
		}
		raw = append([]byte(nil), b...)
		return nil
	})
	if err != nil {
		return wrapCall(name, err)
	}
	if raw != nil {
		if err := json.Unmarshal(raw, result); err != nil {
			return fmt.Errorf("sdk: %s: %w: %w", name, ErrMalformedResult, err)
		}
	}
	return nil
}

// wrapCall prefixes decoding errors with the capability's name; *Error
// already carries it.
func wrapCall(name string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("sdk: %s: %w", name, err)
}

// encodePayload encodes a Call payload. See Call.
func encodePayload(payload any) ([]byte, error) {
	switch p := payload.(type) {
	case nil:
		return []byte("{}"), nil
	case json.RawMessage:
		return p, nil
	}
	return abi.Marshal(payload)
}

// roundTrip makes one capability call and hands the OK result to decode,
// which must not keep the slice: it is the SDK's reusable buffer. A failure
// status returns an *Error decoded from the body.
func roundTrip(name string, payload []byte, decode func([]byte) error) error {
	if !running.Load() {
		return newError(name, abi.StatusNotInInvocation, ErrNotInInvocation.Message)
	}
	callMu.Lock()
	defer callMu.Unlock()
	if scratch == nil {
		scratch = make([]byte, scratchSize)
	}
	buf := scratch
	status, n := hostcall.Call(name, payload, buf)
	if n > uint32(len(buf)) {
		// The host parked the reply: fetch it with a take into a buffer
		// of its size. Never call the capability again.
		buf = make([]byte, n)
		ts, tn := hostcall.Take(buf)
		if ts == abi.StatusBufferTooSmall || ts == abi.StatusNoPending || tn != n {
			return newError(name, ts, fmt.Sprintf("taking a parked reply of %d bytes returned %s with %d bytes", n, ts, tn))
		}
		status = ts
		if n <= maxKeptScratch {
			scratch = buf
		}
	}
	body := buf[:n]
	if status != abi.StatusOK {
		ae := abi.DecodeError(status, body)
		return newError(name, status, ae.Message)
	}
	return decode(body)
}

func parseResult(b []byte) (any, error) {
	v, err := abi.ParseJSON(b, decodeLimits(len(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedResult, err)
	}
	return v, nil
}

// parseObject parses a result that must be a JSON object; null gives nil.
func parseObject(b []byte) (map[string]any, error) {
	v, err := parseResult(b)
	if err != nil || v == nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: want an object", ErrMalformedResult)
	}
	return m, nil
}

// callObject calls capability name with an object payload and returns its
// result, which must be a JSON object.
func callObject(name string, payload map[string]any) (map[string]any, error) {
	body, err := abi.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("sdk: %s: encoding the payload: %w", name, err)
	}
	var m map[string]any
	err = roundTrip(name, body, func(b []byte) error {
		var err error
		m, err = parseObject(b)
		return err
	})
	if err != nil {
		return nil, wrapCall(name, err)
	}
	return m, nil
}

// LLMRun asks the host's llm.run capability to complete prompt, generating
// at most maxTokens tokens (zero or less leaves the limit to the host), and
// returns the generated text. The hook's manifest must ask for "llm.run" and
// the operator must grant it; the call is usually charged credit, so expect
// ErrInsufficientCredit and ErrDenied.
//
// The payload is {"prompt": ..., "max_tokens": ...}; the result must be an
// object with a string "text" (other fields are ignored).
func LLMRun(prompt string, maxTokens int) (string, error) {
	payload := map[string]any{"prompt": prompt}
	if maxTokens > 0 {
		payload["max_tokens"] = maxTokens
	}
	m, err := callObject("llm.run", payload)
	if err != nil {
		return "", err
	}
	text, ok := m["text"].(string)
	if !ok {
		return "", fmt.Errorf("sdk: llm.run: %w: no string \"text\"", ErrMalformedResult)
	}
	return text, nil
}

// KVGet reads key from the tenant's key-value store through the kv.get
// capability. found is false if the key is not set.
//
// The payload is {"key": ...}; the result is {"found": bool, "value": ...}.
// Without "found", a present, non-null "value" means found.
func KVGet(key string) (value any, found bool, err error) {
	m, err := callObject("kv.get", map[string]any{"key": key})
	if err != nil {
		return nil, false, err
	}
	value, hasValue := m["value"]
	switch f := m["found"].(type) {
	case bool:
		found = f
	case nil:
		found = hasValue && value != nil
	default:
		return nil, false, fmt.Errorf("sdk: kv.get: %w: \"found\" is not a boolean", ErrMalformedResult)
	}
	if !found {
		return nil, false, nil
	}
	return value, true, nil
}

// KVSet writes value (anything encoding/json can encode) under key in the
// tenant's key-value store through the kv.set capability. The payload is
// {"key": ..., "value": ...}; the result is ignored.
func KVSet(key string, value any) error {
	_, err := callObject("kv.set", map[string]any{"key": key, "value": value})
	return err
}

// Log writes a line to the host's log through the log.write capability. The
// payload is {"level": ..., "message": ...}; levels are the host's ("debug",
// "info", "warn", "error"). For output that needs no capability, print to
// stderr: the host keeps it, capped, in the invocation's log.
func Log(level, msg string) error {
	_, err := callObject("log.write", map[string]any{"level": level, "message": msg})
	return err
}
