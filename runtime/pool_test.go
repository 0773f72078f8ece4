package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func count(t *testing.T, r *runtime.Runtime, m *runtime.Module, tenant, text string) (int, error) {
	t.Helper()
	res, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: tenant, Context: map[string]any{"outgoing": text}})
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(res.Decision.Reason)
}

func TestPoolsPerTenantAndDiscard(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, counter))
	steps := []struct {
		tenant, text string
		want         int
		fail         bool
	}{
		{"a", "x", 1, false},
		{"a", "x", 2, false}, // warm instance reused
		{"b", "x", 1, false}, // tenant b never gets a's instance
		{"a", "x", 3, false},
		{"a", "!", 0, true},  // trap: instance discarded
		{"a", "x", 1, false}, // fresh instance
		{"b", "x", 2, false},
	}
	for i, s := range steps {
		got, err := count(t, r, m, s.tenant, s.text)
		if s.fail {
			if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailTrap {
				t.Fatalf("step %d: err = %v, want a trap", i, err)
			}
			continue
		}
		if err != nil || got != s.want {
			t.Fatalf("step %d (%s): count %d, err %v; want %d", i, s.tenant, got, err, s.want)
		}
	}
}

func TestHighWaterMarkDiscards(t *testing.T) {
	r, m := loaded(t, runtime.Config{Limits: runtime.Limits{MemoryPages: 16, MemoryHighWaterPages: 8}}, testutil.WAT(t, counter))
	if n, err := count(t, r, m, "a", "x"); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	res := mustInvoke(t, r, m, runtime.Request{Tenant: "a", Context: map[string]any{"outgoing": "^"}})
	if res.Reused || res.MemoryPages != 10 {
		t.Fatalf("after growing to %d pages the instance was reused=%v", res.MemoryPages, res.Reused)
	}
	if n, err := count(t, r, m, "a", "x"); err != nil || n != 1 {
		t.Fatalf("count %d err %v: want a fresh instance", n, err)
	}
}

func TestTimedOutInstanceNeverReused(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	res, err := runScript(t, r, m, echoHost(), runtime.Limits{Timeout: 50 * time.Millisecond}, "L")
	if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailTimeout || res.Reused {
		t.Fatalf("err %v reused %v", err, res != nil && res.Reused)
	}
	// The pool must hand out a working instance afterwards.
	if _, err := runScript(t, r, m, echoHost(), runtime.Limits{}, ""); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireHonoursContext(t *testing.T) {
	r, m := loaded(t, runtime.Config{MaxInstancesPerPool: 1}, scripted(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		// MaxFuel: the loop must hold its instance until its timeout, not
		// run out of fuel first on a fast machine.
		_, _ = r.Invoke(context.Background(), m, runtime.Request{Tenant: "t", Context: map[string]any{"s": "@@L"}, Limits: runtime.Limits{Timeout: 2 * time.Second, Fuel: runtime.MaxFuel}})
	}()
	// Wait until the looping invocation holds the pool's one instance.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st := r.Stats(); st.Instances-st.Idle == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the looping invocation never took its instance")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := r.Invoke(ctx, m, runtime.Request{Tenant: "t", Context: map[string]any{"s": "@@"}})
	if !errors.Is(err, runtime.ErrPoolExhausted) {
		t.Fatalf("err = %v, want ErrPoolExhausted", err)
	}
	// Another tenant has its own pool and is not blocked.
	if _, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "other", Context: map[string]any{"s": "@@"}}); err != nil {
		t.Fatal(err)
	}
	<-done
}

func TestCallerCancelIsNotAHookFailure(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := r.Invoke(ctx, m, runtime.Request{Tenant: "t", Context: map[string]any{"s": "@@L"}, Limits: runtime.Limits{Timeout: 5 * time.Second, Fuel: runtime.MaxFuel}})
	if _, isFailure := abi.AsFailure(err); err == nil || isFailure || res != nil {
		t.Fatalf("res %v err %v: want a plain error, the caller gave up", res, err)
	}
}

func TestConcurrentInvocations(t *testing.T) {
	r, m := loaded(t, runtime.Config{MaxInstancesPerPool: 4}, testutil.WAT(t, counter))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			tenant := fmt.Sprintf("t%d", g%2)
			for i := 0; i < 25; i++ {
				text := "x"
				if i%7 == 3 {
					text = "!"
				}
				_, err := count(t, r, m, tenant, text)
				if text == "x" && err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClosed(t *testing.T) {
	r, err := runtime.New(context.Background(), runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Load(context.Background(), scripted(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close(context.Background())
	if _, err := r.Load(context.Background(), scripted(t)); !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
	if _, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t"}); !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("Invoke after Close: %v", err)
	}
}
