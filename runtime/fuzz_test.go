package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// The fuzzers below cover the module upload path and the host_call memory
// helpers. Seeds come from f.Add, from the guests in testdata/guests and
// testdata/adversarial, and from testdata/fuzz/FuzzXxx. Run one with, for
// example:
//
//	go test ./runtime -run '^$' -fuzz '^FuzzValidate$' -fuzztime 30s

// validSeeds returns the committed guests and the adversarial corpus,
// assembled.
func validSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	seeds := [][]byte{scripted(tb), testutil.ReadFile(tb, "testdata/guests/shapes.wasm")}
	files, err := filepath.Glob(filepath.Join(testutil.Root(tb), "testdata", "adversarial", "*.wat"))
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, testutil.WAT(tb, string(src)))
	}
	return seeds
}

// mutate applies edit operations to a copy of base. Each operation is four
// bytes: kind, position (16 bits, modulo the length) and a value.
func mutate(base, ops []byte) []byte {
	return testutil.Mutate(base, ops, testutil.FlipBits, testutil.SetByte, testutil.InsertByte, testutil.DeleteByte,
		testutil.Truncate, testutil.LyingLEB)
}

var (
	fuzzRTOnce sync.Once
	fuzzRT     *runtime.Runtime
	fuzzRTErr  error
)

// fuzzRuntime is one runtime for the whole fuzzing process.
func fuzzRuntime(tb testing.TB) *runtime.Runtime {
	fuzzRTOnce.Do(func() {
		fuzzRT, fuzzRTErr = runtime.New(context.Background(), runtime.Config{
			MaxIdlePerPool: -1,
			Limits:         runtime.Limits{Timeout: 50 * time.Millisecond, InitTimeout: 50 * time.Millisecond, MemoryPages: 64},
		})
	})
	if fuzzRTErr != nil {
		tb.Fatal(fuzzRTErr)
	}
	return fuzzRT
}

// checkUpload runs wasm through the upload path: Validate, then, if it
// accepts, Load and one invocation. Whatever the bytes, nothing panics, every
// refusal is typed, and Load accepts only what Validate accepts.
func checkUpload(t *testing.T, wasm []byte) {
	info, err := runtime.Validate(wasm, runtime.ValidateOptions{})
	if err != nil {
		var ve *runtime.ValidationError
		var le *runtime.LimitError
		if !errors.As(err, &ve) && !errors.As(err, &le) {
			t.Fatalf("Validate: untyped error %T: %v", err, err)
		}
		if c := runtime.Code(err); c != "invalid_module" && c != "limit_exceeded" {
			t.Fatalf("Validate: code %q for %v", c, err)
		}
		if strings.Contains(err.Error(), "goroutine ") {
			t.Fatalf("Validate: a stack trace in %v", err)
		}
		return
	}
	if info == nil || info.Digest != runtime.Digest(wasm) {
		t.Fatalf("Validate accepted the module without describing it: %+v", info)
	}
	rt := fuzzRuntime(t)
	ctx := context.Background()
	m, err := rt.Load(ctx, wasm)
	if err != nil {
		// wazero may still refuse what the bounded reader accepts (it
		// validates function bodies); that is a typed refusal too.
		if runtime.Code(err) != "invalid_module" {
			t.Fatalf("Load after Validate accepted: %v (code %s)", err, runtime.Code(err))
		}
		return
	}
	defer m.Close(ctx)
	lim := runtime.Limits{}
	if min := info.MemoryMinPages; min > 64 {
		lim.MemoryPages = min
	}
	res, err := rt.Invoke(ctx, m, runtime.Request{Tenant: "fuzz", Limits: lim, Context: map[string]any{"outgoing": "x"}})
	if err == nil {
		if res.Decision == nil {
			t.Fatal("no error and no decision")
		}
		return
	}
	if f, ok := abi.AsFailure(err); ok {
		if res == nil || res.Failure != f || res.Decision != nil || res.Reused {
			t.Fatalf("failure %v with result %+v", f, res)
		}
		if strings.Contains(f.Message, "goroutine ") {
			t.Fatalf("a stack trace in %v", f)
		}
		return
	}
	if !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Fatalf("Invoke: %v", err)
	}
}

// FuzzValidate feeds arbitrary bytes to the upload path.
func FuzzValidate(f *testing.F) {
	for _, s := range validSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("\x00asm\x0d\x00\x01\x00"))
	f.Add([]byte("(module)"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		checkUpload(t, wasm)
	})
}

// FuzzValidateMutated mutates valid hooks (and the adversarial corpus) and
// feeds them to the upload path: the mutants keep enough structure to reach
// the ABI checks, the compiler and the guest code.
func FuzzValidateMutated(f *testing.F) {
	seeds := validSeeds(f)
	for i := range seeds {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{0, 10, 0, 0xFF})
		f.Add(uint8(i), []byte{5, 12, 0, 31, 4, 40, 0, 0})
		f.Add(uint8(i), []byte{1, 20, 0, 9, 2, 9, 0, 0x0B, 3, 30, 0, 0})
	}
	f.Fuzz(func(t *testing.T, which uint8, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		checkUpload(t, mutate(seeds[int(which)%len(seeds)], ops))
	})
}

// replyHost answers every call OK with an empty body, so a call writes
// nothing into the guest, and records what it was given.
type replyHost struct {
	mu    sync.Mutex
	calls []abi.Call
}

func (h *replyHost) HostCall(_ context.Context, c *abi.Call) abi.Reply {
	h.mu.Lock()
	h.calls = append(h.calls, *c)
	h.mu.Unlock()
	return abi.Reply{Status: abi.StatusOK}
}

// FuzzHostCallArgs drives host_call's six arguments (and where a pattern of
// known bytes sits in guest memory) through the scripted guest, and checks
// the host's bounds checks and copies against a 64-bit model: a range outside
// memory is an abi_violation and the host is never called; otherwise the
// host gets exactly the bytes the guest pointed at.
func FuzzHostCallArgs(f *testing.F) {
	const memSize = 4 * 65536 // scripted.wat's memory
	for _, s := range [][7]uint32{
		{namePtr, 4, inPtr, 2, outPtr, 16, namePtr},
		{0, 0, 0, 0, outPtr, 16, 0},
		{memSize - 4, 4, 0, 0, 0, 0, memSize - 256},
		{memSize - 3, 4, 0, 0, 0, 0, 0},
		{0xFFFFFFFF, 1, 0, 0, 0, 0, 0},
		{namePtr, 0xFFFFFFFF, inPtr, 1, 0, 0, 0},
		{namePtr, 8, 0xFFFFFFF0, 0x20, 0, 0, 0},
		{namePtr, 8, inPtr, 8, 0xFFFFFFFF, 2, 0},
		{namePtr, 129, inPtr, 8, outPtr, 8, namePtr},
		{0x10, 8, 0x18, 0x100, memSize, 0, 0},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6])
	}
	r, m := loaded(f, runtime.Config{}, scripted(f))
	pattern := make([]byte, 256)
	for i := range pattern {
		pattern[i] = byte(i*7 + 3)
	}
	f.Fuzz(func(t *testing.T, p1, p2, p3, p4, p5, p6, base uint32) {
		// The pattern goes below the guest's own data (0x20000), at base.
		base %= 0x20000 - uint32(len(pattern))
		if p2 > abi.MaxNameBytes {
			// The error body would be written at p5, possibly over the
			// guest's own script; with no room it is only reported.
			p6 = 0
		}
		host := &replyHost{}
		script := opWrite(base, pattern) + opCall(p1, p2, p3, p4, p5, p6)
		res, err := r.Invoke(context.Background(), m, runtime.Request{
			Tenant: "fuzz", Context: map[string]any{"s": "@@" + script}, HostCaller: host,
		})
		in := func(p, n uint32) bool { return uint64(p)+uint64(n) <= memSize }
		host.mu.Lock()
		calls := host.calls
		host.mu.Unlock()
		if !in(p1, p2) || !in(p3, p4) || !in(p5, p6) {
			if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailABIViolation || res.Reused {
				t.Fatalf("out of range: err %v, want an abi_violation", err)
			}
			if len(calls) != 0 {
				t.Fatal("the host was called for an out-of-range call")
			}
			return
		}
		if err != nil {
			t.Fatalf("in range: %v", err)
		}
		got := parseLog(t, res.Decision.Reason)
		if len(got) != 1 {
			t.Fatalf("log %q", res.Decision.Reason)
		}
		switch {
		case p2 == 0 && p4 == 0: // a take; the guest already took its input
			if got[0].status != abi.StatusNoPending || len(calls) != 0 {
				t.Fatalf("take: %v with %d calls", got[0].status, len(calls))
			}
		case p2 > abi.MaxNameBytes:
			if got[0].status != abi.StatusRequestTooLarge || len(calls) != 0 {
				t.Fatalf("long name: %v with %d calls", got[0].status, len(calls))
			}
		default:
			if got[0].status != abi.StatusOK || got[0].length != 0 || len(calls) != 1 {
				t.Fatalf("call: %v (%d bytes) with %d calls", got[0].status, got[0].length, len(calls))
			}
			c := calls[0]
			if len(c.Name) != int(p2) || len(c.Payload) != int(p4) {
				t.Fatalf("the host got a name of %d and a payload of %d bytes, want %d and %d", len(c.Name), len(c.Payload), p2, p4)
			}
			// Where the guest pointed into the pattern, the host got it.
			check := func(what string, got []byte, p uint32) {
				for i := range got {
					if a := uint64(p) + uint64(i); a >= uint64(base) && a < uint64(base)+uint64(len(pattern)) && got[i] != pattern[a-uint64(base)] {
						t.Fatalf("%s byte %d (address %#x) is %#x, want %#x", what, i, a, got[i], pattern[a-uint64(base)])
					}
				}
			}
			check("name", []byte(c.Name), p1)
			check("payload", c.Payload, p3)
		}
	})
}
