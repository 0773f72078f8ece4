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
	start := r.pos
	if r.pos < r.end {
		if c := r.b[r.pos]; c < 0x80 {
			r.pos++
			return uint32(c), nil
		}
	}
	var v uint32
	for i := 0; i < 5; i++ {
		if r.pos >= r.end {
			return 0, r.errorf(start, "unexpected end of section reading %s (LEB128)", what)
		}
		c := r.b[r.pos]
		r.pos++
		if i == 4 {
			if c&0x80 != 0 {
				return 0, r.errorf(start, "%s: LEB128 u32 longer than 5 bytes", what)
			}
			if c&0x70 != 0 {
				return 0, r.errorf(start, "%s: LEB128 u32 has unused bits set in its last byte", what)
			}
		}
		v |= uint32(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, r.errorf(start, "%s: LEB128 u32 longer than 5 bytes", what) // unreachable
}

// s32 decodes a signed LEB128 value of at most 5 bytes; the unused bits of
// the fifth byte must be a sign extension.
func (r *reader) s32(what string) (int32, error) {
	start := r.pos
	var v int64
	for i := 0; i < 5; i++ {
		if r.pos >= r.end {
			return 0, r.errorf(start, "unexpected end of section reading %s (LEB128)", what)
		}
		c := r.b[r.pos]
		r.pos++
		if i == 4 {
			if c&0x80 != 0 {
				return 0, r.errorf(start, "%s: LEB128 s32 longer than 5 bytes", what)
			}
			if hi := c & 0x70; (c&0x08 == 0 && hi != 0) || (c&0x08 != 0 && hi != 0x70) {
				return 0, r.errorf(start, "%s: LEB128 s32 has unused bits that are not a sign extension", what)
			}
		}
		v |= int64(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			shift := 7 * (i + 1)
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return int32(v), nil
		}
	}
	return 0, r.errorf(start, "%s: LEB128 s32 longer than 5 bytes", what) // unreachable
}

// s64 decodes a signed LEB128 value of at most 10 bytes; the tenth byte must
// be 0x00 or 0x7F (a sign extension of bit 63).
func (r *reader) s64(what string) (int64, error) {
	start := r.pos
	var v uint64
	for i := 0; i < 10; i++ {
		if r.pos >= r.end {
			return 0, r.errorf(start, "unexpected end of section reading %s (LEB128)", what)
		}
		c := r.b[r.pos]
		r.pos++
		if i == 9 {
			if c&0x80 != 0 {
				return 0, r.errorf(start, "%s: LEB128 s64 longer than 10 bytes", what)
			}
			if c != 0x00 && c != 0x7F {
				return 0, r.errorf(start, "%s: LEB128 s64 has unused bits that are not a sign extension", what)
			}
		}
		v |= uint64(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			shift := 7 * (i + 1)
			if shift < 64 && c&0x40 != 0 {
				v |= ^uint64(0) << shift
			}
			return int64(v), nil
		}
	}
	return 0, r.errorf(start, "%s: LEB128 s64 longer than 10 bytes", what) // unreachable
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
