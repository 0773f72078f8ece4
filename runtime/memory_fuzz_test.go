package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

// memoryOnly is (module (memory (export "memory") 1)).
var memoryOnly = []byte("\x00asm\x01\x00\x00\x00" +
	"\x05\x03\x01\x00\x01" +
	"\x07\x0a\x01\x06memory\x02\x00")

var (
	memFuzzOnce sync.Once
	memFuzzRT   wazero.Runtime
	memFuzzMod  wazero.CompiledModule
	memFuzzErr  error
)

// FuzzGuestMemory drives a real instance's memory, backed by limitedMemory,
// with a sequence of grows, writes and reads (readGuest, readGuestString,
// writeGuest at any 32-bit pointer and length) and checks each against a
// model: memory never exceeds the hook's limit, a refused grow changes
// nothing and is counted, grown pages are zero, an access is allowed exactly
// when [ptr, ptr+len) is inside memory in 64-bit arithmetic, and a read is a
// copy of what was written, never a view.
func FuzzGuestMemory(f *testing.F) {
	f.Add(uint8(4), []byte{0, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(1), []byte{0, 200, 1, 0xF0, 0xFF, 0xFF, 0xFF, 0x20, 0, 0, 0})
	f.Add(uint8(2), []byte{1, 0xFC, 0xFF, 0, 0, 8, 0, 0, 0, 2, 0xFC, 0xFF, 0, 0, 8, 0, 0, 0})
	f.Add(uint8(3), []byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 0, 2, 0xFF, 0xFF, 0x01, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, limitPages uint8, ops []byte) {
		memFuzzOnce.Do(func() {
			ctx := context.Background()
			memFuzzRT = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
			memFuzzMod, memFuzzErr = memFuzzRT.CompileModule(ctx, memoryOnly)
		})
		if memFuzzErr != nil {
			t.Fatal(memFuzzErr)
		}
		limit := uint32(limitPages%32) + 1
		lm := &limitedMemory{limit: uint64(limit) * pageSize}
		ctx := context.Background()
		mod, err := memFuzzRT.InstantiateModule(experimental.WithMemoryAllocator(ctx, lm), memFuzzMod, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		defer mod.Close(ctx)
		mem := mod.Memory()
		model := make([]byte, pageSize) // one page to start with
		refused := int32(0)
		if len(ops) > 200 {
			ops = ops[:200]
		}
		for len(ops) >= 10 {
			kind := ops[0] % 3
			ptr := binary.LittleEndian.Uint32(ops[1:5])
			n := binary.LittleEndian.Uint32(ops[5:9])
			val := ops[9]
			ops = ops[10:]
			size := uint64(len(model))
			inRange := uint64(ptr)+uint64(n) <= size
			switch kind {
			case 0: // grow by ptr%40 pages
				delta := ptr % 40
				old, ok := mem.Grow(delta)
				want := uint64(len(model))/pageSize+uint64(delta) <= uint64(limit)
				if ok != want {
					t.Fatalf("grow by %d from %d pages (limit %d): ok %v", delta, len(model)/pageSize, limit, ok)
				}
				if ok {
					if old != uint32(len(model)/pageSize) {
						t.Fatalf("grow returned %d, want %d", old, len(model)/pageSize)
					}
					model = append(model, make([]byte, int(delta)*pageSize)...)
				} else {
					refused++
				}
			case 1: // write n%4096 bytes of val at ptr
				b := bytes.Repeat([]byte{val}, int(n%4096))
				ok := writeGuest(mem, ptr, b)
				if ok != (uint64(ptr)+uint64(len(b)) <= size) {
					t.Fatalf("writeGuest(%#x, %d bytes) in %d: %v", ptr, len(b), size, ok)
				}
				if ok {
					copy(model[ptr:], b)
				}
			case 2: // read n bytes at ptr (n limited to what exists)
				got, ok := readGuest(mem, ptr, n)
				if ok != inRange {
					t.Fatalf("readGuest(%#x, %d) in %d: %v", ptr, n, size, ok)
				}
				s, sok := readGuestString(mem, ptr, n)
				if sok != ok {
					t.Fatalf("readGuestString disagrees with readGuest at (%#x, %d)", ptr, n)
				}
				if ok {
					want := model[ptr : uint64(ptr)+uint64(n)]
					if !bytes.Equal(got, want) || s != string(want) {
						t.Fatalf("read at (%#x, %d) differs from what was written", ptr, n)
					}
					if len(got) > 0 {
						got[0] ^= 0xFF // a copy: changing it changes nothing
						if again, _ := readGuest(mem, ptr, 1); again[0] != want[0] {
							t.Fatal("readGuest returned a view of guest memory")
						}
					}
				}
			}
			if uint64(mem.Size()) != uint64(len(model)) || uint64(mem.Size()) > uint64(limit)*pageSize {
				t.Fatalf("memory is %d bytes, model %d, limit %d pages", mem.Size(), len(model), limit)
			}
		}
		if lm.refused.Load() != refused {
			t.Fatalf("%d refusals counted, %d made", lm.refused.Load(), refused)
		}
	})
}
