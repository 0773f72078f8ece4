package sdk

// The SDK's codec: a lazy invocation decoder on abi's strict JSON lexer,
// which checks the whole document once and decodes only what the handler
// asks for, and an encoder that writes the canonical decision document
// without reflection. Inside wasm, building the document tree with
// abi.ParseJSON and encoding with encoding/json cost more than most hooks'
// own work. See RATIONALE.md#why-a-hand-written-codec-in-the-sdk,
// RATIONALE.md#one-strict-json-lexer and
// RATIONALE.md#why-does-the-sdk-decode-the-invocation-lazily.
//
// Both are held to the reference implementations by differential tests and
// fuzzing (codec_test.go): decodeInvocation accepts exactly what
// abi.DecodeInvocation accepts and its accessors return the same values,
// and appendDecision writes exactly the bytes abi.Decision.Encode writes.
// Anything unusual takes the reference path: an invalid document (for its
// error message), and values of types the encoder does not know.

import (
	"strconv"
	"sync/atomic"

	"github.com/wasmhooks/wasmhooks/abi"
)

// decodeInvocation checks the invocation document doc as
// abi.DecodeInvocation does and returns the Invocation, which decodes
// Context and Settings lazily from doc (see Invocation). Strings in it are
// views of doc, so doc must never be modified afterwards (handle takes every
// document into a fresh buffer).
//
// The whole document is checked here, before the handler runs: a malformed
// one is refused as it always was, and the lazy accessors never meet an
// error.
func decodeInvocation(doc []byte) (*Invocation, error) {
	inv := new(Invocation)
	if err := inv.decode(doc); err != nil {
		return nil, err
	}
	return inv, nil
}

// decode is decodeInvocation into inv, which it resets.
func (inv *Invocation) decode(doc []byte) error {
	*inv = Invocation{doc: doc}
	if inv.scanHost() {
		return nil
	}
	*inv = Invocation{doc: doc}
	if inv.scan() {
		return nil
	}
	// The reference decoder says precisely what is wrong. (It accepts
	// nothing scan refuses; the differential fuzz test holds the two to
	// that.)
	ai, err := abi.DecodeInvocation(doc, abi.JSONLimits{MaxBytes: max(len(doc), 1)})
	if err != nil {
		return err
	}
	*inv = Invocation{Point: ai.Point, context: lazyObject{m: ai.Context}, settings: lazyObject{m: ai.Settings},
		Meta: Meta{Hook: ai.Meta.Hook, Invocation: ai.Meta.Invocation, Tenant: ai.Meta.Tenant}}
	return nil
}

// lastPoint is the point lookupPoint found last.
var lastPoint atomic.Pointer[abi.Point]

// lookupPoint is abi.LookupPoint with a cache of one: a hook runs at one
// point or two, and a map lookup is dear in wasm.
func lookupPoint(name string) (abi.Point, bool) {
	if p := lastPoint.Load(); p != nil && p.Name == name {
		return *p, true
	}
	p, ok := abi.LookupPoint(name)
	if ok {
		lastPoint.Store(&p)
	}
	return p, ok
}

// majorLiteral is abi.Major as JSON writes it.
var majorLiteral = strconv.Itoa(abi.Major)

// The parts of the document as the host writes it (abi.Invocation.AppendTo),
// around the values.
var (
	hostOpen       = `{"abi":` + majorLiteral + `,"point":`
	hostContext    = `,"context":`
	hostSettings   = `,"settings":`
	hostHook       = `,"meta":{"hook":`
	hostInvocation = `,"invocation":`
	hostTenant     = `,"tenant":`
	hostClose      = `}}`
)

// scanHost is scan for a document laid out exactly as the host writes it:
// the keys in their order, no whitespace. It checks every value as scan
// does, but the keys by comparing bytes (they are fixed and distinct). It
// returns false for anything else, and decode then runs scan.
func (inv *Invocation) scanHost() bool {
	l := &inv.lex
	l.Reset(inv.doc, abi.DefaultMaxJSONDepth)
	l.AliasStrings(true)
	l.KeySpace(inv.keys[:])
	str := func(part string, dst *string) bool {
		if !l.ConsumeString(part) {
			return false
		}
		s, ok := l.String()
		*dst = l.Text(s)
		return ok
	}
	if !str(hostOpen, &inv.Point) {
		return false
	}
	if p, known := lookupPoint(inv.Point); known {
		inv.Point = p.Name // the constant, not a view of doc
	}
	return l.ConsumeString(hostContext) && readObject(l, &inv.context) &&
		l.ConsumeString(hostSettings) && readObject(l, &inv.settings) &&
		str(hostHook, &inv.Meta.Hook) && str(hostInvocation, &inv.Meta.Invocation) &&
		str(hostTenant, &inv.Meta.Tenant) && l.ConsumeString(hostClose) && l.AtEnd()
}

// scan checks inv.doc with abi's lexer, as abi.DecodeInvocation would, and
// fills Point and Meta; of "context" and "settings" it keeps where they start
// and their first members (readObject). It returns false for anything abi.DecodeInvocation would refuse
// (and, never in practice, for anything else: the caller then asks the
// reference decoder).
func (inv *Invocation) scan() bool {
	const (
		seenABI = 1 << iota
		seenPoint
		seenContext
	)
	l := &inv.lex
	l.Reset(inv.doc, abi.DefaultMaxJSONDepth)
	l.AliasStrings(true)
	l.KeySpace(inv.keys[:])
	l.SkipSpace()
	if !l.Consume('{') {
		return false
	}
	keys := l.Keys()
	seen := 0
	for {
		key, ok := l.Key()
		if !ok || !l.Add(&keys, key) {
			return false
		}
		switch {
		case l.Equal(key, "abi"):
			// The one integer literal of Major's value (the grammar
			// has no leading zeros or plus sign).
			n, ok := l.Number()
			if !ok || string(l.Bytes(n)) != majorLiteral {
				return false
			}
			seen |= seenABI
		case l.Equal(key, "point"):
			p, ok := l.String()
			if !ok {
				return false
			}
			inv.Point = l.Text(p)
			if p, known := lookupPoint(inv.Point); known {
				inv.Point = p.Name // the constant, not a view of doc
			}
			seen |= seenPoint
		case l.Equal(key, "context"):
			if !readObject(l, &inv.context) {
				return false
			}
			seen |= seenContext
		case l.Equal(key, "settings"):
			if l.Literal("null") {
				break
			}
			if !readObject(l, &inv.settings) {
				return false
			}
		case l.Equal(key, "meta"):
			if !l.Literal("null") && !meta(l, &inv.Meta) {
				return false
			}
		default:
			if !l.Skip(1) {
				return false
			}
		}
		l.SkipSpace()
		if l.Consume(',') {
			continue
		}
		if !l.Consume('}') {
			return false
		}
		break
	}
	l.SkipSpace()
	return l.AtEnd() && seen == seenABI|seenPoint|seenContext
}

// readObject checks the object that is the top level's member value and
// records where it starts and its first members in o.
func readObject(l *abi.Lexer, o *lazyObject) bool {
	o.at = l.Pos()
	return members(l, func(m member) bool {
		if o.n < len(o.members) {
			o.members[o.n] = m
			o.n++
		} else {
			o.more = true
		}
		return true
	})
}

// meta reads the meta object into m: "hook", "invocation" and "tenant"
// must be strings when present; other fields are checked and ignored.
func meta(l *abi.Lexer, m *Meta) bool {
	return members(l, func(f member) bool {
		var dst *string
		switch {
		case l.Equal(f.key, "hook"):
			dst = &m.Hook
		case l.Equal(f.key, "invocation"):
			dst = &m.Invocation
		case l.Equal(f.key, "tenant"):
			dst = &m.Tenant
		default:
			return true
		}
		if !f.str {
			return false
		}
		*dst = l.Text(f.val)
		return true
	})
}

// members checks the object that is the top level's member value (keys
// unique, values checked) and calls each for its members in order.
func members(l *abi.Lexer, each func(member) bool) bool {
	if !l.Consume('{') {
		return false
	}
	l.SkipSpace()
	if l.Consume('}') {
		return true
	}
	keys := l.Keys()
	for {
		key, ok := l.Key()
		if !ok || !l.Add(&keys, key) {
			return false
		}
		m := member{key: key, val: abi.Span{Start: l.Pos()}}
		if l.Peek() == '"' {
			if m.val, ok = l.String(); !ok {
				return false
			}
			m.str = true
		} else if !l.Skip(2) {
			return false
		}
		if !each(m) {
			return false
		}
		l.SkipSpace()
		if l.Consume(',') {
			continue
		}
		l.Drop(keys)
		return l.Consume('}')
	}
}

// lookup finds key in o, which scan has checked. A string, number, boolean
// or null comes back as v; for an object or array, whole is true and the
// caller decodes the whole object, so that a composite value is the same
// each time it is asked for.
func (inv *Invocation) lookup(o *lazyObject, key string) (v any, found, whole bool) {
	l := &inv.lex
	for _, m := range o.members[:o.n] {
		if !l.Equal(m.key, key) {
			continue
		}
		if m.str {
			return l.Text(m.val), true, false
		}
		l.Seek(m.val.Start)
		if c := l.Peek(); c == '{' || c == '[' {
			return nil, false, true
		}
		v, _ = l.Value(1)
		return v, true, false
	}
	// A large object: decode it.
	return nil, false, o.more
}

// decodeObject decodes o, once, and returns the map (nil if the document has
// none).
func (inv *Invocation) decodeObject(o *lazyObject) map[string]any {
	if o.at > 0 {
		inv.lex.Seek(o.at)
		v, _ := inv.lex.Value(1)
		o.m, _ = v.(map[string]any)
		o.at = 0
	}
	return o.m
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
			p, _ := lookupPoint(point)
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
	if len(d.pending) > 0 {
		b = append(b, `,"pending":`...)
		if b, ok = appendObject(b, d.pending, 1); !ok {
			return nil, false, nil
		}
	}
	if d.shortCircuit {
		b = append(b, `,"short_circuit":true`...)
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
