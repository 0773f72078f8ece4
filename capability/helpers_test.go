package capability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// newCall returns a call from tenant "acme" whose hook is granted name.
func newCall(name, payload string) *abi.Call {
	return &abi.Call{
		Name:    name,
		Payload: []byte(payload),
		Seq:     1,
		Caller: abi.Caller{
			Tenant:     "acme",
			Hook:       "redact",
			Module:     "abc123",
			Invocation: "inv-1",
			Point:      "message.outbound",
			Granted:    []string{name},
		},
	}
}

// counter counts calls of a capability's Execute.
type counter struct{ n atomic.Int64 }

func (c *counter) inc()       { c.n.Add(1) }
func (c *counter) get() int64 { return c.n.Load() }

// meteredProps are the schema properties of the test capabilities' payload:
// how much credit the call used, how large a result it returns, and whether
// it fails or panics.
const meteredProps = `
			"use": {"type": "integer", "minimum": 0},
			"size": {"type": "integer", "minimum": 0},
			"fail": {"type": "boolean"},
			"panic": {"type": "boolean"}`

// payloadInt returns the integer m holds at key, 0 when there is none.
func payloadInt(m map[string]any, key string) int64 {
	n, _ := m[key].(json.Number)
	v, _ := n.Int64()
	return v
}

// fundedLedger returns a memory ledger whose account "acme" holds amount.
func fundedLedger(t testing.TB, amount int64) *MemoryLedger {
	t.Helper()
	l := NewMemoryLedger()
	if err := l.Credit("acme", amount); err != nil {
		t.Fatal(err)
	}
	return l
}

// creditRunner returns a runner of one capability, meteredCap "llm.run" of
// cost 10 with a CreditGate over ledger, and the capability's count of
// executions.
func creditRunner(t testing.TB, ledger Ledger, opts RunnerOptions) (*Runner, *counter) {
	t.Helper()
	execs := &counter{}
	return runnerWith(t, opts, meteredCap("llm.run", 10, execs, &CreditGate{Ledger: ledger})), execs
}

// admitted runs try from goroutines goroutines at once, each tries times
// (try is given the goroutine's index), and returns how many tries returned
// true.
func admitted(goroutines, tries int, try func(i int) bool) int {
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			for range tries {
				if try(i) {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(ok.Load())
}

// meteredCap is a capability whose payload says how much credit it used:
// {"use": n, "size": bytes of result, "fail": bool, "panic": bool}. Its cost
// is always `cost`.
func meteredCap(name string, cost int64, execs *counter, gates ...Gate) Capability {
	return Capability{
		Name:        name,
		Description: "uses the credit its payload says",
		Schema: `{"type": "object", "properties": {` + meteredProps + `},
			"additionalProperties": false}`,
		Gates: gates,
		Cost:  func(any) int64 { return cost },
		Execute: func(ctx context.Context, req *Request) (*Result, error) {
			execs.inc()
			m := req.Payload.(map[string]any)
			if m["panic"] == true {
				panic("metered: secret panic detail /srv/keys")
			}
			use := payloadInt(m, "use")
			if m["fail"] == true {
				return &Result{Usage: Usage{Credit: use}}, errors.New("upstream said 500: token=sk-live-secret")
			}
			size := payloadInt(m, "size")
			return &Result{
				Value: map[string]any{"data": string(bytes.Repeat([]byte("x"), int(size)))},
				Usage: Usage{Credit: use, Units: map[string]int64{"widgets": use}},
			}, nil
		},
	}
}

// countingLedger wraps a Ledger and counts how each reservation resolved.
type countingLedger struct {
	Ledger

	mu       sync.Mutex     // guards the maps
	reserved map[string]int // id -> successful Reserve calls returning it
	resolved map[string]int // id -> successful Settle/Release calls
	settles  int
	releases int
}

func newCountingLedger(l Ledger) *countingLedger {
	return &countingLedger{Ledger: l, reserved: map[string]int{}, resolved: map[string]int{}}
}

func (c *countingLedger) Reserve(ctx context.Context, account string, amount int64, key string) (string, error) {
	id, err := c.Ledger.Reserve(ctx, account, amount, key)
	if err == nil {
		c.mu.Lock()
		c.reserved[id]++
		c.mu.Unlock()
	}
	return id, err
}

func (c *countingLedger) Settle(ctx context.Context, id string, amount int64) (int64, error) {
	n, err := c.Ledger.Settle(ctx, id, amount)
	c.mu.Lock()
	c.settles++
	if err == nil {
		c.resolved[id]++
	}
	c.mu.Unlock()
	return n, err
}

func (c *countingLedger) Release(ctx context.Context, id string) error {
	err := c.Ledger.Release(ctx, id)
	c.mu.Lock()
	c.releases++
	if err == nil {
		c.resolved[id]++
	}
	c.mu.Unlock()
	return err
}

// checkResolvedOnce fails t unless every reservation resolved exactly once.
func (c *countingLedger) checkResolvedOnce(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.reserved {
		if n := c.resolved[id]; n != 1 {
			t.Errorf("reservation %s resolved %d times, want exactly 1", id, n)
		}
	}
	for id, n := range c.resolved {
		if _, ok := c.reserved[id]; !ok {
			t.Errorf("reservation %s resolved %d times but never reserved", id, n)
		}
	}
}

// checkBalance fails t unless account has exactly want available and
// nothing pending.
func checkBalance(t *testing.T, l Ledger, account string, want int64) {
	t.Helper()
	avail, pending, err := l.Balance(context.Background(), account)
	if err != nil {
		t.Fatalf("Balance: %v", err)
	}
	if avail != want || pending != 0 {
		t.Errorf("balance of %s = %d available, %d pending; want %d, 0", account, avail, pending, want)
	}
}

// logBuffer is a slog JSON logger writing into a buffer.
type logBuffer struct{ testutil.SyncBuffer }

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// mustRunner returns NewRunner(reg, opts); an error fails t.
func mustRunner(t testing.TB, reg *Registry, opts RunnerOptions) *Runner {
	t.Helper()
	r, err := NewRunner(reg, opts)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return r
}

// runnerWith returns a runner with opts of a registry of caps alone.
func runnerWith(t testing.TB, opts RunnerOptions, caps ...Capability) *Runner {
	t.Helper()
	reg := NewRegistry()
	for _, c := range caps {
		reg.MustRegister(c)
	}
	return mustRunner(t, reg, opts)
}

func errorMessage(r abi.Reply) string {
	if r.Status == abi.StatusOK {
		return ""
	}
	return abi.DecodeError(r.Status, r.Body).Message
}
