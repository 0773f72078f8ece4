package abi

// An encoder without encoding/json's reflective walk (reflect only reads an
// integer of any width) for the documents the host and the SDK write on
// every invocation (the invocation document, the canonical decision). It
// writes exactly what Marshal (encoding/json, without HTML escaping) writes,
// for the types strict JSON decodes to and the common Go types; for any
// other type it reports false and the caller uses Marshal. append_test.go
// holds the two to the same bytes. See RATIONALE.md#why-a-hand-written-codec-in-the-sdk.

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"
)

// maxAppendDepth bounds the nesting AppendJSON follows; deeper values (and
// cycles) are left to Marshal, which detects cycles.
const maxAppendDepth = 500

// AppendJSON appends the encoding of v to dst, byte for byte what Marshal
// writes. ok is false (and the result must be discarded) when v holds a type
// AppendJSON does not handle, or a value Marshal refuses (NaN, an invalid
// json.Number, a cycle): the caller then uses Marshal, which encodes it or
// says why it cannot.
func AppendJSON(dst []byte, v any) (out []byte, ok bool) {
	return appendValue(dst, v, 1)
}

// AppendTo appends the invocation document to dst, byte for byte what Encode
// returns; ok is false when Context or Settings hold a value AppendJSON does
// not handle (use Encode).
func (inv *Invocation) AppendTo(dst []byte) (out []byte, ok bool) {
	return inv.AppendObjects(dst, Object{}, Object{})
}

// AppendObjects is AppendTo with context and settings standing for Context
// and Settings where those are nil: the objects' bytes are copied as they
// are, not encoded again, and are what AppendTo writes for the maps they
// were made from.
func (inv *Invocation) AppendObjects(dst []byte, context, settings Object) (out []byte, ok bool) {
	b := inv.appendHead(dst)
	for _, f := range [...]struct {
		name string
		m    map[string]any
		o    *Object
	}{{`,"context":`, inv.Context, &context}, {`,"settings":`, inv.Settings, &settings}} {
		b = append(b, f.name...)
		switch {
		case f.m == nil:
			b = append(b, f.o.Bytes()...)
		case len(f.m) == 0:
			b = append(b, "{}"...)
		default:
			if b, ok = appendObject(b, f.m, 2); !ok {
				return nil, false
			}
		}
	}
	return inv.appendMeta(b), true
}

// appendHead appends the document up to its point.
func (inv *Invocation) appendHead(dst []byte) []byte {
	abi := inv.ABI
	if abi == 0 {
		abi = Major
	}
	b := append(dst, `{"abi":`...)
	b = strconv.AppendInt(b, int64(abi), 10)
	b = append(b, `,"point":`...)
	return appendString(b, inv.Point)
}

// appendMeta appends the document's meta and its end.
func (inv *Invocation) appendMeta(b []byte) []byte {
	b = append(b, `,"meta":{"hook":`...)
	b = appendString(b, inv.Meta.Hook)
	b = append(b, `,"invocation":`...)
	b = appendString(b, inv.Meta.Invocation)
	b = append(b, `,"tenant":`...)
	b = appendString(b, inv.Meta.Tenant)
	return append(b, "}}"...)
}

// appendValue is AppendJSON at nesting depth.
func appendValue(b []byte, v any, depth int) ([]byte, bool) {
	if depth > maxAppendDepth {
		return nil, false
	}
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendString(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case json.Number:
		s := string(v)
		if s == "" {
			s = "0"
		}
		if !isValidNumber(s) {
			return nil, false
		}
		return append(b, s...), true
	case float64:
		return appendFloat(b, v)
	case int, int8, int16, int32, int64:
		return strconv.AppendInt(b, reflect.ValueOf(v).Int(), 10), true
	case uint, uint16, uint32, uint64:
		return strconv.AppendUint(b, reflect.ValueOf(v).Uint(), 10), true
	case map[string]any:
		return appendObject(b, v, depth+1)
	case []any:
		return appendList(b, v, func(b []byte, e any) ([]byte, bool) { return appendValue(b, e, depth+1) })
	case []string:
		return appendList(b, v, appendStringValue)
	case map[string]string:
		return appendMap(b, v, appendStringValue)
	}
	// uint8 is left out on purpose: []uint8 is base64 in encoding/json,
	// and keeping the two apart is not worth a special case.
	return nil, false
}

// appendObject appends m with its keys sorted, its values at depth.
func appendObject(b []byte, m map[string]any, depth int) ([]byte, bool) {
	return appendMap(b, m, func(b []byte, v any) ([]byte, bool) { return appendValue(b, v, depth) })
}

// appendMap appends m as an object with its keys sorted, each value by
// value; a nil map is null.
func appendMap[V any](b []byte, m map[string]V, value func([]byte, V) ([]byte, bool)) ([]byte, bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	b = append(b, '{')
	ok := true
	if len(m) == 1 { // one key: nothing to sort
		for k, v := range m {
			b, ok = appendMember(b, k, v, value)
		}
	} else {
		var buf [8]string // most objects have few keys: sort them on the stack
		for i, k := range appendSortedKeys(buf[:0], m) {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendMember(b, k, m[k], value); !ok {
				break
			}
		}
	}
	if !ok {
		return nil, false
	}
	return append(b, '}'), true
}

// appendMember appends "k":v, v by value.
func appendMember[V any](b []byte, k string, v V, value func([]byte, V) ([]byte, bool)) ([]byte, bool) {
	b = appendString(b, k)
	b = append(b, ':')
	return value(b, v)
}

// appendList appends list as an array, each element by elem; a nil list is
// null.
func appendList[E any](b []byte, list []E, elem func([]byte, E) ([]byte, bool)) ([]byte, bool) {
	if list == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, e := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = elem(b, e); !ok {
			return nil, false
		}
	}
	return append(b, ']'), true
}

// appendStringValue is appendString for appendList and appendMap.
func appendStringValue(b []byte, s string) ([]byte, bool) { return appendString(b, s), true }

func sortedMapKeys[V any](m map[string]V) []string {
	return appendSortedKeys(make([]string, 0, len(m)), m)
}

// appendSortedKeys appends m's keys to keys, sorted byte-wise, as
// encoding/json sorts them.
func appendSortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendFloat is encoding/json's float64 encoding (ES6 number to string).
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

const hexDigits = "0123456789abcdef"

// appendString is encoding/json's string encoding without HTML escaping:
// '"', '\\' and control characters escaped (\b \f \n \r \t short), invalid
// UTF-8 replaced by \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start, i := 0, 0
	for i < len(s) {
		// 32 bytes at a time while none needs a look (one branch per
		// block; a branch is dear in wasm), then 8.
		for i+32 <= len(s) && plainBits(load64s(s, i))|plainBits(load64s(s, i+8))|
			plainBits(load64s(s, i+16))|plainBits(load64s(s, i+24)) == 0 {
			i += 32
		}
		if i+8 <= len(s) && plain(load64s(s, i)) {
			i += 8
			continue
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func load64s(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// isValidNumber is encoding/json's check of a json.Number literal.
func isValidNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	default:
		return false
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}

// SWAR constants: each has one byte value in every byte of a word.
const (
	lsb      = 0x0101010101010101
	msb      = 0x8080808080808080
	quotes   = lsb * '"'
	slashes  = lsb * '\\'
	controls = lsb * 0x20
)

// plain reports whether none of the 8 bytes of w needs escaping in a JSON
// string: no quote, no backslash, no control character and nothing above
// ASCII.
func plain(w uint64) bool { return plainBits(w) == 0 }

// plainBits is 0 when plain(w), and has a high bit set otherwise.
func plainBits(w uint64) uint64 {
	q, s := w^quotes, w^slashes
	return ((q-lsb)&^q | (s-lsb)&^s | (w-controls)&^w | w) & msb
}
