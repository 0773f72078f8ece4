package wasmbin

import (
	"fmt"
	"unicode/utf8"
)

// reader decodes primitive values from b[pos:end]. Offsets are absolute in
// the module so that errors point at the right byte. Every method checks its
// bounds and returns a *FormatError instead of panicking.
type reader struct {
	b       []byte
	pos     int
	end     int
	section string
}

func (r *reader) errorf(off int, format string, args ...any) error {
	return &FormatError{Offset: off, Section: r.section, Reason: fmt.Sprintf(format, args...)}
}

func (r *reader) remaining() int { return r.end - r.pos }

func (r *reader) eof() bool { return r.pos >= r.end }

func (r *reader) readByte(what string) (byte, error) {
	if r.pos >= r.end {
		return 0, r.errorf(r.pos, "unexpected end of section reading %s", what)
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

// readByteAt is readByte and the offset of the byte, for errors about it.
func (r *reader) readByteAt(what string) (byte, int, error) {
	off := r.pos
	c, err := r.readByte(what)
	return c, off, err
}

// u32At is u32 and the offset where the value starts, for errors about it.
func (r *reader) u32At(what string) (uint32, int, error) {
	off := r.pos
	v, err := r.u32(what)
	return v, off, err
}

func (r *reader) readBytes(n uint64, what string) ([]byte, error) {
	if n > uint64(r.remaining()) {
		return nil, r.errorf(r.pos, "%s of %d bytes exceeds the %d bytes left", what, n, r.remaining())
	}
	start := r.pos
	r.pos += int(n)
	return r.b[start:r.pos:r.pos], nil
}

// u32 decodes an unsigned LEB128 value of at most 5 bytes. Non-minimal
// encodings within 5 bytes are valid WebAssembly (linkers pad with them);
// a sixth byte or bits above bit 31 in the fifth are refused.
func (r *reader) u32(what string) (uint32, error) {
	if r.pos < r.end {
		if c := r.b[r.pos]; c < 0x80 {
			r.pos++
			return uint32(c), nil
		}
	}
	v, _, err := r.leb(what, lebU32)
	return uint32(v), err
}

// s32 decodes a signed LEB128 value of at most 5 bytes; the unused bits of
// the fifth byte must be a sign extension.
func (r *reader) s32(what string) (int32, error) {
	v, err := r.signed(what, lebS32)
	return int32(v), err
}

// s64 decodes a signed LEB128 value of at most 10 bytes; the tenth byte must
// be 0x00 or 0x7F (a sign extension of bit 63).
func (r *reader) s64(what string) (int64, error) {
	return r.signed(what, lebS64)
}

// lebKind is one of the LEB128 encodings the binary format uses.
type lebKind uint8

const (
	lebU32 lebKind = iota
	lebS32
	lebS64
)

// signed decodes a signed LEB128 value of kind k, sign-extended to 64 bits.
func (r *reader) signed(what string, k lebKind) (int64, error) {
	v, n, err := r.leb(what, k)
	if err != nil {
		return 0, err
	}
	if shift := 7 * n; shift < 64 && v&(1<<(shift-1)) != 0 {
		v |= ^uint64(0) << shift
	}
	return int64(v), nil
}

// leb reads one LEB128 value of kind k: its 7-bit groups, unsigned, and how
// many bytes it took. A value longer than the kind allows, or whose last
// allowed byte has unused bits set (u32) or unused bits that are not a sign
// extension (s32, s64), is refused; errors point at its first byte.
func (r *reader) leb(what string, k lebKind) (uint64, int, error) {
	name, max := "u32", 5
	switch k {
	case lebS32:
		name = "s32"
	case lebS64:
		name, max = "s64", 10
	}
	start := r.pos
	var v uint64
	for i := 0; i < max; i++ {
		if r.pos >= r.end {
			return 0, 0, r.errorf(start, "unexpected end of section reading %s (LEB128)", what)
		}
		c := r.b[r.pos]
		r.pos++
		if i == max-1 {
			if c&0x80 != 0 {
				break
			}
			if reason := lebLastByte(k, c); reason != "" {
				return 0, 0, r.errorf(start, "%s: LEB128 %s %s", what, name, reason)
			}
		}
		v |= uint64(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, r.errorf(start, "%s: LEB128 %s longer than %d bytes", what, name, max)
}

// lebLastByte says what is wrong with c as the last byte a LEB128 value of
// kind k may have, or "" when nothing is.
func lebLastByte(k lebKind, c byte) string {
	switch k {
	case lebU32:
		if c&0x70 != 0 {
			return "has unused bits set in its last byte"
		}
	case lebS32:
		if hi := c & 0x70; (c&0x08 == 0 && hi != 0) || (c&0x08 != 0 && hi != 0x70) {
			return "has unused bits that are not a sign extension"
		}
	case lebS64:
		if c != 0x00 && c != 0x7F {
			return "has unused bits that are not a sign extension"
		}
	}
	return ""
}

// count reads a vector length and checks it against the bytes left, given
// the smallest encoding of one element, so that a lying count never causes an
// allocation. It returns the count and a safe capacity hint.
func (r *reader) count(what string, minElemBytes int) (uint32, error) {
	start := r.pos
	n, err := r.u32("count")
	if err != nil {
		return 0, within(err, "%s", what)
	}
	if uint64(n)*uint64(minElemBytes) > uint64(r.remaining()) {
		return 0, r.errorf(start, "%s count %d cannot fit in the %d bytes left", what, n, r.remaining())
	}
	return n, nil
}

// name reads a length-prefixed UTF-8 name.
func (r *reader) name(what string, maxBytes uint64) (string, error) {
	start := r.pos
	n, err := r.u32("length")
	if err != nil {
		return "", within(err, "%s", what)
	}
	if uint64(n) > maxBytes {
		return "", &LimitError{Limit: "MaxNameBytes", Max: maxBytes, Got: uint64(n)}
	}
	b, err := r.readBytes(uint64(n), what)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", r.errorf(start, "%s is not valid UTF-8", what)
	}
	return string(b), nil
}
