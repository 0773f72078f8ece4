package testutil

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// soakHookWAT is EmptyHookWAT with a data segment holding soakMarker, which
// SoakModule overwrites: every module it returns has the same code and the
// same function types, and different bytes (so a different digest and a
// compile of its own, in wazero too: the data section is not a custom
// section, which the runtime strips before compiling).
const soakHookWAT = `(module
  (import "hook_v1" "host_call" (func $hc (param i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 2)
  (data (i32.const 0) "{\"action\":\"continue\"}")
  (data (i32.const 64) "` + soakMarker + `")
  (func (export "hook_v1_handle") (param $n i32) (result i64)
    (drop (call $hc (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1024) (local.get $n)))
    (i64.const 21)))`

// soakMarker is the data SoakModule replaces with its version, as many hex
// digits (the module's sizes do not change).
const soakMarker = "wasmhooks-soak-@@@@@@@@@@@@@@@@"

var soakWasm ByteCache

// SoakModule returns version v of a hook that takes its input and
// continues: the versions differ in their bytes only (a data segment), not
// in code or function types. A wazero Runtime keeps every function type it
// has seen for its life (SECURITY.md, "Known gaps"), so a soak test that
// loads new types on every reload would see that known growth, not a leak.
func SoakModule(tb testing.TB, v uint64) []byte {
	tb.Helper()
	base := soakWasm.Get("soak", func() []byte { return WAT(tb, soakHookWAT) })
	i := strings.Index(string(base), soakMarker)
	if i < 0 {
		tb.Fatal("testutil: the soak module lost its marker")
	}
	out := append([]byte(nil), base...)
	copy(out[i+len(soakMarker)-16:], fmt.Sprintf("%016x", v))
	return out
}

// Usage is what a soak test measures after a batch, once garbage is
// collected.
type Usage struct {
	// HeapInuse is runtime.MemStats.HeapInuse, in bytes.
	HeapInuse int64
	// RSS is the process's resident memory, in bytes (/proc/self/statm:
	// it counts what wazero maps outside the Go heap, compiled code
	// among it); -1 where there is no /proc.
	RSS int64
	// Goroutines is runtime.NumGoroutine.
	Goroutines int64
	// FDs counts the open file descriptors (/proc/self/fd); -1 where
	// there is no /proc.
	FDs int64
	// Counts are the test's own counters: the integer fields of what the
	// counts function given to MeasureUsage returned (a runtime.Stats),
	// by their JSON names.
	Counts map[string]int64
}

// MeasureUsage collects garbage (and returns freed memory to the system)
// and measures; counts, if not nil, returns the struct whose integer fields
// fill Usage.Counts.
func MeasureUsage(counts func() any) Usage {
	debug.FreeOSMemory() // a GC, then the scavenger: HeapInuse and RSS without garbage
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u := Usage{HeapInuse: int64(ms.HeapInuse), RSS: -1, Goroutines: int64(runtime.NumGoroutine()), FDs: -1}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				u.RSS = pages * int64(os.Getpagesize())
			}
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		u.FDs = int64(len(fds)) - 1 // less the directory ReadDir opened
	}
	if counts != nil {
		u.Counts = intFields(counts())
	}
	return u
}

// intFields returns the integer fields of the struct v by their JSON names
// (their Go names where they have none).
func intFields(v any) map[string]int64 {
	rv := reflect.ValueOf(v)
	out := map[string]int64{}
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		switch fv := rv.Field(i); {
		case fv.CanInt():
			out[name] = fv.Int()
		case fv.CanUint():
			out[name] = int64(fv.Uint())
		}
	}
	return out
}

// String formats u as one line of a soak test's log (the figures
// BENCHMARKS.md quotes).
func (u Usage) String() string {
	s := fmt.Sprintf("heap %.1f MiB, rss %.1f MiB, goroutines %d, fds %d",
		float64(u.HeapInuse)/(1<<20), float64(u.RSS)/(1<<20), u.Goroutines, u.FDs)
	names := make([]string, 0, len(u.Counts))
	for n := range u.Counts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s += fmt.Sprintf(", %s %d", n, u.Counts[n])
	}
	return s
}

// Growth bounds what a soak test lets each measure grow past the warm-up
// batch's figure; a measure it does not name may not grow at all.
type Growth map[string]int64

// The names of Usage's own measures in a Growth.
const (
	MeasureHeap       = "heap"
	MeasureRSS        = "rss"
	MeasureGoroutines = "goroutines"
	MeasureFDs        = "fds"
)

// measures returns u's measures by name; those it could not take (-1) are
// left out.
func (u Usage) measures() map[string]int64 {
	m := map[string]int64{MeasureHeap: u.HeapInuse, MeasureGoroutines: u.Goroutines}
	if u.RSS >= 0 {
		m[MeasureRSS] = u.RSS
	}
	if u.FDs >= 0 {
		m[MeasureFDs] = u.FDs
	}
	for n, v := range u.Counts {
		m[n] = v
	}
	return m
}

// SoakEnv names the environment variable that makes a soak test long: a
// duration (1h) its batches go on for, instead of SoakBatches of them.
const SoakEnv = "WASMHOOKS_SOAK"

// SoakBatches is how many batches a soak test runs by default, the first
// of them the warm-up.
const SoakBatches = 6

// Soak runs batch (given its number, from 0) SoakBatches times, or for as
// long as SoakEnv says, measuring after each (MeasureUsage with counts),
// and fails tb if a measure of a batch after the first (the warm-up, which
// fills the caches) grew past the first's by more than bound allows: what
// is released on a reload must stay released. It logs the first batches'
// measures (then one line a minute) and each measure's largest growth. It
// keeps no sample but the first, so a long soak does not grow the heap it
// measures.
func Soak(tb testing.TB, bound Growth, counts func() any, batch func(i int)) {
	tb.Helper()
	var until time.Time
	if v := os.Getenv(SoakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			tb.Fatalf("testutil: %s=%q is not a duration: %v", SoakEnv, v, err)
		}
		until = time.Now().Add(d)
	}
	var base map[string]int64
	worst := map[string]int64{}
	var logged time.Time
	var last string // the last batch's line, if not logged
	n := 0
	for ; until.IsZero() && n < SoakBatches || !until.IsZero() && (n < 2 || time.Now().Before(until)); n++ {
		batch(n)
		if tb.Failed() {
			return
		}
		u := MeasureUsage(counts)
		last = fmt.Sprintf("soak batch %d: %v", n, u)
		if n < SoakBatches || time.Since(logged) >= time.Minute {
			tb.Log(last)
			logged, last = time.Now(), ""
		}
		if base == nil {
			base = u.measures()
			continue
		}
		for name, v := range u.measures() {
			worst[name] = max(worst[name], v-base[name])
		}
	}
	if last != "" {
		tb.Log(last)
	}
	names := make([]string, 0, len(worst))
	for name := range worst {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		tb.Logf("soak: %s grew by at most %d over %d batches (bound %d)", name, worst[name], n-1, bound[name])
		if worst[name] > bound[name] {
			tb.Errorf("soak: %s grew by %d after the warm-up batch, more than the %d allowed: something a reload should release is kept", name, worst[name], bound[name])
		}
	}
}

// Meanwhile starts n goroutines, the traffic a soak's batch runs beside its
// reloads: each calls f with its number, again and again, until f fails
// (tb.Error) or stop is called. stop returns once they all have returned.
func Meanwhile(tb testing.TB, n int, f func(w int) error) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := f(w); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	return func() {
		close(done)
		wg.Wait()
	}
}
