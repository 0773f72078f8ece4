package abi

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Object is a JSON object in canonical form: its bytes are written once,
// compact, keys sorted byte-wise, each value as Marshal writes it (which is
// what AppendJSON writes), and with the place of each field's value noted.
// Reading a field is a slice of those bytes; changing fields (With, Merge)
// splices new bytes between the unchanged fields' bytes; the map form is
// made only when asked for (Map). The traffic a hook sees travels as one:
// its bytes are the "context" of the invocation document and what audit
// digests hash. See RATIONALE.md#the-traffic-value.
//
// An Object is immutable: every method leaves it as it is and the bytes it
// returns must not be modified. The zero Object is the empty object {}.
// SetMap and SetMerge are the exceptions, for holders that reuse an
// Object's storage (a pool): they overwrite it in place. An Object is safe
// for concurrent use by multiple goroutines as long as none of them calls
// SetMap or SetMerge on it.
type Object struct {
	data   []byte
	fields []objectField
}

// objectField is where one field lies in an Object's bytes.
type objectField struct {
	key string
	// at is where the encoded key starts, val where the value starts and
	// end where it ends: data[at:end] is `"key":value`.
	at, val, end int
}

// ObjectFromMap returns m's Object: the bytes Marshal writes for m (a nil m
// is {}). The error is Marshal's, for a value it cannot encode.
func ObjectFromMap(m map[string]any) (Object, error) {
	var o Object
	err := o.SetMap(m)
	return o, err
}

// ParseObject parses data strictly (ParseJSON's rules and lim) as a JSON
// object and returns it in canonical form.
func ParseObject(data []byte, lim JSONLimits) (Object, error) {
	v, err := ParseJSON(data, lim)
	if err != nil {
		return Object{}, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Object{}, &JSONError{Offset: 0, Reason: "not a JSON object"}
	}
	return ObjectFromMap(m)
}

// SetMap makes o m's Object (see ObjectFromMap), reusing o's storage: o's
// earlier bytes, and every copy of o made before, must no longer be in use.
// On error o is the empty object.
func (o *Object) SetMap(m map[string]any) error {
	data, fields := o.data[:0], o.fields[:0]
	clear(o.fields) // drop references to the last object's keys
	o.data, o.fields = nil, nil
	if len(m) == 0 {
		o.data, o.fields = append(data, "{}"...), fields
		return nil
	}
	fields = slices.Grow(fields, len(m))
	for k := range m {
		fields = append(fields, objectField{key: k})
	}
	slices.SortFunc(fields, func(a, b objectField) int { return strings.Compare(a.key, b.key) })
	b := append(data, '{')
	for i := range fields {
		f := &fields[i]
		if i > 0 {
			b = append(b, ',')
		}
		f.at = len(b)
		b = appendString(b, f.key)
		b = append(b, ':')
		f.val = len(b)
		var ok bool
		if b, ok = appendValue(b, m[f.key], 2); !ok {
			return o.setMarshal(m, fields)
		}
		f.end = len(b)
	}
	o.data, o.fields = append(b, '}'), fields
	return nil
}

// setMarshal is SetMap by Marshal, for a map AppendJSON leaves to it:
// fields holds m's keys, sorted; the spans are read back from Marshal's
// bytes.
func (o *Object) setMarshal(m map[string]any, fields []objectField) error {
	data, err := Marshal(m)
	if err != nil {
		o.data = append(o.data[:0], "{}"...)
		return err
	}
	var l Lexer
	l.Reset(data, maxAppendDepth+2)
	l.Consume('{')
	for i := range fields {
		f := &fields[i]
		f.at = l.Pos()
		if _, ok := l.Key(); !ok {
			return o.unreadable(l.Err())
		}
		f.val = l.Pos()
		if !l.Skip(1) {
			return o.unreadable(l.Err())
		}
		f.end = l.Pos()
		if more, ok := l.next('}', "object"); !ok || more != (i < len(fields)-1) {
			return o.unreadable(l.Err())
		}
	}
	o.data, o.fields = data, fields
	return nil
}

// unreadable reports a Marshal encoding that strict JSON refuses (an
// integer past 2^53, say): no Object holds what the lexer cannot read back.
func (o *Object) unreadable(err error) error {
	o.data, o.fields = append(o.data[:0], "{}"...), o.fields[:0]
	if err == nil {
		err = &JSONError{Reason: "encoding is not one object"}
	}
	return fmt.Errorf("abi: the encoding is not strict JSON: %w", err)
}

// emptyObject is the bytes of the zero Object.
var emptyObject = []byte("{}")

// Bytes returns the canonical bytes of o; they must not be modified.
func (o Object) Bytes() []byte {
	if o.data == nil {
		return emptyObject[:2:2]
	}
	return o.data
}

// Len returns the length of o's bytes.
func (o Object) Len() int {
	if o.data == nil {
		return len("{}")
	}
	return len(o.data)
}

// NumField returns the number of o's fields.
func (o Object) NumField() int { return len(o.fields) }

// Field returns o's field i (in key order): its key and its value's bytes.
func (o Object) Field(i int) (key string, value []byte) {
	f := &o.fields[i]
	return f.key, o.data[f.val:f.end:f.end]
}

// Get returns the bytes of field key's value, and whether o has it.
func (o Object) Get(key string) ([]byte, bool) {
	i, ok := o.find(key)
	if !ok {
		return nil, false
	}
	f := &o.fields[i]
	return o.data[f.val:f.end:f.end], true
}

func (o Object) find(key string) (int, bool) {
	return slices.BinarySearchFunc(o.fields, key, func(f objectField, k string) int { return strings.Compare(f.key, k) })
}

// Map decodes o (ParseJSON's values and lim).
func (o Object) Map(lim JSONLimits) (map[string]any, error) {
	v, err := ParseJSON(o.Bytes(), lim)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// With returns o with field key set to v: a splice, the other fields' bytes
// copied as they are. The error is Marshal's, for a value it cannot encode.
func (o Object) With(key string, v any) (Object, error) {
	n, _, err := o.Merge(map[string]any{key: v})
	return n, err
}

// Merge returns o with the fields of changes set, and the keys of the fields
// whose encoding changed, sorted. A field set to a value that encodes as the
// one it had is no change: the bytes decide, as the hook and the audit see
// bytes. When nothing changed it returns o itself.
func (o Object) Merge(changes map[string]any) (Object, []string, error) {
	var n Object
	changed, err := n.SetMerge(o, changes)
	if err != nil {
		return Object{}, nil, err
	}
	if len(changed) == 0 {
		return o, nil, nil
	}
	return n, changed, nil
}

// valueScratch holds the buffers SetMerge encodes new values into.
var valueScratch = sync.Pool{New: func() any { return new([]byte) }}

// SetMerge makes o what base.Merge(changes) returns, reusing o's storage
// (see SetMap; o must not share it with base), and returns the changed keys.
// When nothing changed, o is a copy of base's bytes.
func (o *Object) SetMerge(base Object, changes map[string]any) ([]string, error) {
	// The new values, encoded one after the other into vals.
	type change struct {
		key        string
		start, end int
	}
	var csBuf [8]change // most modifies change a field or two
	cs := csBuf[:0]
	vp := valueScratch.Get().(*[]byte)
	vals := (*vp)[:0]
	defer func() {
		if cap(vals) <= 64<<10 {
			*vp = vals[:0]
			valueScratch.Put(vp)
		}
	}()
	for k, v := range changes {
		start := len(vals)
		var ok bool
		if vals, ok = appendValue(vals, v, 2); !ok {
			enc, err := Marshal(v)
			if err != nil {
				return nil, err
			}
			vals = append(vals[:start], enc...)
		}
		if old, had := base.Get(k); had && bytes.Equal(old, vals[start:]) {
			vals = vals[:start]
			continue
		}
		cs = append(cs, change{k, start, len(vals)})
	}
	slices.SortFunc(cs, func(a, b change) int { return strings.Compare(a.key, b.key) })
	changed := make([]string, len(cs))
	for i, c := range cs {
		changed[i] = c.key
	}

	src := base.Bytes()
	data, fields := o.data[:0], o.fields[:0]
	clear(o.fields)
	data = slices.Grow(data, len(src)+len(vals)+len(cs)*8)
	fields = slices.Grow(fields, len(base.fields)+len(cs))
	b := append(data, '{')
	put := func(key string, kv []byte, keyLen int) {
		if len(fields) > 0 {
			b = append(b, ',')
		}
		at := len(b)
		b = append(b, kv...)
		fields = append(fields, objectField{key: key, at: at, val: at + keyLen, end: len(b)})
	}
	putNew := func(c change) {
		if len(fields) > 0 {
			b = append(b, ',')
		}
		at := len(b)
		b = appendString(b, c.key)
		b = append(b, ':')
		val := len(b)
		b = append(b, vals[c.start:c.end]...)
		fields = append(fields, objectField{key: c.key, at: at, val: val, end: len(b)})
	}
	i, j := 0, 0
	for i < len(base.fields) || j < len(cs) {
		switch {
		case j == len(cs) || (i < len(base.fields) && base.fields[i].key < cs[j].key):
			f := &base.fields[i]
			put(f.key, src[f.at:f.end], f.val-f.at)
			i++
		case i == len(base.fields) || cs[j].key < base.fields[i].key:
			putNew(cs[j])
			j++
		default: // the same key: the new value replaces the old
			putNew(cs[j])
			i++
			j++
		}
	}
	o.data, o.fields = append(b, '}'), fields
	return changed, nil
}
