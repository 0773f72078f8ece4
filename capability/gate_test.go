package capability

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// refusingLedger fails every call, so a test sees whether the gate called it.
type refusingLedger struct{ calls int }

func (l *refusingLedger) Reserve(context.Context, string, int64, string) (string, error) {
	l.calls++
	return "", errors.New("ledger unavailable")
}
func (l *refusingLedger) Settle(context.Context, string, int64) (int64, error) {
	l.calls++
	return 0, errors.New("ledger unavailable")
}
func (l *refusingLedger) Release(context.Context, string) error {
	l.calls++
	return errors.New("ledger unavailable")
}
func (l *refusingLedger) Balance(context.Context, string) (int64, int64, error) {
	return 0, 0, errors.New("ledger unavailable")
}

func TestCreditGate(t *testing.T) {
	ctx := context.Background()
	req := func(tenant string) *Request {
		return &Request{Capability: "llm.run", Caller: abi.Caller{Tenant: tenant}, IdempotencyKey: "inv/1"}
	}
	t.Run("zero cost makes no ledger call", func(t *testing.T) {
		l := &refusingLedger{}
		h, err := (&CreditGate{Ledger: l}).Admit(ctx, req("acme"), 0)
		if h != nil || err != nil || l.calls != 0 {
			t.Errorf("hold %v err %v calls %d", h, err, l.calls)
		}
	})
	t.Run("no tenant is denied", func(t *testing.T) {
		_, err := (&CreditGate{Ledger: NewMemoryLedger()}).Admit(ctx, req(""), 5)
		var de *DeniedError
		if !errors.As(err, &de) || de.Status != abi.StatusDenied {
			t.Errorf("err %v", err)
		}
	})
	t.Run("insufficient credit", func(t *testing.T) {
		_, err := (&CreditGate{Ledger: NewMemoryLedger()}).Admit(ctx, req("acme"), 5)
		if !errors.Is(err, ErrInsufficientCredit) || !errors.Is(err, &abi.Error{Status: abi.StatusInsufficientCredit}) {
			t.Errorf("err %v", err)
		}
	})
	t.Run("ledger failure is not a denial", func(t *testing.T) {
		_, err := (&CreditGate{Ledger: &refusingLedger{}}).Admit(ctx, req("acme"), 5)
		var de *DeniedError
		if err == nil || errors.As(err, &de) {
			t.Errorf("err %v", err)
		}
	})
	t.Run("no ledger", func(t *testing.T) {
		if _, err := (&CreditGate{}).Admit(ctx, req("acme"), 5); err == nil {
			t.Error("no error without a ledger")
		}
	})
	t.Run("hold settles negative usage as zero", func(t *testing.T) {
		l := fundedLedger(t, 10)
		h, err := (&CreditGate{Ledger: l}).Admit(ctx, req("acme"), 5)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := h.Settle(ctx, Usage{Credit: -3}); n != 0 || err != nil {
			t.Errorf("Settle = %d, %v", n, err)
		}
		checkBalance(t, l, "acme", 10)
	})
}

func TestRateGate(t *testing.T) {
	now := time.Unix(1000, 0)
	g := &RateGate{PerSecond: 2, Burst: 3, now: func() time.Time { return now }}
	admit := func(tenant, capName string) abi.Status {
		_, err := g.Admit(context.Background(), &Request{Capability: capName, Caller: abi.Caller{Tenant: tenant}}, 0)
		if err == nil {
			return abi.StatusOK
		}
		var de *DeniedError
		if !errors.As(err, &de) || !errors.Is(err, ErrRateLimited) {
			t.Fatalf("error %v", err)
		}
		return de.Status
	}
	steps := []struct {
		advance time.Duration
		tenant  string
		capName string
		want    abi.Status
	}{
		{0, "a", "x", abi.StatusOK},
		{0, "a", "x", abi.StatusOK},
		{0, "a", "x", abi.StatusOK},
		{0, "a", "x", abi.StatusRateLimited}, // burst of 3 spent
		{0, "b", "x", abi.StatusOK},          // another tenant has its own bucket
		{0, "a", "y", abi.StatusOK},          // another capability too
		{250 * time.Millisecond, "a", "x", abi.StatusRateLimited},
		{250 * time.Millisecond, "a", "x", abi.StatusOK}, // 0.5 s at 2/s refills one
		{0, "a", "x", abi.StatusRateLimited},
		{10 * time.Second, "a", "x", abi.StatusOK}, // refills to the burst, no more
		{0, "a", "x", abi.StatusOK},
		{0, "a", "x", abi.StatusOK},
		{0, "a", "x", abi.StatusRateLimited},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := admit(s.tenant, s.capName); got != s.want {
			t.Errorf("step %d: %v, want %v", i, got, s.want)
		}
	}
}

func TestRateGateDefaultsAndPrune(t *testing.T) {
	tests := []struct {
		perSecond float64
		burst     int
		wantRate  float64
		wantBurst float64
	}{
		{0, 0, 10, 10},
		{0.5, 0, 0.5, 1},
		{2.5, 0, 2.5, 3},
		{5, 7, 5, 7},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/%d", tc.perSecond, tc.burst), func(t *testing.T) {
			rate, burst := NewRateGate(tc.perSecond, tc.burst).config()
			if rate != tc.wantRate || burst != tc.wantBurst {
				t.Errorf("config = %v, %v", rate, burst)
			}
		})
	}

	now := time.Unix(0, 0)
	g := &RateGate{PerSecond: 1, Burst: 1, now: func() time.Time { return now }}
	for i := range maxBuckets {
		if _, err := g.Admit(context.Background(), &Request{Capability: "c", Caller: abi.Caller{Tenant: fmt.Sprint(i)}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Hour) // every bucket has refilled
	if _, err := g.Admit(context.Background(), &Request{Capability: "c", Caller: abi.Caller{Tenant: "new"}}, 0); err != nil {
		t.Fatal(err)
	}
	if n := len(g.buckets); n != 1 {
		t.Errorf("%d buckets after pruning, want 1", n)
	}
}

// TestRateGateHammer admits from many goroutines: never more than the burst
// with a stopped clock.
func TestRateGateHammer(t *testing.T) {
	now := time.Unix(0, 0)
	g := &RateGate{PerSecond: 1, Burst: 50, now: func() time.Time { return now }}
	ok := admitted(20, 10, func(int) bool {
		_, err := g.Admit(context.Background(), &Request{Capability: "c", Caller: abi.Caller{Tenant: "t"}}, 0)
		return err == nil
	})
	if ok != 50 {
		t.Errorf("%d admitted, want 50", ok)
	}
}

func TestDeniedErrorIs(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &DeniedError{Gate: "credit", Status: abi.StatusInsufficientCredit, Reason: "r", Err: ErrInsufficientCredit})
	if !errors.Is(err, ErrInsufficientCredit) {
		t.Error("not ErrInsufficientCredit")
	}
	if !errors.Is(err, &abi.Error{Status: abi.StatusInsufficientCredit}) {
		t.Error("not an insufficient_credit abi.Error")
	}
	if errors.Is(err, &abi.Error{Status: abi.StatusDenied}) {
		t.Error("matches the wrong status")
	}
	var de *DeniedError
	if !errors.As(err, &de) || de.Gate != "credit" {
		t.Error("errors.As failed")
	}
}
