package sdk

// The SDK's fast codec: a scanner that decodes the invocation document
// straight into an Invocation, and an encoder that writes the canonical
// decision document without reflection. Inside wasm, building the document
// tree with abi.ParseJSON and encoding with encoding/json cost more than most
// hooks' own work. See RATIONALE.md#why-a-hand-written-codec-in-the-sdk.
//
// Both are held to the reference implementations by differential tests and
// fuzzing (codec_test.go): decodeInvocation accepts exactly what
// abi.DecodeInvocation accepts and returns the same values, and
// appendDecision writes exactly the bytes abi.Decision.Encode writes.
// Anything unusual takes the reference path: an invalid document (for its
// error message), and values of types the encoder does not know.

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/wasmhooks/wasmhooks/abi"
)

// maxDecodeDepth bounds the nesting the SDK decodes, as decodeLimits does.
const maxDecodeDepth = 128

// decodeInvocation decodes the invocation document doc. Strings in the result
// alias doc, so doc must never be modified afterwards (handle takes every
// document into a fresh buffer).
func decodeInvocation(doc []byte) (*Invocation, error) {
	if inv, ok := fastInvocation(doc); ok {
		return inv, nil
	}
	// The reference decoder says precisely what is wrong. (It accepts
	// nothing the fast decoder refuses; the differential fuzz test holds
	// the two to that.)
	ai, err := abi.DecodeInvocation(doc, decodeLimits(len(doc)))
	if err != nil {
		return nil, err
	}
	return &Invocation{
		Point:    ai.Point,
		Context:  ai.Context,
		Settings: ai.Settings,
		Meta:     Meta{Hook: ai.Meta.Hook, Invocation: ai.Meta.Invocation, Tenant: ai.Meta.Tenant},
	}, nil
}

// fastInvocation decodes doc, returning false for anything
// abi.DecodeInvocation would refuse (and, never in practice, for anything
// else: the caller then asks the reference decoder).
func fastInvocation(doc []byte) (*Invocation, bool) {
	d := decoder{data: doc}
	d.skipSpace()
	if !d.consume('{') {
		return nil, false
	}
	const (
		seenABI = 1 << iota
		seenPoint
		seenContext
		seenSettings
		seenMeta
	)
	var (
		seen   int
		others []string // unknown top-level keys, for duplicate detection
		inv    = &Invocation{}
	)
	d.skipSpace()
	if d.consume('}') {
		return nil, false // no "abi"
	}
	for {
		d.skipSpace()
		key, ok := d.key()
		if !ok {
			return nil, false
		}
		bit := 0
		switch key {
		case "abi":
			bit = seenABI
		case "point":
			bit = seenPoint
		case "context":
			bit = seenContext
		case "settings":
			bit = seenSettings
		case "meta":
			bit = seenMeta
		default:
			if slices.Contains(others, key) {
				return nil, false
			}
			others = append(others, key)
		}
		if seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		d.skipSpace()
		if !d.consume(':') {
			return nil, false
		}
		d.skipSpace()
		switch bit {
		case seenABI:
			lit, ok := d.numberLiteral()
			if !ok {
				return nil, false
			}
			if n, err := strconv.ParseInt(lit, 10, 64); err != nil || n != abi.Major {
				return nil, false
			}
		case seenPoint:
			if inv.Point, ok = d.stringValue(); !ok {
				return nil, false
			}
			if p, known := abi.LookupPoint(inv.Point); known {
				inv.Point = p.Name // the constant, not a view of doc
			}
		case seenContext:
			if inv.Context, ok = d.objectValue(1); !ok {
				return nil, false
			}
		case seenSettings:
			if d.literal("null") {
				break
			}
			if inv.Settings, ok = d.objectValue(1); !ok {
				return nil, false
			}
		case seenMeta:
			if d.literal("null") {
				break
			}
			if !d.meta(&inv.Meta) {
				return nil, false
			}
		default:
			if _, ok := d.value(1); !ok {
				return nil, false
			}
		}
		d.skipSpace()
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			break
		}
		return nil, false
	}
	d.skipSpace()
	if d.pos != len(d.data) || seen&(seenABI|seenPoint|seenContext) != seenABI|seenPoint|seenContext {
		return nil, false
	}
	if inv.Settings == nil {
		inv.Settings = map[string]any{}
	}
	return inv, true
}

// decoder scans strict JSON (abi.ParseJSON's rules) without building the
// document tree where the invocation's shape is known. It reports failure
// as false and leaves the message to the reference parser.
type decoder struct {
	data []byte
	pos  int
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) consume(c byte) bool {
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

func (d *decoder) literal(word string) bool {
	if len(d.data)-d.pos >= len(word) && string(d.data[d.pos:d.pos+len(word)]) == word {
		d.pos += len(word)
		return true
	}
	return false
}

func (d *decoder) key() (string, bool) {
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		return "", false
	}
	return d.str()
}

func (d *decoder) stringValue() (string, bool) {
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		return "", false
	}
	return d.str()
}

func (d *decoder) objectValue(depth int) (map[string]any, bool) {
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return nil, false
	}
	return d.object(depth + 1)
}

// meta decodes the meta object into m: "hook", "invocation" and "tenant"
// must be strings when present; other fields are checked and ignored.
func (d *decoder) meta(m *Meta) bool {
	if !d.consume('{') {
		return false
	}
	const depth = 2
	var (
		seen   int
		others []string
	)
	d.skipSpace()
	if d.consume('}') {
		return true
	}
	for {
		d.skipSpace()
		key, ok := d.key()
		if !ok {
			return false
		}
		var dst *string
		bit := 0
		switch key {
		case "hook":
			dst, bit = &m.Hook, 1
		case "invocation":
			dst, bit = &m.Invocation, 2
		case "tenant":
			dst, bit = &m.Tenant, 4
		default:
			if slices.Contains(others, key) {
				return false
			}
			others = append(others, key)
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		d.skipSpace()
		if !d.consume(':') {
			return false
		}
		d.skipSpace()
		if dst != nil {
			if *dst, ok = d.stringValue(); !ok {
				return false
			}
		} else if _, ok := d.value(depth); !ok {
			return false
		}
		d.skipSpace()
		if d.consume(',') {
			continue
		}
		return d.consume('}')
	}
}

// value decodes any value, as abi.ParseJSON would return it, nested in
// depth levels of arrays and objects.
func (d *decoder) value(depth int) (any, bool) {
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		m, ok := d.object(depth + 1)
		return m, ok
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == '-' || (c >= '0' && c <= '9'):
		lit, ok := d.numberLiteral()
		return json.Number(lit), ok
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *decoder) object(depth int) (map[string]any, bool) {
	if depth > maxDecodeDepth {
		return nil, false
	}
	d.pos++ // {
	m := make(map[string]any)
	d.skipSpace()
	if d.consume('}') {
		return m, true
	}
	for {
		d.skipSpace()
		k, ok := d.key()
		if !ok {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		d.skipSpace()
		if !d.consume(':') {
			return nil, false
		}
		d.skipSpace()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		d.skipSpace()
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			return m, true
		}
		return nil, false
	}
}

func (d *decoder) array(depth int) (any, bool) {
	if depth > maxDecodeDepth {
		return nil, false
	}
	d.pos++ // [
	a := make([]any, 0, 4)
	d.skipSpace()
	if d.consume(']') {
		return a, true
	}
	for {
		d.skipSpace()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.skipSpace()
		if d.consume(',') {
			continue
		}
		if d.consume(']') {
			return a, true
		}
		return nil, false
	}
}

// SWAR constants: each has one byte value in every byte of a word.
const (
	lsb      = 0x0101010101010101
	msb      = 0x8080808080808080
	quotes   = lsb * '"'
	slashes  = lsb * '\\'
	controls = lsb * 0x20
)

// plain reports whether none of the 8 bytes of w needs attention in a JSON
// string: no quote, no backslash, no control character and nothing above
// ASCII. (Each test is exact for "some byte matches", which is all it is
// used for.)
func plain(w uint64) bool {
	q, s := w^quotes, w^slashes
	return ((q-lsb)&^q|(s-lsb)&^s|(w-controls)&^w|w)&msb == 0
}

// str decodes the string at d.pos (its opening quote). Without escapes the
// result is a view of d.data; with escapes it is a fresh string.
func (d *decoder) str() (string, bool) {
	start := d.pos + 1
	i := start
	ascii := true
	data := d.data
	for {
		for i+8 <= len(data) && plain(load64(data, i)) {
			i += 8
		}
		if i >= len(data) {
			return "", false
		}
		c := data[i]
		switch {
		case c == '"':
			s := data[start:i]
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			d.pos = i + 1
			return view(s), true
		case c == '\\':
			d.pos = i
			return d.unescape(start, ascii)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		i++
	}
}

// unescape finishes a string that has an escape at d.pos; start is where its
// content begins.
func (d *decoder) unescape(start int, ascii bool) (string, bool) {
	data := d.data
	buf := make([]byte, d.pos-start, len(data)-start)
	copy(buf, data[start:d.pos])
	i := d.pos
	for {
		if i >= len(data) {
			return "", false
		}
		c := data[i]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(buf) {
				return "", false
			}
			d.pos = i + 1
			return view(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			if c >= utf8.RuneSelf {
				ascii = false
			}
			buf = append(buf, c)
			i++
			continue
		}
		if i+1 >= len(data) {
			return "", false
		}
		e := data[i+1]
		i += 2
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
			r, ok := hex4(data, i)
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || i+1 >= len(data) || data[i] != '\\' || data[i+1] != 'u' {
					return "", false
				}
				r2, ok := hex4(data, i+2)
				if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
					return "", false
				}
				i += 6
				r = utf16.DecodeRune(r, r2)
			}
			// Escapes decode to valid UTF-8; the check at the end
			// only concerns raw bytes.
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
}

func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// numberLiteral scans a number with abi.ParseJSON's rules and returns its
// literal, a view of d.data.
func (d *decoder) numberLiteral() (string, bool) {
	data := d.data
	start, i := d.pos, d.pos
	if i < len(data) && data[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
			n++
		}
		return n
	}
	intDigits := 1
	if i < len(data) && data[i] == '0' {
		i++
		if i < len(data) && data[i] >= '0' && data[i] <= '9' {
			return "", false // leading zero
		}
	} else if intDigits = digits(); intDigits == 0 {
		return "", false
	}
	integer := true
	if i < len(data) && data[i] == '.' {
		integer = false
		i++
		if digits() == 0 {
			return "", false
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		integer = false
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if digits() == 0 {
			return "", false
		}
	}
	lit := view(data[start:i])
	if len(lit) > 128 {
		return "", false
	}
	// An integer of at most 15 digits is within ±(2^53-1) and finite:
	// only other numbers need the float range checks.
	if !integer || intDigits > 15 {
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil && f != 0 { // an underflow to zero is accepted
			return "", false
		}
		if math.IsInf(f, 0) || (integer && math.Abs(f) > 1<<53-1) {
			return "", false
		}
	}
	d.pos = i
	return lit, true
}

// view returns b as a string without copying. b must never change.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// load64 reads 8 bytes of b at i (i+8 <= len(b)) in little-endian order.
func load64(b []byte, i int) uint64 {
	b = b[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// maxEncodeDepth bounds the nesting the fast encoder follows; deeper values
// (and cycles) are left to encoding/json, which detects cycles.
const maxEncodeDepth = 500

// appendDecision appends the canonical encoding of d at point to b, byte for
// byte what abi.Decision.Encode writes for d.canonical(point). ok is false
// when a context value has a type the fast encoder does not handle (or is
// invalid, as NaN is); the caller then encodes with encoding/json, which
// also reports the error.
func appendDecision(b []byte, d Decision, point string) (out []byte, ok bool, err error) {
	action := d.action
	if action == "" {
		action = abi.ActionContinue
	}
	b = append(b, `{"action":`...)
	b = appendString(b, string(action))
	if action == abi.ActionModify {
		if d.primary {
			p, _ := abi.LookupPoint(point)
			if p.Primary == "" {
				_, err := d.canonical(point) // the same error
				return nil, false, err
			}
			b = append(b, `,"context":{`...)
			b = appendString(b, p.Primary)
			b = append(b, ':')
			if b, ok = appendValue(b, d.primaryValue, 1); !ok {
				return nil, false, nil
			}
			b = append(b, '}')
		} else if len(d.fields) > 0 {
			b = append(b, `,"context":`...)
			if b, ok = appendObject(b, d.fields, 1); !ok {
				return nil, false, nil
			}
		}
	}
	if d.reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, d.reason)
	}
	if d.userMessage != "" {
		b = append(b, `,"user_message":`...)
		b = appendString(b, d.userMessage)
	}
	if d.doNotReplyAgain {
		b = append(b, `,"do_not_reply_again":true`...)
	}
	return append(b, '}'), true, nil
}

// The encoders below are abi's reflection-free encoder (abi.AppendJSON), so
// the host and the guest write the same bytes from one implementation.

func appendString(b []byte, s string) []byte {
	out, _ := abi.AppendJSON(b, s) // a string always encodes
	return out
}

func appendValue(b []byte, v any, _ int) ([]byte, bool) { return abi.AppendJSON(b, v) }

func appendObject(b []byte, m map[string]any, _ int) ([]byte, bool) { return abi.AppendJSON(b, m) }
