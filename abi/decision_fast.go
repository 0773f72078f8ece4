package abi

// The fast path of DecodeDecision, for the canonical decision, the shape
// nearly every hook returns. A scanner checks the document in one pass
// without building the generic document tree; then the strings the decision
// keeps are copied (or unescaped) into one allocation and sliced from it.
// The action word and the context keys are the package's and the point's
// own strings, never copies.
//
// It is an optimisation only. It accepts a document only if the tree path
// (decodeDecisionTree) accepts it too, and then returns the same decision;
// for anything else (another shape, a duplicate key, an escaped key, a
// document the tree path refuses, a limit it would hit) it says "not
// handled" and DecodeDecision takes the tree path, which decides and words
// any error. FuzzDecodeDecisionFast holds the two paths to that.

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// maxFastFields bounds the fields of a "context" the fast path decodes; a
// point changes at most two today.
const maxFastFields = 8

// The top-level keys of the canonical decision, as bits.
const (
	keyAction = 1 << iota
	keyContext
	keyReason
	keyUserMessage
	keyDoNotReplyAgain
)

// span is a JSON string the scanner has checked: its content, between the
// quotes, is data[start:end].
type span struct {
	start, end int
	// size is the length of the decoded string.
	size int
	// escaped says whether the content holds escapes to decode.
	escaped bool
}

// fastField is one field of the decision's "context".
type fastField struct {
	key string // the point's own string, not a copy
	// The value is str if isString, otherwise value.
	str      span
	isString bool
	value    any
}

// decodeDecisionFast decodes data if it is a canonical decision (the keys
// action, context, reason, user_message and do_not_reply_again, nothing
// else) that decodeDecisionTree accepts for point within lim, and returns
// the same decision. ok is false for anything else, valid or not.
func decodeDecisionFast(data []byte, point Point, lim JSONLimits) (d *Decision, ok bool) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return nil, false
	}
	var (
		s           = scanner{data: data}
		seen        int
		action      Action
		reason      span
		userMessage span
		dnra        bool
		fields      [maxFastFields]fastField
		nfields     int
	)
	s.skipSpace()
	if !s.consume('{') {
		return nil, false
	}
	for {
		s.skipSpace()
		key, ok := s.plainString()
		if !ok {
			return nil, false
		}
		bit := 0
		switch string(key) {
		case "action":
			bit = keyAction
		case "context":
			bit = keyContext
		case "reason":
			bit = keyReason
		case "user_message":
			bit = keyUserMessage
		case "do_not_reply_again":
			bit = keyDoNotReplyAgain
		default:
			// Another shape, a top-level modify or a field the tree path
			// refuses.
			return nil, false
		}
		if seen&bit != 0 {
			return nil, false // a duplicate key
		}
		seen |= bit
		s.skipSpace()
		if !s.consume(':') {
			return nil, false
		}
		s.skipSpace()
		switch bit {
		case keyAction:
			word, ok := s.plainString()
			if !ok {
				return nil, false
			}
			switch string(word) {
			case "continue":
				action = ActionContinue
			case "modify":
				action = ActionModify
			case "block":
				action = ActionBlock
			case "ask":
				action = ActionAsk
			default:
				return nil, false
			}
		case keyContext:
			// The context object is nested two deep.
			if lim.MaxDepth < 2 {
				return nil, false
			}
			if nfields, ok = s.context(point, lim.MaxDepth, &fields); !ok {
				return nil, false
			}
		case keyReason:
			if reason, ok = s.nullableString(); !ok {
				return nil, false
			}
		case keyUserMessage:
			if userMessage, ok = s.nullableString(); !ok {
				return nil, false
			}
		case keyDoNotReplyAgain:
			switch {
			case s.literal("true"):
				dnra = true
			case s.literal("false"), s.literal("null"):
			default:
				return nil, false
			}
		}
		s.skipSpace()
		if s.consume(',') {
			continue
		}
		if !s.consume('}') {
			return nil, false
		}
		break
	}
	s.skipSpace()
	if s.pos != len(data) || seen&keyAction == 0 {
		return nil, false
	}
	// A modify changes at least one field, and the other actions none
	// (an empty "context" is allowed with them, and dropped).
	if (action == ActionModify) != (nfields > 0) {
		return nil, false
	}

	d = &Decision{Action: action, DoNotReplyAgain: dnra, Shape: ShapeCanonical}
	// Every string the decision keeps is a substring of one allocation,
	// sized exactly (so one kept string keeps them all, never the input).
	size := reason.size + userMessage.size
	for _, f := range fields[:nfields] {
		if f.isString {
			size += f.str.size
		}
	}
	buf := make([]byte, 0, size)
	put := func(sp span) (start, end int) {
		start = len(buf)
		if sp.escaped {
			buf = appendUnescaped(buf, data[sp.start:sp.end])
		} else {
			buf = append(buf, data[sp.start:sp.end]...)
		}
		return start, len(buf)
	}
	rs, re := put(reason)
	us, ue := put(userMessage)
	var fs, fe [maxFastFields]int
	for i, f := range fields[:nfields] {
		if f.isString {
			fs[i], fe[i] = put(f.str)
		}
	}
	// buf is never written again, so the string may share its bytes, as
	// strings.Builder.String does. (A Builder costs a write barrier on
	// every write while the GC runs.)
	var all string
	if len(buf) > 0 {
		all = unsafe.String(unsafe.SliceData(buf), len(buf))
	}
	d.Reason = all[rs:re]
	d.UserMessage = all[us:ue]
	if nfields > 0 {
		d.Context = make(map[string]any, nfields)
		for i, f := range fields[:nfields] {
			if f.isString {
				d.Context[f.key] = all[fs[i]:fe[i]]
			} else {
				d.Context[f.key] = f.value
			}
		}
	}
	return d, true
}

// context scans the decision's "context" object into fields, and returns
// how many it holds. Every key must be one of point's changeable fields, and
// appear once.
func (s *scanner) context(point Point, maxDepth int, fields *[maxFastFields]fastField) (int, bool) {
	if !s.consume('{') {
		return 0, false
	}
	s.skipSpace()
	if s.consume('}') {
		return 0, true
	}
	var seen uint64 // by index in point.Changeable
	n := 0
	for {
		s.skipSpace()
		key, ok := s.plainString()
		if !ok {
			return 0, false
		}
		i := changeableIndex(point, key)
		if i < 0 || i >= 64 || seen&(1<<i) != 0 || n == len(fields) {
			return 0, false
		}
		seen |= 1 << i
		f := &fields[n]
		n++
		f.key = point.Changeable[i]
		s.skipSpace()
		if !s.consume(':') {
			return 0, false
		}
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == '"' {
			if f.str, ok = s.string(); !ok {
				return 0, false
			}
			f.isString = true
		} else {
			// Any other value is decoded by the tree parser, at the
			// depth it has in the document (top level 1, context 2),
			// so it is the very value and the same limit.
			p := parser{data: s.data, pos: s.pos, maxDepth: maxDepth}
			v, err := p.value(2)
			if err != nil {
				return 0, false
			}
			f.value = v
			s.pos = p.pos
		}
		s.skipSpace()
		if s.consume(',') {
			continue
		}
		return n, s.consume('}')
	}
}

// changeableIndex returns the index of key in point.Changeable, or -1.
func changeableIndex(point Point, key []byte) int {
	for i, f := range point.Changeable {
		if f == string(key) {
			return i
		}
	}
	return -1
}

// scanner checks strict JSON (ParseJSON's rules) where the document's shape
// is known, without building values. It reports anything it does not accept
// as false, and leaves saying why to the tree parser.
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

func (s *scanner) literal(word string) bool {
	if len(s.data)-s.pos >= len(word) && string(s.data[s.pos:s.pos+len(word)]) == word {
		s.pos += len(word)
		return true
	}
	return false
}

// nullableString scans a string or null (the zero span).
func (s *scanner) nullableString() (span, bool) {
	if s.literal("null") {
		return span{}, true
	}
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return span{}, false
	}
	return s.string()
}

// plainString scans a string without escapes and returns its content, a
// view of the document.
func (s *scanner) plainString() ([]byte, bool) {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return nil, false
	}
	sp, ok := s.string()
	if !ok || sp.escaped {
		return nil, false
	}
	return s.data[sp.start:sp.end], true
}

// special returns the high bit of each of the 8 bytes of w (in
// little-endian order) that is a quote, a backslash or a control character,
// or 0 if none is. The lowest bit set is exact; bits above it may not be
// (a borrow carries into the next byte), so only the lowest is used.
func special(w uint64) uint64 {
	q, b := w^quotes, w^slashes
	return ((q-lsb)&^q | (b-lsb)&^b | (w-controls)&^w) & msb
}

// string checks the string whose opening quote is at s.pos, as
// parser.string would decode it, and moves past it.
func (s *scanner) string() (span, bool) {
	data := s.data
	start := s.pos + 1
	sp := span{start: start}
	// high gathers the bytes' high bits, and some after the string's
	// end: a bit set only costs a UTF-8 check.
	var high uint64
	saved := 0 // how much shorter the escapes decode
	for i := start; ; {
		// Skip 8 bytes at a time to the next byte that needs a look.
		for i+8 <= len(data) {
			w := binary.LittleEndian.Uint64(data[i:])
			high |= w
			if m := special(w); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(data) {
			return span{}, false
		}
		switch c := data[i]; {
		case c == '"':
			// Escapes decode to whole UTF-8 sequences that start
			// with no continuation byte, so the decoded string is
			// valid UTF-8 exactly when the raw bytes are.
			if high&msb != 0 && !utf8.Valid(data[start:i]) {
				return span{}, false
			}
			sp.end = i
			sp.size = i - start - saved
			s.pos = i + 1
			return sp, true
		case c == '\\':
			raw, size, ok := checkEscape(data, i)
			if !ok {
				return span{}, false
			}
			sp.escaped = true
			saved += raw - size
			i += raw
		case c < 0x20:
			return span{}, false
		default:
			high |= uint64(c)
			i++
		}
	}
}

// checkEscape checks the escape whose backslash is at data[i], as
// parser.string would decode it, and returns its length in the document
// and decoded.
func checkEscape(data []byte, i int) (raw, size int, ok bool) {
	if i+1 >= len(data) {
		return 0, 0, false
	}
	switch data[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, 1, true
	case 'u':
	default:
		return 0, 0, false
	}
	r, ok := hexRune(data, i+2)
	if !ok {
		return 0, 0, false
	}
	if !utf16.IsSurrogate(r) {
		return 6, utf8.RuneLen(r), true
	}
	// A high surrogate followed by an escaped low one; a lone
	// surrogate is refused.
	if r >= 0xDC00 || i+7 >= len(data) || data[i+6] != '\\' || data[i+7] != 'u' {
		return 0, 0, false
	}
	if r2, ok := hexRune(data, i+8); !ok || r2 < 0xDC00 || r2 > 0xDFFF {
		return 0, 0, false
	}
	return 12, 4, true
}

// hexRune decodes the four hex digits at data[i:].
func hexRune(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		v, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | v
	}
	return r, true
}

// appendUnescaped appends the decoded content of a string that string has
// checked.
func appendUnescaped(b, raw []byte) []byte {
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
