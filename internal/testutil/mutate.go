package testutil

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// Edit is one way Mutate changes a module: it edits b at pos (an index into
// b) with val and returns the result.
type Edit func(b []byte, pos int, val byte) []byte

// The edits the fuzzers' mutators choose from.
var (
	// FlipBits flips the bits of val in the byte at pos.
	FlipBits Edit = func(b []byte, pos int, val byte) []byte { b[pos] ^= val; return b }
	// SetByte sets the byte at pos to val.
	SetByte Edit = func(b []byte, pos int, val byte) []byte { b[pos] = val; return b }
	// InsertByte inserts val before pos.
	InsertByte Edit = func(b []byte, pos int, val byte) []byte {
		return append(b[:pos], append([]byte{val}, b[pos:]...)...)
	}
	// DeleteByte deletes the byte at pos.
	DeleteByte Edit = func(b []byte, pos int, _ byte) []byte { return append(b[:pos], b[pos+1:]...) }
	// Truncate cuts b at pos.
	Truncate Edit = func(b []byte, pos int, _ byte) []byte { return b[:pos] }
	// DuplicateRun repeats the val bytes from pos (a section, a vector entry).
	DuplicateRun Edit = func(b []byte, pos int, val byte) []byte {
		end := min(pos+int(val), len(b))
		return append(b[:end], append(bytes.Clone(b[pos:end]), b[end:]...)...)
	}
	// LyingLEB overwrites the byte at pos with a 5-byte LEB128 (a lying
	// count or size).
	LyingLEB Edit = func(b []byte, pos int, val byte) []byte {
		v := uint32(val) << (val % 25)
		leb := []byte{byte(v) | 0x80, byte(v>>7) | 0x80, byte(v>>14) | 0x80, byte(v>>21) | 0x80, byte(v >> 28)}
		return append(b[:pos], append(leb, b[min(pos+1, len(b)):]...)...)
	}
)

// Mutate applies edit operations to a copy of base. Each operation is four
// bytes: which of edits (modulo their number), position (16 bits, modulo the
// length) and a value.
func Mutate(base, ops []byte, edits ...Edit) []byte {
	b := bytes.Clone(base)
	for len(ops) >= 4 && len(b) > 0 {
		kind, pos, val := int(ops[0])%len(edits), int(binary.LittleEndian.Uint16(ops[1:3]))%len(b), ops[3]
		ops = ops[4:]
		b = edits[kind](b, pos, val)
	}
	return b
}

// FuzzMutants fuzzes with mutants of seeds: the fuzzer chooses a seed and up
// to 64 bytes of edit operations, mutate (Mutate with a fuzzer's edits)
// applies them, and check gets the mutant and the operations. Every seed is
// added with each of seedOps.
func FuzzMutants(f *testing.F, seeds, seedOps [][]byte, mutate func(base, ops []byte) []byte, check func(t *testing.T, b, ops []byte)) {
	for i := range seeds {
		for _, ops := range seedOps {
			f.Add(uint8(i), ops)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		check(t, mutate(seeds[int(which)%len(seeds)], ops), ops)
	})
}
