package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
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
	p := parser{data: data, maxDepth: lim.MaxDepth}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf("unexpected data after the value")
	}
	return v, nil
}

type parser struct {
	data     []byte
	pos      int
	maxDepth int
	scratch  []byte
}

func (p *parser) errorf(format string, args ...any) error {
	return p.errorAt(p.pos, format, args...)
}

func (p *parser) errorAt(offset int, format string, args ...any) error {
	return &JSONError{Offset: offset, Reason: fmt.Sprintf(format, args...)}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end of document")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, p.errorf("unexpected character %q", c)
	}
}

func (p *parser) literal(word string) error {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return p.errorf("invalid literal, expected %s", word)
	}
	p.pos += len(word)
	return nil
}

func (p *parser) object(depth int) (any, error) {
	if depth > p.maxDepth {
		return nil, p.errorf("nesting deeper than %d", p.maxDepth)
	}
	p.pos++ // {
	m := make(map[string]any)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return m, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expected a string key")
		}
		keyPos := p.pos
		k, err := p.string()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, &JSONError{Offset: keyPos, Reason: fmt.Sprintf("duplicate key %q", k)}
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("expected ':' after key")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of document in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return m, nil
		default:
			return nil, p.errorf("expected ',' or '}' in object")
		}
	}
}

func (p *parser) array(depth int) (any, error) {
	if depth > p.maxDepth {
		return nil, p.errorf("nesting deeper than %d", p.maxDepth)
	}
	p.pos++ // [
	a := make([]any, 0, 4)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return a, nil
	}
	for {
		p.skipSpace()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of document in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return a, nil
		default:
			return nil, p.errorf("expected ',' or ']' in array")
		}
	}
}

func (p *parser) string() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := p.data[start:p.pos]
			if !utf8.Valid(s) {
				return "", p.invalidUTF8(start)
			}
			p.pos++
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errorf("control character 0x%02x in string", c)
		}
		p.pos++
	}
	buf := append(p.scratch[:0], p.data[start:p.pos]...)
	for {
		if p.pos >= len(p.data) {
			return "", p.errorf("unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return "", p.invalidUTF8(start)
			}
			p.pos++
			p.scratch = buf[:0]
			return string(buf), nil
		case c < 0x20:
			return "", p.errorf("control character 0x%02x in string", c)
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		// An escape. Errors in it are reported at its backslash.
		esc := p.pos
		if p.pos+1 >= len(p.data) {
			return "", p.errorf("unterminated escape")
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 {
					return "", p.errorAt(esc, "lone low surrogate \\u%04X", r)
				}
				if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
					return "", p.errorAt(esc, "lone high surrogate \\u%04X", r)
				}
				p.pos += 2
				r2, err := p.hex4()
				if err != nil {
					return "", err
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return "", p.errorAt(esc, "high surrogate \\u%04X not followed by a low surrogate", r)
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.errorAt(esc, "invalid escape %q", p.data[esc:p.pos])
		}
	}
}

func (p *parser) invalidUTF8(start int) error {
	s := p.data[start:]
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return &JSONError{Offset: start + i, Reason: "invalid UTF-8 in string"}
		}
		i += n
	}
	return &JSONError{Offset: start, Reason: "invalid UTF-8 in string"}
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errorf("truncated \\u escape")
	}
	var r rune
	for i, c := range p.data[p.pos : p.pos+4] {
		v, ok := hexDigit(c)
		if !ok {
			return 0, p.errorAt(p.pos+i, "invalid hex digit %q in \\u escape", c)
		}
		r = r<<4 | v
	}
	p.pos += 4
	return r, nil
}

// hexDigit returns the value of the hex digit c.
func hexDigit(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10), true
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}

func (p *parser) number() (any, error) {
	start := p.pos
	d := p.data
	i := p.pos
	if d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d) && d[i] == '0' {
		i++
		if i < len(d) && d[i] >= '0' && d[i] <= '9' {
			p.pos = i
			return nil, p.errorf("leading zero in number")
		}
	} else if digits() == 0 {
		p.pos = i
		return nil, p.errorf("invalid number")
	}
	integer := true
	if i < len(d) && d[i] == '.' {
		integer = false
		i++
		if digits() == 0 {
			p.pos = i
			return nil, p.errorf("invalid number: no digits after '.'")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		integer = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.pos = i
			return nil, p.errorf("invalid number: no digits in exponent")
		}
	}
	lit := d[start:i]
	if len(lit) > maxNumberBytes {
		return nil, p.errorf("number literal longer than %d bytes", maxNumberBytes)
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil && !isUnderflow(f) {
		return nil, p.errorf("number %s is out of range", lit)
	}
	if math.IsInf(f, 0) {
		return nil, p.errorf("number %s is out of range", lit)
	}
	if integer && math.Abs(f) > maxSafeInteger {
		return nil, p.errorf("integer %s is beyond ±(2^53-1)", lit)
	}
	p.pos = i
	return json.Number(lit), nil
}

// isUnderflow reports whether a ParseFloat range error was an underflow to
// zero (1e-400), which is harmless, rather than an overflow.
func isUnderflow(f float64) bool { return f == 0 }

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
