package audit

// The stored form of a record, written by hand. A record's bytes are hashed
// into the chain, so they must never change: appendRecord writes exactly what
// encoding/json's Marshal of the Record writes (field order, omitempty, HTML
// escaping, time.Time's RFC 3339 form), and falls back to Marshal itself for
// anything it does not handle. encode_test.go holds the two to the same bytes
// with a table and a fuzz test, against a copy of the encoder that wrote the
// first logs. Digests take the same care: digest writes what abi.Marshal
// writes (abi.AppendJSON is held to it by abi's own tests).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/wasmhooks/wasmhooks/abi"
)

// maxPooledBytes is the largest scratch buffer kept for reuse.
const maxPooledBytes = 256 << 10

// scratch holds *[]byte buffers for encoding records and digests.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

func getScratch() *[]byte { return scratch.Get().(*[]byte) }

// putScratch returns bp to the pool with b, its possibly grown contents, as
// its buffer, unless b grew too large to keep.
func putScratch(bp *[]byte, b []byte) {
	if cap(b) > maxPooledBytes {
		return
	}
	*bp = b[:0]
	scratch.Put(bp)
}

// digestOf is "sha256:" and the hex sha256 of b.
func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	var out [len("sha256:") + 2*sha256.Size]byte
	copy(out[:], "sha256:")
	hex.Encode(out[len("sha256:"):], sum[:])
	return string(out[:])
}

// digestMarshal is Digest by abi.Marshal, for the values AppendJSON leaves to
// it and those it cannot encode.
func digestMarshal(v any) string {
	b, err := abi.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf("unencodable %T", v))
	}
	return digestOf(b)
}

// Digests gives Digest of one object and of each of its fields' values from
// its abi.Object: the object's canonical bytes hold each field's, so a
// field's digest hashes a slice of bytes already written instead of encoding
// the value again. Every result is what Digest returns for the same value.
// The Object is the traffic as the chain holds it (Object), and a modify is
// spliced into it (ResetMerge) rather than encoded again.
//
// The zero value is ready to use; Reset sets the object. A Digests is not safe
// for concurrent use. It keeps a reference to the object until the next Reset,
// and reuses the Object's storage: the Object it returns is valid until then.
type Digests struct {
	m      map[string]any
	digest string     // Digest(m)
	obj    abi.Object // m's canonical bytes, when they could be written
	whole  bool       // obj is valid
}

// digestsPool holds Digests for AcquireDigests.
var digestsPool = sync.Pool{New: func() any { return new(Digests) }}

// emptyDigest is Digest(map[string]any{}), the digest of a nil object too.
var emptyDigest = digestOf([]byte("{}"))

// AcquireDigests returns an empty Digests from a pool; Release gives it back.
func AcquireDigests() *Digests {
	return digestsPool.Get().(*Digests)
}

// Release drops d's reference to its object and returns d to the pool that
// AcquireDigests takes from (unless its buffers grew too large to keep). d
// must not be used afterwards.
func (d *Digests) Release() {
	big := d.obj.Len() > maxPooledBytes || d.obj.NumField() > maxPooledBytes/16
	d.Reset(nil)
	if big {
		return
	}
	digestsPool.Put(d)
}

// Reset digests m (nil digests as {}, as Digest does).
func (d *Digests) Reset(m map[string]any) {
	d.m = m
	if err := d.obj.SetMap(m); err != nil {
		d.whole = false
		d.digest = digestMarshal(m)
		return
	}
	d.whole = true
	if m == nil {
		d.digest = emptyDigest
		return
	}
	d.digest = digestOf(d.obj.Bytes())
}

// ResetMerge makes d the digests of base's object with the fields of changes
// set, spliced into base's bytes, and returns the fields whose encoding
// changed (sorted) and the object as a map: base's map copied, with changes
// set. ok is false, and d is unchanged, when base holds no Object (a value
// only Marshal's error describes) or a change does not encode: the caller
// merges the maps and uses Reset. d and base must differ.
func (d *Digests) ResetMerge(base *Digests, changes map[string]any) (m map[string]any, changed []string, ok bool) {
	if !base.whole {
		return nil, nil, false
	}
	var err error
	if changed, err = d.obj.SetMerge(base.obj, changes); err != nil {
		return nil, nil, false // SetMerge encodes the changes before it writes
	}
	m = make(map[string]any, len(base.m)+len(changes))
	for k, v := range base.m {
		m[k] = v
	}
	for k, v := range changes {
		m[k] = v
	}
	d.m, d.whole = m, true
	d.digest = digestOf(d.obj.Bytes())
	return m, changed, true
}

// Digest returns Digest of the object.
func (d *Digests) Digest() string { return d.digest }

// Object returns the object's canonical form, valid until d's next Reset,
// ResetMerge or Release; ok is false when the object has none (a value
// Marshal refuses).
func (d *Digests) Object() (o abi.Object, ok bool) { return d.obj, d.whole }

// Map returns the object, as Reset or ResetMerge was given or made it.
func (d *Digests) Map() map[string]any { return d.m }

// Field returns the object's field name: its value, Digest of its value, and
// whether the object has it.
func (d *Digests) Field(name string) (v any, digest string, ok bool) {
	if v, ok = d.m[name]; !ok {
		return nil, "", false
	}
	if m, isMap := v.(map[string]any); d.whole && !(isMap && m == nil) { // a nil map digests as {}, encodes as null
		if raw, found := d.obj.Get(name); found {
			return v, digestOf(raw), true
		}
	}
	return v, Digest(v), true
}

// appendRecord appends r's stored form without its hash field, or reports
// false when r holds something it does not encode (a value AppendJSON leaves
// to Marshal, a time RFC 3339 cannot represent): the caller then uses
// encodeReflect, which encodes it or says why it cannot.
//
// memo, if not nil, holds strings of earlier records found to need no
// escaping (see plainMemo).
func appendRecord(b []byte, r *Record, memo *plainMemo) ([]byte, bool) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"time":"`...)
	b, ok := appendTime(b, r.Time)
	if !ok {
		return nil, false
	}
	b = append(b, '"')
	b = memo.field(b, "run", r.Run, memoRun)
	b = memo.field(b, "tenant", r.Tenant, memoTenant)
	b = memo.field(b, "point", r.Point, memoPoint)
	b = memo.field(b, "config", r.Config, memoConfig)
	b = memo.field(b, "binding", r.Binding, memoBinding)
	b = memo.field(b, "phase", r.Phase, memoPhase)
	b = memo.field(b, "module", r.Module, memoModule)
	b = appendField(b, "decision", r.Decision)
	b = appendField(b, "by", r.By)
	b = appendOptional(b, "hook_action", r.HookAction)
	b = appendOptional(b, "wire", r.Wire)
	b = appendOptional(b, "resolution", r.Resolution)
	b = appendOptional(b, "approval", r.Approval)
	b = appendOptional(b, "actor", r.Actor)
	b = appendOptional(b, "reason", r.Reason)
	if r.Failure != nil {
		b = append(b, `,"failure":{"code":`...)
		b = appendString(b, string(r.Failure.Code))
		b = appendField(b, "message", r.Failure.Message)
		b = append(b, '}')
	}
	b = appendOptional(b, "ignored", r.Ignored)
	b = memo.field(b, "input", r.Input, memoInput)
	b = memo.field(b, "output", r.Output, memoOutput)
	b, ok = appendList(b, "diff", len(r.Diff), func(b []byte, i int) ([]byte, bool) {
		ch := &r.Diff[i]
		b = append(b, `{"field":`...)
		b = appendString(b, ch.Field)
		b = appendField(b, "before", ch.Before)
		b = appendField(b, "after", ch.After)
		var ok bool
		if b, ok = appendValue(b, "before_value", ch.BeforeValue); !ok {
			return nil, false
		}
		if b, ok = appendValue(b, "after_value", ch.AfterValue); !ok {
			return nil, false
		}
		return append(b, '}'), true
	})
	if !ok {
		return nil, false
	}
	b = append(b, `,"latency_us":`...)
	b = strconv.AppendInt(b, r.LatencyUS, 10)
	b, _ = appendList(b, "host_calls", len(r.HostCalls), func(b []byte, i int) ([]byte, bool) {
		hc := &r.HostCalls[i]
		b = append(b, `{"capability":`...)
		b = appendString(b, hc.Capability)
		b = appendField(b, "status", hc.Status)
		if hc.Charged != 0 {
			b = append(b, `,"charged":`...)
			b = strconv.AppendInt(b, hc.Charged, 10)
		}
		b = append(b, `,"latency_us":`...)
		b = strconv.AppendInt(b, hc.LatencyUS, 10)
		return append(b, '}'), true
	})
	b = append(b, `,"credit_charged":`...)
	b = strconv.AppendInt(b, r.CreditCharged, 10)
	b = appendField(b, "prev", r.Prev)
	b = appendOptional(b, "mac", r.MAC)
	return append(b, '}'), true
}

// appendTime appends t.AppendText's bytes (what Time.MarshalJSON writes
// between its quotes), or reports false where that fails. A UTC time whose
// second is the one last written takes that second's text from a cache and
// writes only its fraction: the records of a run share their seconds.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	utc := t.Location() == time.UTC
	if utc {
		if c := lastSecond.Load(); c != nil && c.unix == t.Unix() {
			b = append(b, c.text[:]...)
			return append(appendFraction(b, t.Nanosecond()), 'Z'), true
		}
	}
	start := len(b)
	b, err := t.AppendText(b)
	if err != nil {
		return nil, false
	}
	if utc && len(b)-start > len(secondText{}.text) {
		c := &secondText{unix: t.Unix()}
		copy(c.text[:], b[start:])
		lastSecond.Store(c)
	}
	return b, true
}

// secondText is the RFC 3339 text of a UTC second, as Time.AppendText
// writes it before the fraction: 2006-01-02T15:04:05.
type secondText struct {
	unix int64
	text [len("2006-01-02T15:04:05")]byte
}

// lastSecond is the second appendTime wrote last.
var lastSecond atomic.Pointer[secondText]

// appendFraction appends the fraction of a second RFC3339Nano writes for ns
// nanoseconds: none for 0, else a dot and the nine digits less their
// trailing zeros.
func appendFraction(b []byte, ns int) []byte {
	if ns == 0 {
		return b
	}
	var d [10]byte
	d[0] = '.'
	for i := 9; i > 0; i-- {
		d[i] = byte('0' + ns%10)
		ns /= 10
	}
	n := len(d)
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
}

// plainMemo holds, for some of a record's fields, the string last found to
// need no escaping: a run's records share their run, tenant, point,
// configuration and, while the context does not change, their digests, and
// a binding's its name, phase and module, so the check is skipped for a
// string that is the very one checked before (the same bytes at the same
// address: a string's bytes never change, and the memo holding it keeps
// them from being reused for another). It lives in a pooled recordBuf, so
// one goroutine uses it at a time.
type plainMemo [memoFields]string

// The fields plainMemo holds.
const (
	memoRun = iota
	memoTenant
	memoPoint
	memoConfig
	memoBinding
	memoPhase
	memoModule
	memoInput
	memoOutput
	memoFields
)

// maxMemoBytes bounds the strings plainMemo keeps (and so keeps alive).
const maxMemoBytes = 256

// field is appendField for the field at slot of the memo (m may be nil).
func (m *plainMemo) field(b []byte, name, s string, slot int) []byte {
	if m == nil {
		return appendField(b, name, s)
	}
	if k := m[slot]; len(k) == len(s) && unsafe.StringData(k) == unsafe.StringData(s) {
		return appendPlain(b, name, s)
	}
	if !plainASCII(s) {
		return appendField(b, name, s)
	}
	if len(s) <= maxMemoBytes {
		m[slot] = s
	}
	return appendPlain(b, name, s)
}

// appendPlain is appendField for an s known to need no escaping.
func appendPlain(b []byte, name, s string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':', '"')
	b = append(b, s...)
	return append(b, '"')
}

// recordBuf is the pooled buffer a record is encoded into, with its memo.
type recordBuf struct {
	b    []byte
	memo plainMemo
}

// recordBufs holds the recordBufs of storedBody and encodeKeyed.
var recordBufs = sync.Pool{New: func() any { return new(recordBuf) }}

// putRecordBuf returns rb to the pool with b, its possibly grown contents,
// as its buffer, unless b grew too large to keep.
func putRecordBuf(rb *recordBuf, b []byte) {
	if cap(b) > maxPooledBytes {
		return
	}
	rb.b = b[:0]
	recordBufs.Put(rb)
}

// appendField appends `,"name":` and s. name needs no escaping.
func appendField(b []byte, name, s string) []byte {
	return appendString(appendKey(b, name), s)
}

// appendKey appends a field's separator and name: ,"name":
func appendKey(b []byte, name string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendList appends the omitempty array field name of n elements, each
// appended by elem, or reports false when elem does.
func appendList(b []byte, name string, n int, elem func(b []byte, i int) ([]byte, bool)) ([]byte, bool) {
	if n == 0 {
		return b, true
	}
	b = append(appendKey(b, name), '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = elem(b, i); !ok {
			return nil, false
		}
	}
	return append(b, ']'), true
}

// appendOptional is appendField for an omitempty field.
func appendOptional(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendField(b, name, s)
}

// appendValue appends the omitempty field name with the value v (omitted
// when v is nil), or reports false for a value AppendJSON does not handle.
func appendValue(b []byte, name string, v any) ([]byte, bool) {
	if v == nil {
		return b, true
	}
	b = appendKey(b, name)
	start := len(b)
	b, ok := abi.AppendJSON(b, v)
	if !ok {
		return nil, false
	}
	return escapeHTML(b, start), true
}

// appendString appends s as encoding/json's Marshal does: abi.AppendJSON's
// string with HTML escaping.
func appendString(b []byte, s string) []byte {
	if plainASCII(s) { // digests, names, codes: most of a record
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	start := len(b)
	b, _ = abi.AppendJSON(b, s)
	return escapeHTML(b, start)
}

const hexDigits = "0123456789abcdef"

// needsCare marks the bytes a JSON string cannot hold as they are in
// encoding/json's HTML-safe form: controls, '"', '\\', '<', '>', '&', and
// every byte of a multi-byte character (left to the full encoder).
var needsCare = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&'
	}
	return t
}()

// plainASCII reports whether s encodes as itself between quotes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if needsCare[s[i]] {
			return false
		}
	}
	return true
}

// escapeHTML rewrites every <, > and & of b[start:] as \u003c, \u003e and
// \u0026, which is all that sets encoding/json's default (HTML-safe) output
// apart from abi.Marshal's. In JSON those bytes can only be inside strings,
// where the escape means the same character.
func escapeHTML(b []byte, start int) []byte {
	n := 0
	for _, c := range b[start:] {
		if c == '<' || c == '>' || c == '&' {
			n++
		}
	}
	if n == 0 {
		return b
	}
	end := len(b)
	b = slices.Grow(b, 5*n)[:end+5*n]
	j := len(b)
	for i := end - 1; i >= start; i-- {
		c := b[i]
		if c == '<' || c == '>' || c == '&' {
			j -= 6
			b[j], b[j+1], b[j+2], b[j+3], b[j+4], b[j+5] = '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF]
			continue
		}
		j--
		b[j] = c
	}
	return b
}

// encodeReflect is the record's stored form by encoding/json, for records
// appendRecord leaves to it. r.Hash is ignored.
func encodeReflect(r *Record) ([]byte, error) {
	c := *r
	c.Hash = ""
	return json.Marshal(&c)
}

// storedBody returns r's stored form without its hash field: in the pooled
// buffer rb when appendRecord can make it (give it back with releaseBody
// once done with body), else by encoding/json (rb is nil).
func storedBody(r *Record) (rb *recordBuf, body []byte, err error) {
	rb = recordBufs.Get().(*recordBuf)
	body, ok := appendRecord(rb.b[:0], r, &rb.memo)
	if ok {
		return rb, body, nil
	}
	recordBufs.Put(rb)
	body, err = encodeReflect(r)
	return nil, body, err
}

// releaseBody gives back the buffer of a storedBody, if any.
func releaseBody(rb *recordBuf, body []byte) {
	if rb != nil {
		putRecordBuf(rb, body)
	}
}

// hashBody returns the hex sha256 of r's stored form without its hash field,
// and, when line is true, that stored line with the hash (see encode).
func hashBody(r *Record, line bool) ([]byte, string, error) {
	rb, body, err := storedBody(r)
	if err != nil {
		return nil, "", err
	}
	defer releaseBody(rb, body)
	sum := sha256.Sum256(body)
	var hb [2 * sha256.Size]byte
	hex.Encode(hb[:], sum[:])
	h := string(hb[:])
	if !line {
		return nil, h, nil
	}
	// One byte to spare: FileSink appends the newline.
	out := make([]byte, 0, len(body)+len(`,"hash":""`)+len(h)+1)
	out = append(out, body[:len(body)-1]...)
	out = append(out, `,"hash":"`...)
	out = append(out, h...)
	out = append(out, `"}`...)
	return out, h, nil
}
