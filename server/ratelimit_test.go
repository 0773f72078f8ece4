package server_test

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
)

// TestRateLimit: a key past its burst gets 429 rate_limited, and another
// key is not affected.
func TestRateLimit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	approvals, _ := chain.NewDirApprovals(filepath.Join(dir, "approvals"))
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	srv, err := server.New(ctx, server.Options{DB: db, Runtime: rt, HostKey: key, Approvals: approvals, AdminKey: adminKey,
		RateLimit: server.RateLimit{PerSecond: 0.001, Burst: 5}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(ctx)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	admin := client.New(hs.URL, adminKey)
	if err := admin.CreateTenant(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateKey(ctx, server.RoleOperator, "acme")
	if err != nil {
		t.Fatal(err)
	}
	op := client.New(hs.URL, k.Key)
	for i := 0; i < 5; i++ {
		if _, err := op.Credit(ctx, "acme"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	_, err = op.Credit(ctx, "acme")
	wantCode(t, err, 429, server.CodeRateLimited)
	// The admin key used 2 of its 5 so far: still served.
	if _, err := admin.Credit(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
}
