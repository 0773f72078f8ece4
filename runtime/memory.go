package runtime

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/wasmhooks/wasmhooks/abi"
)

const pageSize = 65536

// limitedMemory backs one instance's linear memory and refuses to grow it past
// the hook's own limit, so per-hook memory limits hold although wazero's
// limit is runtime-wide. It counts refusals so a failure that follows one is
// reported as a memory failure.
// See RATIONALE.md#why-a-memory-allocator-of-our-own.
type limitedMemory struct {
	limit   uint64 // bytes
	reserve uint64 // bytes to allocate up front (the module's size after init), at most limit
	buf     []byte
	refused atomic.Int32 // grow attempts refused since the last reset
}

var _ experimental.MemoryAllocator = (*limitedMemory)(nil)

// Allocate implements experimental.MemoryAllocator. One limitedMemory backs
// exactly one memory of one instance.
func (m *limitedMemory) Allocate(capacity, max uint64) experimental.LinearMemory {
	capacity = min(maxU(capacity, m.reserve), max)
	if capacity > m.limit {
		capacity = m.limit
	}
	m.buf = make([]byte, 0, capacity)
	return m
}

// Reallocate implements experimental.LinearMemory. It returns nil, which
// makes memory.grow return -1, when size is over the limit.
func (m *limitedMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		m.refused.Add(1)
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		old := len(m.buf)
		m.buf = m.buf[:size]
		clear(m.buf[old:]) // memory.grow must expose zeroed pages
		return m.buf
	}
	newCap := min(size+growMargin(size), m.limit)
	nb := make([]byte, size, newCap)
	copy(nb, m.buf)
	m.buf = nb
	return m.buf
}

// growMargin is the room reserved past size when a memory is reallocated:
// an eighth of it, at least one page. An instance then holds at most an
// eighth more than it uses (doubling left a Go hook using 124 pages with
// 208 reserved), and a memory grown a page at a time is still reallocated
// geometrically: the copies add up to about nine times its final size
// (twice with doubling), 0.3 s of copying for the largest memory the
// runtime allows (MaxMemoryPages, 256 MiB), 30 ms for the default 32 MiB.
// See RATIONALE.md#why-a-memory-allocator-of-our-own.
func growMargin(size uint64) uint64 {
	return max(size/8, pageSize)
}

// Free implements experimental.LinearMemory.
func (m *limitedMemory) Free() { m.buf = nil }

// pages returns the current size of the memory in pages.
func (m *limitedMemory) pages() uint32 { return uint32(len(m.buf) / pageSize) }

// readGuest copies [ptr, ptr+n) out of guest memory. ok is false when the
// range is outside memory. The copy is never a view: the guest cannot change
// what the host acts on.
func readGuest(mem api.Memory, ptr, n uint32) ([]byte, bool) {
	if !abi.InRange(ptr, n, uint64(mem.Size())) {
		return nil, false
	}
	if n == 0 {
		return []byte{}, true
	}
	view, ok := mem.Read(ptr, n)
	if !ok {
		return nil, false
	}
	out := make([]byte, n)
	copy(out, view)
	return out, true
}

// readGuestInto is readGuest into dst's spare capacity (growing it if
// needed): the result is dst[:n], never a view of guest memory.
func readGuestInto(dst []byte, mem api.Memory, ptr, n uint32) ([]byte, bool) {
	if !abi.InRange(ptr, n, uint64(mem.Size())) {
		return nil, false
	}
	view, ok := mem.Read(ptr, n)
	if !ok {
		return nil, false
	}
	return append(dst[:0], view...), true
}

// readGuestString is readGuest for a string.
func readGuestString(mem api.Memory, ptr, n uint32) (string, bool) {
	if !abi.InRange(ptr, n, uint64(mem.Size())) {
		return "", false
	}
	if n == 0 {
		return "", true
	}
	view, ok := mem.Read(ptr, n)
	if !ok {
		return "", false
	}
	return string(view), true
}

// writeGuest copies b into guest memory at ptr.
func writeGuest(mem api.Memory, ptr uint32, b []byte) bool {
	if uint64(len(b)) > 1<<32-1 || !abi.InRange(ptr, uint32(len(b)), uint64(mem.Size())) {
		return false
	}
	if len(b) == 0 {
		return true
	}
	return mem.Write(ptr, b)
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}
