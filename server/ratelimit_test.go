package server_test

import (
	"context"
	"testing"

	"github.com/wasmhooks/wasmhooks/server"
)

// TestRateLimit: a key past its burst gets 429 rate_limited, and another
// key is not affected.
func TestRateLimit(t *testing.T) {
	ctx := context.Background()
	p := newPlatformTweaked(t, func(o *server.Options) { o.RateLimit = server.RateLimit{PerSecond: 0.001, Burst: 5} })
	admin := p.admin
	if err := admin.CreateTenant(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	op := p.key(t, server.RoleOperator, "acme")
	for i := 0; i < 5; i++ {
		if _, err := op.Credit(ctx, "acme"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	_, err := op.Credit(ctx, "acme")
	wantCode(t, err, 429, server.CodeRateLimited)
	// The admin key used 2 of its 5 so far: still served.
	if _, err := admin.Credit(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
}
