package capability

import (
	"context"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

// TestCreditGateKeyPerTenant: the idempotency key of a host call is made
// from the run id a tenant's client chooses ("RUN.STEP/SEQ"), and the
// ledger's keys are one namespace for every account, so without the tenant
// in the key one tenant's run "r1" would make another tenant's run "r1"
// fail as "already billed" (and tell it that the other used the id).
func TestCreditGateKeyPerTenant(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLedger()
	for _, tenant := range []string{"acme", "globex"} {
		if err := l.Credit(tenant, 10); err != nil {
			t.Fatal(err)
		}
	}
	g := &CreditGate{Ledger: l}
	for _, tenant := range []string{"acme", "globex"} {
		req := &Request{Capability: "llm.run", Caller: abi.Caller{Tenant: tenant}, IdempotencyKey: "r1.0/1"}
		if _, err := g.Admit(ctx, req, 5); err != nil {
			t.Errorf("tenant %s: %v", tenant, err)
		}
	}
	// The same tenant's retry of the same call is still one reservation.
	req := &Request{Capability: "llm.run", Caller: abi.Caller{Tenant: "acme"}, IdempotencyKey: "r1.0/1"}
	if _, err := g.Admit(ctx, req, 5); err != nil {
		t.Errorf("retry: %v", err)
	}
	if avail, pending, _ := l.Balance(ctx, "acme"); avail != 5 || pending != 5 {
		t.Errorf("acme: available %d pending %d, want 5 and 5", avail, pending)
	}
}
