package abi

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestStatusUnknown(t *testing.T) {
	tests := []struct {
		name string
		s    Status
	}{
		{"first unknown", 13},
		{"2^31", 1 << 31}, // negative as a 32-bit int
		{"max", math.MaxUint32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.s.Known() {
				t.Errorf("Status(%d).Known() = true", uint32(tt.s))
			}
			if got, want := tt.s.String(), fmt.Sprintf("STATUS_%d", uint32(tt.s)); got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
			if got, want := tt.s.Code(), fmt.Sprintf("status_%d", uint32(tt.s)); got != want {
				t.Errorf("Code() = %q, want %q", got, want)
			}
			if s, ok := StatusFromCode(tt.s.Code()); ok {
				t.Errorf("StatusFromCode(%q) = %d, true; want false", tt.s.Code(), s)
			}
		})
	}
}

func TestStatusFromCodeRejects(t *testing.T) {
	for _, code := range []string{"", "OK", "Denied", "denied ", "status_3", "unknown"} {
		t.Run(fmt.Sprintf("%q", code), func(t *testing.T) {
			if s, ok := StatusFromCode(code); ok {
				t.Errorf("StatusFromCode(%q) = %d, true; want false", code, s)
			}
		})
	}
}

// TestPack: a host_call result and hook_v1_handle's result are the same
// layout, the high word's 32 bits above the low word's, so every row holds
// for both pairs of functions.
func TestPack(t *testing.T) {
	tests := []struct {
		name   string
		hi, lo uint32
		want   uint64
	}{
		{"zero (for a handle, a failure)", 0, 0, 0},
		{"ok with body", uint32(StatusOK), 21, 21},
		{"status only", uint32(StatusDenied), 0, 3 << 32},
		{"buffer too small", uint32(StatusBufferTooSmall), 70000, 8<<32 | 70000},
		{"typical pointer", 1024, 21, 1024<<32 | 21},
		{"top of a 4 GiB memory", math.MaxUint32, 1, math.MaxUint32<<32 | 1},
		{"max length", 0, math.MaxUint32, math.MaxUint32},
		{"max high word", math.MaxUint32, 0, math.MaxUint32 << 32},
		{"all ones", math.MaxUint32, math.MaxUint32, math.MaxUint64},
		{"high bit of length does not leak", uint32(StatusRateLimited), 1 << 31, 12<<32 | 1<<31},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PackResult(Status(tt.hi), tt.lo); got != tt.want {
				t.Errorf("PackResult(%d, %d) = %#x, want %#x", tt.hi, tt.lo, got, tt.want)
			}
			if got := PackPtrLen(tt.hi, tt.lo); got != tt.want {
				t.Errorf("PackPtrLen(%d, %d) = %#x, want %#x", tt.hi, tt.lo, got, tt.want)
			}
			// The i64 a guest sees is the same bits, signed.
			for _, v := range []uint64{tt.want, uint64(int64(tt.want))} {
				if s, n := UnpackResult(v); s != Status(tt.hi) || n != tt.lo {
					t.Errorf("UnpackResult(%#x) = %d, %d; want %d, %d", v, s, n, tt.hi, tt.lo)
				}
				if ptr, n := UnpackPtrLen(v); ptr != tt.hi || n != tt.lo {
					t.Errorf("UnpackPtrLen(%#x) = %d, %d; want %d, %d", v, ptr, n, tt.hi, tt.lo)
				}
			}
		})
	}
}

func TestUnpackRoundTrip(t *testing.T) {
	// Every 64-bit value splits and packs back to itself.
	for _, v := range []uint64{0, 1, 1 << 31, 1 << 32, 1<<32 - 1, 1<<63 | 5, math.MaxUint64, 0xdeadbeefcafef00d} {
		s, n := UnpackResult(v)
		if PackResult(s, n) != v {
			t.Errorf("PackResult(UnpackResult(%#x)) = %#x", v, PackResult(s, n))
		}
		p, l := UnpackPtrLen(v)
		if PackPtrLen(p, l) != v {
			t.Errorf("PackPtrLen(UnpackPtrLen(%#x)) = %#x", v, PackPtrLen(p, l))
		}
	}
}

func TestInRange(t *testing.T) {
	const page = 65536
	const max32 = math.MaxUint32
	tests := []struct {
		name        string
		ptr, length uint32
		size        uint64
		want        bool
	}{
		{"empty at zero in empty memory", 0, 0, 0, true},
		{"one byte in empty memory", 0, 1, 0, false},
		{"empty at the end", page, 0, page, true},
		{"empty one past the end", page + 1, 0, page, false},
		{"whole memory", 0, page, page, true},
		{"one past the whole memory", 0, page + 1, page, false},
		{"last byte", page - 1, 1, page, true},
		{"last byte plus one", page - 1, 2, page, false},
		{"exactly at the end", 100, page - 100, page, true},
		{"one past the end", 101, page - 100, page, false},
		{"ptr past the end", page, 1, page, false},
		// 32-bit arithmetic would wrap these to small numbers.
		{"wraps 2^32 to 0", max32, 1, page, false},
		{"wraps 2^32 to 9", max32, 10, page, false},
		{"wraps to exactly size", max32, page + 1, page, false},
		{"max ptr and max len", max32, max32, page, false},
		{"2^31 + 2^31", 1 << 31, 1 << 31, page, false},
		// A 4 GiB memory (65536 pages) has size 2^32, beyond uint32.
		{"4 GiB: last byte", max32, 1, 1 << 32, true},
		{"4 GiB: everything", 0, max32, 1 << 32, true},
		{"4 GiB: one past", max32, 2, 1 << 32, false},
		{"4 GiB: max ptr and max len", max32, max32, 1 << 32, false},
		{"huge size", max32, max32, math.MaxUint64, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InRange(tt.ptr, tt.length, tt.size); got != tt.want {
				t.Errorf("InRange(%d, %d, %d) = %t, want %t", tt.ptr, tt.length, tt.size, got, tt.want)
			}
		})
	}
}

func TestIsTake(t *testing.T) {
	tests := []struct {
		name           string
		nameLen, inLen uint32
		want           bool
	}{
		{"take", 0, 0, true},
		{"named call without payload", 7, 0, false},
		{"payload without name", 0, 2, false},
		{"ordinary call", 7, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsTake(tt.nameLen, tt.inLen); got != tt.want {
				t.Errorf("IsTake(%d, %d) = %t, want %t", tt.nameLen, tt.inLen, got, tt.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	// The wire names of ABI.md; a typo here would refuse every module.
	tests := []struct{ name, got, want string }{
		{"ImportModule", ImportModule, "hook_v1"},
		{"HostCallImport", HostCallImport, "host_call"},
		{"MemoryExport", MemoryExport, "memory"},
		{"HandleExport", HandleExport, "hook_v1_handle"},
		{"InitializeExport", InitializeExport, "_initialize"},
		{"ManifestSection", ManifestSection, "hook_v1.manifest"},
		{"WASIModule", WASIModule, "wasi_snapshot_preview1"},
		{"HostCallSignature", HostCallSignature, "(i32, i32, i32, i32, i32, i32) -> i64"},
		{"HandleSignature", HandleSignature, "(i32) -> i64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
			}
		})
	}
	if Major != 1 || Minor != 2 {
		t.Errorf("version %d.%d, this package implements 1.2", Major, Minor)
	}
}

// TestWASIFunctions: the set itself, each function with its signature, is
// ABI.md's WASI table, which TestABIDoc holds WASIFunctions to (and
// TestGoWASIImports holds to what Go's wasip1 port imports).
func TestWASIFunctions(t *testing.T) {
	funcs := WASIFunctions()
	if len(funcs) != len(wasiFunctions) || len(funcs) == 0 {
		t.Errorf("WASIFunctions has %d functions, the set %d", len(funcs), len(wasiFunctions))
	}
	for name, sig := range funcs {
		t.Run(name, func(t *testing.T) {
			if got, ok := WASISignature(name); !ok || got != sig {
				t.Errorf("WASISignature = %q, %v; want %q, true", got, ok, sig)
			}
		})
	}
	if _, ok := WASISignature("path_open"); ok {
		t.Errorf("WASISignature(path_open) reports an allowed import")
	}
	// The set cannot be changed through the copy a caller holds.
	funcs["path_open"] = "(i32) -> i32"
	delete(funcs, "fd_write")
	if _, ok := WASISignature("path_open"); ok {
		t.Errorf("adding to the returned map added to the set")
	}
	if _, ok := WASISignature("fd_write"); !ok {
		t.Errorf("deleting from the returned map deleted from the set")
	}
	// Nothing in the set opens a file, a socket or a path.
	for name := range wasiFunctions {
		for _, bad := range []string{"path_", "sock_", "fd_read", "fd_pread", "fd_readdir"} {
			if strings.HasPrefix(name, bad) {
				t.Errorf("%s grants an effect and must not be in the set", name)
			}
		}
	}
}

func TestErrorIs(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", NewError(StatusDenied, "no grant"))
	if !errors.Is(err, &Error{Status: StatusDenied}) {
		t.Error("errors.Is does not match an Error of the same status")
	}
	if errors.Is(err, &Error{Status: StatusInsufficientCredit}) {
		t.Error("errors.Is matches an Error of another status")
	}
	e, ok := AsError(err)
	if !ok || e.Status != StatusDenied || e.Code != "denied" || e.Message != "no grant" {
		t.Errorf("AsError = %+v, %t", e, ok)
	}
	if _, ok := AsError(errors.New("plain")); ok {
		t.Error("AsError found an Error in a plain error")
	}
	if got, want := Errorf(StatusQuotaExceeded, "%d calls", 64).Error(), "quota_exceeded: 64 calls"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := NewError(StatusNoPending, "").Error(), "no_pending"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestPoints(t *testing.T) {
	ps := Points()
	if len(ps) == 0 {
		t.Fatal("no points")
	}
	for i, p := range ps {
		t.Run(p.Name, func(t *testing.T) {
			if i > 0 && ps[i-1].Name >= p.Name {
				t.Errorf("Points() not sorted: %q before %q", ps[i-1].Name, p.Name)
			}
			got, ok := LookupPoint(p.Name)
			if !ok || got.Name != p.Name {
				t.Errorf("LookupPoint(%q) = %v, %t", p.Name, got.Name, ok)
			}
			if p.Description == "" || len(p.Fields) == 0 {
				t.Errorf("incomplete point: %+v", p)
			}
			// The built-in points pass the checks a platform's point
			// must pass (its name aside).
			reg := p
			reg.Name = PlatformPointPrefix + strings.ReplaceAll(p.Name, ".", "-")
			if err := checkPlatformPoint(reg); err != nil {
				t.Errorf("the point fails a registered point's checks: %v", err)
			}
			for _, c := range p.Changeable {
				if !contains(p.Fields, c) {
					t.Errorf("changeable field %q is not a context field", c)
				}
				if !p.CanChange(c) {
					t.Errorf("CanChange(%q) = false", c)
				}
			}
			// A transform replaces the primary field, so it must be
			// changeable, or every transform would be refused.
			if p.Primary != "" && !p.CanChange(p.Primary) {
				t.Errorf("primary field %q is not changeable", p.Primary)
			}
			if p.CanChange("") || p.CanChange("not-a-field") {
				t.Error("CanChange accepts a field that is not changeable")
			}
			// No context field may collide with a canonical decision
			// key, or a top-level modify would be ambiguous.
			for _, f := range p.Fields {
				if canonicalKeys[f] || outcomeKeys[f] {
					t.Errorf("context field %q collides with a decision key", f)
				}
			}
		})
	}
	if _, ok := LookupPoint("message"); ok {
		t.Error(`LookupPoint("message") found a point`)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
