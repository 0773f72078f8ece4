package abi

// The one strict JSON lexer. ParseJSON, the decision fast path and the Go
// SDK's invocation decoder are all built on it, so there is one definition
// of whitespace, literals, strings (escapes, surrogates, UTF-8, control
// characters), the number grammar and ranges, duplicate keys and depth. See
// RATIONALE.md#one-strict-json-lexer.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Lexer reads one strict JSON document in place, token by token, without
// copying: strings and numbers come back as Spans of the document, decoded
// only when asked. The zero value reads an empty document; Reset starts a
// document.
//
// Every method that reads a token checks it against ParseJSON's rules and
// reports a problem as false; Err then says what and where, worded as
// ParseJSON words it. Methods that only test (Consume, Literal, Peek)
// record nothing. A Lexer is not safe for concurrent use.
type Lexer struct {
	data     []byte
	pos      int
	maxDepth int
	alias    bool
	err      *JSONError
	// keys holds the keys of the objects Skip is inside, for duplicate
	// detection (see KeySet); scratch decodes escaped keys to compare.
	keys    []Span
	scratch [2][]byte
}

// Span is a string or number token the Lexer has checked. For a string,
// Start and End bound its content between the quotes; for a number, its
// literal.
type Span struct {
	Start, End int
	// size is the length of the decoded string.
	size int
	// escaped says whether the content holds escapes to decode.
	escaped bool
}

// Escaped reports whether the string holds escapes, so that its decoded
// text differs from its bytes in the document.
func (s Span) Escaped() bool { return s.escaped }

// Len returns the length of the decoded string, in bytes.
func (s Span) Len() int { return s.size }

// Reset starts reading data, with nesting bounded by maxDepth (zero or less
// means DefaultMaxJSONDepth). Scratch space is kept.
func (l *Lexer) Reset(data []byte, maxDepth int) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxJSONDepth
	}
	l.data, l.pos, l.maxDepth, l.err = data, 0, maxDepth, nil
	l.keys = l.keys[:0]
}

// KeySpace gives the Lexer room for the keys it holds to find duplicates
// (Skip, KeySet), so that a small document costs it no allocation.
func (l *Lexer) KeySpace(keys []Span) { l.keys = keys[:0] }

// AliasStrings makes Value and Text return strings and numbers that share
// the document's memory instead of copies: no copy is made, and the
// document must never be modified afterwards.
func (l *Lexer) AliasStrings(on bool) { l.alias = on }

// Pos returns the offset of the next byte to read.
func (l *Lexer) Pos() int { return l.pos }

// Seek moves to offset pos of the document, where a value the Lexer
// has read before starts.
func (l *Lexer) Seek(pos int) { l.pos = min(max(pos, 0), len(l.data)) }

// AtEnd reports whether the whole document has been read.
func (l *Lexer) AtEnd() bool { return l.pos >= len(l.data) }

// Err returns the first problem a read reported, as a *JSONError, or nil.
func (l *Lexer) Err() error {
	if l.err == nil {
		return nil
	}
	return l.err
}

// fail records a problem at offset off (the first one wins) and returns
// false. It formats only when called, so the accepting path never does.
func (l *Lexer) fail(off int, format string, args ...any) bool {
	if l.err == nil {
		l.err = &JSONError{Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	return false
}

// SkipSpace moves past JSON whitespace.
func (l *Lexer) SkipSpace() {
	for l.pos < len(l.data) {
		switch l.data[l.pos] {
		case ' ', '\t', '\n', '\r':
			l.pos++
		default:
			return
		}
	}
}

// Peek returns the next byte, or 0 at the end.
func (l *Lexer) Peek() byte {
	if l.pos < len(l.data) {
		return l.data[l.pos]
	}
	return 0
}

// Consume moves past c if it is the next byte.
func (l *Lexer) Consume(c byte) bool {
	if l.pos < len(l.data) && l.data[l.pos] == c {
		l.pos++
		return true
	}
	return false
}

// ConsumeString moves past s if it comes next, byte for byte.
func (l *Lexer) ConsumeString(s string) bool {
	if len(l.data)-l.pos >= len(s) && string(l.data[l.pos:l.pos+len(s)]) == s {
		l.pos += len(s)
		return true
	}
	return false
}

// Literal moves past word (true, false or null) if it comes next.
func (l *Lexer) Literal(word string) bool { return l.ConsumeString(word) }

// literal reads word, which the next byte announces.
func (l *Lexer) literal(word string) bool {
	return l.Literal(word) || l.fail(l.pos, "invalid literal, expected %s", word)
}

// special (plain's counterpart in append.go, on the same SWAR constants)
// returns the high bit of each of the 8 bytes of w (in
// little-endian order) that is a quote, a backslash or a control character,
// or 0 if none is. The lowest bit set is exact; bits above it may not be
// (a borrow carries into the next byte), so only the lowest is used.
func special(w uint64) uint64 {
	q, b := w^quotes, w^slashes
	return ((q-lsb)&^q | (b-lsb)&^b | (w-controls)&^w) & msb
}

// String reads the string whose opening quote is next and returns its span.
func (l *Lexer) String() (Span, bool) {
	data := l.data
	if l.pos >= len(data) || data[l.pos] != '"' {
		return Span{}, l.fail(l.pos, "expected a string")
	}
	start := l.pos + 1
	sp := Span{Start: start}
	// high gathers the bytes' high bits, and some after the string's
	// end: a bit set only costs a UTF-8 check.
	var high uint64
	saved := 0 // how much shorter the escapes decode
	for i := start; ; {
		// Skip 8 bytes at a time to the next byte that needs a look,
		// and after the first clean word 32 at a time while none does
		// (a branch costs more than the arithmetic, above all in wasm;
		// short strings end in their first words).
		for wide := true; i+8 <= len(data); wide = false {
			w := binary.LittleEndian.Uint64(data[i:])
			high |= w
			if m := special(w); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
			for wide && i+32 <= len(data) {
				b := data[i : i+32 : i+32]
				w0, w1 := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
				w2, w3 := binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])
				if special(w0)|special(w1)|special(w2)|special(w3) != 0 {
					break
				}
				high |= w0 | w1 | w2 | w3
				i += 32
			}
		}
		if i >= len(data) {
			l.pos = len(data)
			return Span{}, l.fail(len(data), "unterminated string")
		}
		switch c := data[i]; {
		case c == '"':
			// Escapes decode to whole UTF-8 sequences that start
			// with no continuation byte, so the decoded string is
			// valid UTF-8 exactly when the raw bytes are.
			if high&msb != 0 && !utf8.Valid(data[start:i]) {
				return Span{}, l.invalidUTF8(start)
			}
			sp.End = i
			sp.size = i - start - saved
			l.pos = i + 1
			return sp, true
		case c == '\\':
			raw, size, ok := l.escape(i)
			if !ok {
				return Span{}, false
			}
			sp.escaped = true
			saved += raw - size
			i += raw
		case c < 0x20:
			l.pos = i
			return Span{}, l.fail(i, "control character 0x%02x in string", c)
		default:
			high |= uint64(c)
			i++
		}
	}
}

func (l *Lexer) invalidUTF8(start int) bool {
	s := l.data[start:]
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return l.fail(start+i, "invalid UTF-8 in string")
		}
		i += n
	}
	return l.fail(start, "invalid UTF-8 in string")
}

// escape checks the escape whose backslash is at data[i] and returns its
// length in the document and decoded.
func (l *Lexer) escape(i int) (raw, size int, ok bool) {
	data := l.data
	if i+1 >= len(data) {
		return 0, 0, l.fail(i, "unterminated escape")
	}
	switch data[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, 1, true
	case 'u':
	default:
		return 0, 0, l.fail(i, "invalid escape %q", data[i:i+2])
	}
	r, ok := l.hex4(i + 2)
	if !ok {
		return 0, 0, false
	}
	if !utf16.IsSurrogate(r) {
		return 6, utf8.RuneLen(r), true
	}
	// A high surrogate followed by an escaped low one; a lone
	// surrogate is refused.
	if r >= 0xDC00 {
		return 0, 0, l.fail(i, "lone low surrogate \\u%04X", r)
	}
	if i+7 >= len(data) || data[i+6] != '\\' || data[i+7] != 'u' {
		return 0, 0, l.fail(i, "lone high surrogate \\u%04X", r)
	}
	r2, ok := l.hex4(i + 8)
	if !ok {
		return 0, 0, false
	}
	if r2 < 0xDC00 || r2 > 0xDFFF {
		return 0, 0, l.fail(i, "high surrogate \\u%04X not followed by a low surrogate", r)
	}
	return 12, 4, true
}

// hex4 decodes the four hex digits of a \u escape at data[i:].
func (l *Lexer) hex4(i int) (rune, bool) {
	r, bad := hexRune(l.data, i)
	switch {
	case bad < 0:
		return r, true
	case bad >= len(l.data):
		return 0, l.fail(i, "truncated \\u escape")
	}
	return 0, l.fail(bad, "invalid hex digit %q in \\u escape", l.data[bad])
}

// hexRune decodes the four hex digits at data[i:]. bad is -1, or the
// offset of the first byte that is not a hex digit (len(data) if the
// digits are cut short).
func hexRune(data []byte, i int) (r rune, bad int) {
	if i+4 > len(data) {
		return 0, len(data)
	}
	for j, c := range data[i : i+4] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, i + j
		}
		r = r<<4 | rune(v)
	}
	return r, -1
}

// Bytes returns the span's bytes in the document (a string's raw content,
// escapes undecoded; a number's literal).
func (l *Lexer) Bytes(s Span) []byte { return l.data[s.Start:s.End] }

// AppendText appends the decoded content of string span s to b.
func (l *Lexer) AppendText(b []byte, s Span) []byte {
	raw := l.data[s.Start:s.End]
	if !s.escaped {
		return append(b, raw...)
	}
	for {
		i := bytes.IndexByte(raw, '\\')
		if i < 0 {
			return append(b, raw...)
		}
		b = append(b, raw[:i]...)
		switch e := raw[i+1]; e {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, _ := hexRune(raw, i+2)
			if utf16.IsSurrogate(r) {
				r2, _ := hexRune(raw, i+8)
				r = utf16.DecodeRune(r, r2)
				i += 6
			}
			b = utf8.AppendRune(b, r)
			i += 4
		default: // '"', '\\', '/'
			b = append(b, e)
		}
		raw = raw[i+2:]
	}
}

// Text returns the decoded string of span s: a copy, or with AliasStrings
// a view of the document when s holds no escapes.
func (l *Lexer) Text(s Span) string {
	if !s.escaped {
		if l.alias {
			return view(l.data[s.Start:s.End])
		}
		return string(l.data[s.Start:s.End])
	}
	return view(l.AppendText(make([]byte, 0, s.size), s))
}

// Equal reports whether string span s decodes to str.
func (l *Lexer) Equal(s Span, str string) bool {
	if s.size != len(str) {
		return false
	}
	if !s.escaped {
		return string(l.data[s.Start:s.End]) == str
	}
	return l.equalEscaped(s, str)
}

func (l *Lexer) equalEscaped(s Span, str string) bool {
	l.scratch[0] = l.AppendText(l.scratch[0][:0], s)
	return string(l.scratch[0]) == str
}

// same reports whether string spans a and b decode to the same string.
func (l *Lexer) same(a, b Span) bool {
	if a.size != b.size {
		return false
	}
	if !a.escaped && !b.escaped {
		return bytes.Equal(l.data[a.Start:a.End], l.data[b.Start:b.End])
	}
	l.scratch[0] = l.AppendText(l.scratch[0][:0], a)
	l.scratch[1] = l.AppendText(l.scratch[1][:0], b)
	return bytes.Equal(l.scratch[0], l.scratch[1])
}

// view returns b as a string without copying; b must never change.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Number reads the number that starts next and returns its literal's span.
// Beyond the grammar it refuses a literal over 128 bytes, a number that
// overflows float64 and an integer beyond ±(2^53-1).
func (l *Lexer) Number() (Span, bool) {
	d := l.data
	start, i := l.pos, l.pos
	if i < len(d) && d[i] == '-' {
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
	intDigits := 1
	if i < len(d) && d[i] == '0' {
		i++
		if i < len(d) && d[i] >= '0' && d[i] <= '9' {
			l.pos = i
			return Span{}, l.fail(i, "leading zero in number")
		}
	} else if intDigits = digits(); intDigits == 0 {
		l.pos = i
		return Span{}, l.fail(i, "invalid number")
	}
	integer := true
	if i < len(d) && d[i] == '.' {
		integer = false
		i++
		if digits() == 0 {
			l.pos = i
			return Span{}, l.fail(i, "invalid number: no digits after '.'")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		integer = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			l.pos = i
			return Span{}, l.fail(i, "invalid number: no digits in exponent")
		}
	}
	lit := d[start:i]
	if len(lit) > maxNumberBytes {
		return Span{}, l.fail(start, "number literal longer than %d bytes", maxNumberBytes)
	}
	// An integer of at most 15 digits is within ±(2^53-1) and finite:
	// only other numbers need the float range checks.
	if !integer || intDigits > 15 {
		f, err := strconv.ParseFloat(view(lit), 64)
		if (err != nil && !isUnderflow(f)) || math.IsInf(f, 0) {
			return Span{}, l.fail(start, "number %s is out of range", lit)
		}
		if integer && math.Abs(f) > maxSafeInteger {
			return Span{}, l.fail(start, "integer %s is beyond ±(2^53-1)", lit)
		}
	}
	l.pos = i
	return Span{Start: start, End: i, size: i - start}, true
}

// isUnderflow reports whether a ParseFloat range error was an underflow to
// zero (1e-400), which is harmless, rather than an overflow.
func isUnderflow(f float64) bool { return f == 0 }

// KeySet finds duplicate keys in one object: get one from Keys when the
// object starts, Add each key, and Drop it when the object ends (objects
// nested inside take theirs in between).
type KeySet struct {
	mark int
	// set takes over from the linear search in a large object.
	set map[string]struct{}
}

// keySetLinear is the number of keys an object's KeySet compares one by
// one before it builds a map.
const keySetLinear = 16

// Keys starts the key set of an object.
func (l *Lexer) Keys() KeySet { return KeySet{mark: len(l.keys)} }

// Drop ends key set k, and those of the objects nested in it.
func (l *Lexer) Drop(k KeySet) { l.keys = l.keys[:k.mark] }

// Add records key in k, and reports a duplicate (at the key) as false.
func (l *Lexer) Add(k *KeySet, key Span) bool {
	if k.set != nil {
		s := l.Text(key)
		if _, dup := k.set[s]; dup {
			return l.duplicate(key)
		}
		k.set[s] = struct{}{}
		return true
	}
	for _, prev := range l.keys[k.mark:] {
		if l.same(prev, key) {
			return l.duplicate(key)
		}
	}
	if len(l.keys)-k.mark < keySetLinear {
		l.keys = append(l.keys, key)
		return true
	}
	k.set = make(map[string]struct{}, 2*keySetLinear)
	for _, prev := range l.keys[k.mark:] {
		k.set[l.Text(prev)] = struct{}{}
	}
	k.set[l.Text(key)] = struct{}{}
	return true
}

func (l *Lexer) duplicate(key Span) bool {
	return l.fail(key.Start-1, "duplicate key %q", l.Text(key))
}

// Skip reads one value, nested in depth levels of arrays and objects,
// checking it as Value would without building it.
func (l *Lexer) Skip(depth int) bool {
	switch c := l.Peek(); {
	case c == '{':
		return l.object(depth+1, nil)
	case c == '[':
		return l.array(depth+1, nil)
	case c == '"':
		_, ok := l.String()
		return ok
	}
	return l.scalar(nil)
}

// Value reads one value, nested in depth levels of arrays and objects
// (the top level is 0), and returns it as ParseJSON does:
// map[string]any, []any, string, json.Number, bool or nil.
func (l *Lexer) Value(depth int) (any, bool) {
	switch c := l.Peek(); {
	case c == '{':
		m := make(map[string]any)
		return m, l.object(depth+1, m)
	case c == '[':
		a := make([]any, 0, 4)
		ok := l.array(depth+1, &a)
		return a, ok
	case c == '"':
		s, ok := l.String()
		if !ok {
			return nil, false
		}
		return l.Text(s), true
	}
	var v any
	return v, l.scalar(&v)
}

// scalar reads a number or literal into *v (v nil: only checks it).
func (l *Lexer) scalar(v *any) bool {
	var val any
	switch c := l.Peek(); {
	case l.pos >= len(l.data):
		return l.fail(l.pos, "unexpected end of document")
	case c == '-' || (c >= '0' && c <= '9'):
		s, ok := l.Number()
		if !ok {
			return false
		}
		if v != nil {
			if l.alias {
				val = json.Number(view(l.Bytes(s)))
			} else {
				val = json.Number(l.Bytes(s))
			}
		}
	case c == 't':
		val = true
		if !l.literal("true") {
			return false
		}
	case c == 'f':
		val = false
		if !l.literal("false") {
			return false
		}
	case c == 'n':
		if !l.literal("null") {
			return false
		}
	default:
		return l.fail(l.pos, "unexpected character %q", c)
	}
	if v != nil {
		*v = val
	}
	return true
}

// object reads an object at depth into m, or only checks it if m is nil.
func (l *Lexer) object(depth int, m map[string]any) bool {
	if depth > l.maxDepth {
		return l.fail(l.pos, "nesting deeper than %d", l.maxDepth)
	}
	l.pos++ // {
	l.SkipSpace()
	if l.Consume('}') {
		return true
	}
	var keys KeySet // (dropped when the object ends; after a failure the read is over)
	if m == nil {
		keys = l.Keys()
	}
	for {
		key, ok := l.Key()
		if !ok {
			return false
		}
		var k string
		if m == nil {
			ok = l.Add(&keys, key)
		} else if k = l.Text(key); hasKey(m, k) {
			ok = l.duplicate(key)
		}
		if !ok {
			return false
		}
		v, ok := l.element(depth, m != nil)
		if !ok {
			return false
		}
		if m != nil {
			m[k] = v
		}
		if more, ok := l.next('}', "object"); !more {
			if m == nil {
				l.Drop(keys)
			}
			return ok
		}
	}
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// Key reads the key of an object's member and the colon after it.
// Duplicates are the caller's to find (see KeySet).
func (l *Lexer) Key() (Span, bool) {
	l.SkipSpace()
	if l.Peek() != '"' {
		return Span{}, l.fail(l.pos, "expected a string key")
	}
	key, ok := l.String()
	if !ok {
		return Span{}, false
	}
	l.SkipSpace()
	if !l.Consume(':') {
		return Span{}, l.fail(l.pos, "expected ':' after key")
	}
	l.SkipSpace()
	return key, true
}

// element reads the value of an array element or object member at depth,
// built if build is set, only checked otherwise.
func (l *Lexer) element(depth int, build bool) (any, bool) {
	if !build {
		return nil, l.Skip(depth)
	}
	return l.Value(depth)
}

// array reads an array at depth into *a, or only checks it if a is nil.
func (l *Lexer) array(depth int, a *[]any) bool {
	if depth > l.maxDepth {
		return l.fail(l.pos, "nesting deeper than %d", l.maxDepth)
	}
	l.pos++ // [
	l.SkipSpace()
	if l.Consume(']') {
		return true
	}
	for {
		l.SkipSpace()
		v, ok := l.element(depth, a != nil)
		if !ok {
			return false
		}
		if a != nil {
			*a = append(*a, v)
		}
		if more, ok := l.next(']', "array"); !more {
			return ok
		}
	}
}

// next moves past the ',' that announces another element of the object or
// array being read (more), or past its closing byte (not more, ok).
func (l *Lexer) next(closing byte, in string) (more, ok bool) {
	l.SkipSpace()
	switch {
	case l.Consume(','):
		return true, true
	case l.Consume(closing):
		return false, true
	case l.AtEnd():
		return false, l.fail(l.pos, "unexpected end of document in %s", in)
	}
	return false, l.fail(l.pos, "expected ',' or '%c' in %s", closing, in)
}
