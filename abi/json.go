package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Default limits for strict JSON documents. See RATIONALE.md#why-a-strict-json-parser-of-our-own.
const (
	// DefaultMaxJSONBytes bounds a document when JSONLimits.MaxBytes is zero.
	DefaultMaxJSONBytes = 1 << 20
	// DefaultMaxJSONDepth bounds nesting when JSONLimits.MaxDepth is zero.
	DefaultMaxJSONDepth = 64
	// maxNumberBytes bounds the literal of one number.
	maxNumberBytes = 128
	// maxSafeInteger is 2^53-1, the largest integer every JSON parser
	// represents exactly.
	maxSafeInteger = 1<<53 - 1
)

// JSONLimits bounds a strict JSON document. The zero value uses the defaults.
type JSONLimits struct {
	// MaxBytes is the largest document accepted, in bytes. Zero means
	// DefaultMaxJSONBytes (1 MiB).
	MaxBytes int
	// MaxDepth is the deepest nesting of arrays and objects accepted.
	// Zero means DefaultMaxJSONDepth (64).
	MaxDepth int
}

func (l JSONLimits) withDefaults() JSONLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxJSONBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxJSONDepth
	}
	return l
}

// JSONError reports why a document is not strict JSON.
type JSONError struct {
	// Offset is the byte offset at which the problem was found.
	Offset int
	// Reason says what is wrong, in lower case.
	Reason string
}

func (e *JSONError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Reason)
}

// ParseJSON parses data as one strict JSON value (RFC 8259 plus the rules
// below) and returns it as map[string]any, []any, string, json.Number, bool
// or nil. Everything a schema validator and a capability see is the value
// this returns, so the two can never disagree about the document.
//
// Rejected, before anything looks at the content: a document over
// lim.MaxBytes; nesting deeper than lim.MaxDepth; duplicate object keys;
// invalid UTF-8; escaped lone surrogates; control characters in strings;
// numbers that overflow float64 (1e400); integers beyond ±(2^53-1), which
// parsers disagree about; trailing data after the value.
func ParseJSON(data []byte, lim JSONLimits) (any, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return nil, &JSONError{Offset: lim.MaxBytes, Reason: fmt.Sprintf("document is %d bytes, over the limit of %d", len(data), lim.MaxBytes)}
	}
	var l Lexer
	l.Reset(data, lim.MaxDepth)
	l.SkipSpace()
	v, ok := l.Value(0)
	if !ok {
		return nil, l.Err()
	}
	l.SkipSpace()
	if !l.AtEnd() {
		l.fail(l.pos, "unexpected data after the value")
		return nil, l.Err()
	}
	return v, nil
}

// parseObject is ParseJSON for a document that must be an object. When it
// is not, reason says so ("not strict JSON", with ParseJSON's error, or "not
// a JSON object"), for the caller's own error type.
func parseObject(data []byte, lim JSONLimits) (m map[string]any, reason string, err error) {
	v, err := ParseJSON(data, lim)
	if err != nil {
		return nil, "not strict JSON", err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "not a JSON object", nil
	}
	return m, "", nil
}

// errorText is the message of a document's error: what is invalid, why, and
// the error beneath if any.
func errorText(invalid, reason string, err error) string {
	if err != nil {
		return invalid + ": " + reason + ": " + err.Error()
	}
	return invalid + ": " + reason
}

// Marshal encodes a value as compact JSON with object keys sorted and without
// HTML escaping. Values returned by ParseJSON round-trip: ParseJSON(Marshal(v))
// equals v.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	out := b.Bytes()
	return out[:len(out)-1], nil // drop Encode's newline
}
