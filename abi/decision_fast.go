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

import "unsafe"

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
	keyPending      // since ABI 1.2
	keyShortCircuit // since ABI 1.2
)

// fastField is one field of the decision's "context".
type fastField struct {
	key string // the point's own string, not a copy
	// The value is str if isString, otherwise value.
	str      Span
	isString bool
	value    any
}

// decodeDecisionFast decodes data if it is a canonical decision (the keys
// action, context, reason, user_message, do_not_reply_again, pending and
// short_circuit, nothing else) that decodeDecisionTree accepts for point
// within lim, and returns the same decision. ok is false for anything else, valid or not.
func decodeDecisionFast(data []byte, point Point, lim JSONLimits) (d *Decision, ok bool) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return nil, false
	}
	var (
		s           Lexer
		seen        int
		action      Action
		reason      Span
		userMessage Span
		dnra        bool
		pending     any
		shortCirc   bool
		fields      [maxFastFields]fastField
		nfields     int
	)
	s.Reset(data, lim.MaxDepth)
	s.SkipSpace()
	if !s.Consume('{') {
		return nil, false
	}
	for {
		s.SkipSpace()
		key, ok := plainString(&s)
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
		case "pending":
			bit = keyPending
		case "short_circuit":
			bit = keyShortCircuit
		default:
			// Another shape, a top-level modify or a field the tree path
			// refuses.
			return nil, false
		}
		if seen&bit != 0 {
			return nil, false // a duplicate key
		}
		seen |= bit
		s.SkipSpace()
		if !s.Consume(':') {
			return nil, false
		}
		s.SkipSpace()
		switch bit {
		case keyAction:
			action, ok = fastAction(&s)
		case keyContext:
			// The context object is nested two deep.
			if ok = lim.MaxDepth >= 2; ok {
				nfields, ok = fastContext(&s, point, &fields)
			}
		case keyReason:
			reason, ok = nullableString(&s)
		case keyUserMessage:
			userMessage, ok = nullableString(&s)
		case keyDoNotReplyAgain:
			dnra, ok = nullableBool(&s)
		case keyShortCircuit:
			shortCirc, ok = nullableBool(&s)
		case keyPending:
			// Decoded as ParseJSON decodes it, one level down.
			pending, ok = s.Value(1)
		}
		if !ok {
			return nil, false
		}
		s.SkipSpace()
		if s.Consume(',') {
			continue
		}
		if !s.Consume('}') {
			return nil, false
		}
		break
	}
	s.SkipSpace()
	if !s.AtEnd() || seen&keyAction == 0 {
		return nil, false
	}
	// A modify changes at least one field, and the other actions none
	// (an empty "context" is allowed with them, and dropped).
	if (action == ActionModify) != (nfields > 0) {
		return nil, false
	}
	// "pending" is an object or null, on an ask only; "short_circuit":
	// true is on a continue only (decision_words.go).
	pendingObj, isObj := pending.(map[string]any)
	if seen&keyPending != 0 && (action != ActionAsk || (pending != nil && !isObj)) {
		return nil, false
	}
	if shortCirc && action != ActionContinue {
		return nil, false
	}

	d = &Decision{Action: action, DoNotReplyAgain: dnra, ShortCircuit: shortCirc, Shape: ShapeCanonical}
	if len(pendingObj) > 0 {
		d.Pending = pendingObj
	}
	// Every string the decision keeps is a substring of one allocation,
	// sized exactly (so one kept string keeps them all, never the input).
	size := reason.Len() + userMessage.Len()
	for _, f := range fields[:nfields] {
		if f.isString {
			size += f.str.Len()
		}
	}
	buf := make([]byte, 0, size)
	put := func(sp Span) (start, end int) {
		start = len(buf)
		buf = s.AppendText(buf, sp)
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

// fastContext scans the decision's "context" object into fields, and
// returns how many it holds. Every key must be one of point's changeable
// fields, and appear once.
func fastContext(s *Lexer, point Point, fields *[maxFastFields]fastField) (int, bool) {
	if !s.Consume('{') {
		return 0, false
	}
	s.SkipSpace()
	if s.Consume('}') {
		return 0, true
	}
	var seen uint64 // by index in point.Changeable
	n := 0
	for {
		s.SkipSpace()
		key, ok := plainString(s)
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
		s.SkipSpace()
		if !s.Consume(':') {
			return 0, false
		}
		s.SkipSpace()
		if s.Peek() == '"' {
			if f.str, ok = s.String(); !ok {
				return 0, false
			}
			f.isString = true
		} else {
			// Any other value is decoded as ParseJSON decodes it,
			// at the depth it has in the document (top level 1,
			// context 2), so it is the very value and the same
			// limit.
			if f.value, ok = s.Value(2); !ok {
				return 0, false
			}
		}
		s.SkipSpace()
		if s.Consume(',') {
			continue
		}
		return n, s.Consume('}')
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

// fastAction scans the action word of a canonical decision the fast path
// decodes: continue, modify, block or ask (a notify takes the tree path).
func fastAction(s *Lexer) (Action, bool) {
	word, ok := plainString(s)
	if !ok {
		return "", false
	}
	switch string(word) {
	case "continue":
		return ActionContinue, true
	case "modify":
		return ActionModify, true
	case "block":
		return ActionBlock, true
	case "ask":
		return ActionAsk, true
	}
	return "", false
}

// nullableBool scans true, false or null (false).
func nullableBool(s *Lexer) (v, ok bool) {
	switch {
	case s.Literal("true"):
		return true, true
	case s.Literal("false"), s.Literal("null"):
		return false, true
	}
	return false, false
}

// nullableString scans a string or null (the zero span).
func nullableString(s *Lexer) (Span, bool) {
	if s.Literal("null") {
		return Span{}, true
	}
	return s.String()
}

// plainString scans a string without escapes and returns its content, a
// view of the document.
func plainString(s *Lexer) ([]byte, bool) {
	sp, ok := s.String()
	if !ok || sp.Escaped() {
		return nil, false
	}
	return s.Bytes(sp), true
}
