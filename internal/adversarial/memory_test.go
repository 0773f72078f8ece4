package adversarial

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threat: memory.grow far past the hook's limit, then a write to the region
// the hook pretends it got. Defence: the per-instance allocator refuses the
// grow (memory.grow returns -1), the write traps, the failure is reported as
// memory, and the instance is discarded.
func TestMemoryGrowPastLimitThenWrite(t *testing.T) {
	w := newWorld(t)
	lim := runtime.Limits{MemoryPages: 16}
	res, err := w.run(t, "acme", lim, opGrow(0x10000)+opGrow(0xFFFFFFFF)+opGrow(9)+opGrow(8))
	if err != nil {
		t.Fatal(err)
	}
	// grow logs the old size in pages, or -1, sign-extended to 64 bits.
	want := []string{"ffffffffffffffff", "ffffffffffffffff", "ffffffffffffffff", "0000000000000008"}
	if got := entries(res.Decision.Reason); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("grow results %v, want %v", got, want)
	}
	if res.MemoryPages != 16 {
		t.Errorf("memory is %d pages, want the limit of 16", res.MemoryPages)
	}
	t.Run("past the hook's limit", func(t *testing.T) {
		w.faultOnWarmInstance(t, "acme", lim, opGrow(0x100)+opStore(16*65536), abi.FailMemory)
	})
	t.Run("past the runtime's ceiling", func(t *testing.T) {
		// wazero refuses a grow past its own limit (Config.MaxMemoryPages,
		// or 4 GiB) without asking the allocator, which then cannot count
		// the refusal: the write still traps and the instance is discarded,
		// but the failure is reported as a trap, not memory. SECURITY.md,
		// "Known gaps".
		w.faultOnWarmInstance(t, "acme", lim, opGrow(0x10000)+opStore(16*65536), abi.FailMemory, abi.FailTrap)
	})
}

// Threat: a module that declares more initial memory than the runtime allows.
// Defence: refused at load, before compiling.
func TestMemoryMinimumOverTheLimit(t *testing.T) {
	w := newWorld(t)
	err := w.refusedAtLoad(t, corpus(t, "memory-min-over-limit.wat"), "memory_min_pages is 5000, over the limit of 4096")
	var le *runtime.LimitError
	if !errors.As(err, &le) || le.Limit != "memory_min_pages" {
		t.Errorf("err = %v, want a memory_min_pages *LimitError", err)
	}
	// A hook whose minimum is over the limit its operator sets is refused
	// per request.
	_, err = w.run(t, "acme", runtime.Limits{MemoryPages: 4}, "")
	if !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("hostile.wat (8 pages) with a 4-page limit: %v, want ErrInvalidRequest", err)
	}
}

// Threat: a module declaring a 4 GiB maximum, in the hope that the host
// reserves it up front. Defence: accepted, never allocated eagerly, growth
// capped at the hook's limit.
func TestMemoryMaximumOf4GiB(t *testing.T) {
	w := newWorld(t)
	m := w.load(t, corpus(t, "memory-max-4gib.wat"))
	if mx := m.Info().MemoryMaxPages; mx == nil || *mx != 65536 {
		t.Fatalf("declared maximum %v, want 65536", mx)
	}
	const n = 16
	base := heapInuse()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := w.invoke(t, m, runtime.Request{Tenant: fmt.Sprintf("t%d", i), Limits: runtime.Limits{MemoryPages: 64}})
			if err != nil {
				t.Error(err)
				return
			}
			if res.Decision.Reason != "refused" || res.MemoryPages != 1 {
				t.Errorf("grow to 4 GiB: %q with %d pages, want refused with 1", res.Decision.Reason, res.MemoryPages)
			}
		}(i)
	}
	wg.Wait()
	// Sixteen live instances with 4 GiB maxima: a few MiB of heap, not 64 GiB.
	if grew := int64(heapInuse()) - int64(base); grew > 64<<20 {
		t.Errorf("the heap grew by %d MiB for %d instances of one page each", grew>>20, n)
	}
	if s := w.rt.Stats(); s.Instances != n {
		t.Errorf("%d instances alive, want %d (one per tenant)", s.Instances, n)
	}
}

// refusedAtLoad loads wasm, expects a refusal whose message contains want,
// within a bounded time and before anything is compiled, and returns the
// error.
func (w *world) refusedAtLoad(t *testing.T, wasm []byte, want string) error {
	t.Helper()
	before := w.rt.Stats().Modules
	var m *runtime.Module
	var err error
	within(t, 3*time.Second, "refusing a module", func() { m, err = w.rt.Load(context.Background(), wasm) })
	if err == nil {
		_ = m.Close(context.Background())
		t.Fatalf("loaded; want a refusal containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to contain %q", err, want)
	}
	if c := runtime.Code(err); c != "invalid_module" && c != "limit_exceeded" {
		t.Errorf("code %q, want invalid_module or limit_exceeded", c)
	}
	if after := w.rt.Stats().Modules; after != before {
		t.Errorf("%d compiled modules after a refusal, %d before", after, before)
	}
	checkSanitised(t, "load error", err.Error())
	return err
}
