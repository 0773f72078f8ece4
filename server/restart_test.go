package server_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/wasmhooks/wasmhooks/server"
)

// TestRestart: a server started again on the same data has its tenants'
// chains, keys and credit, and resolves an approval the first one paused.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	p1 := newPlatformAt(t, dir, key)
	if err := p1.admin.CreateTenant(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	pub := p1.key(t, server.RolePublisher, "pubco")
	op := p1.key(t, server.RoleOperator, "acme")
	rtk := p1.key(t, server.RoleRuntime, "acme")
	if _, err := p1.admin.GrantCredit(ctx, "acme", 7, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := op.BindChain(ctx, "acme", chainConfig(publishPolicy(t, pub))); err != nil {
		t.Fatal(err)
	}
	out, err := rtk.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec"}, "r1")
	if err != nil || out.Approval == nil {
		t.Fatalf("%+v %v", out, err)
	}
	p1.srv.Drain()
	p1.hs.Close()
	if err := p1.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}

	p2 := newPlatformAt(t, dir, key)
	op.Base, rtk.Base = p2.hs.URL, p2.hs.URL
	if c, err := op.Credit(ctx, "acme"); err != nil || c.Available != 7 {
		t.Fatalf("credit after restart: %+v %v", c, err)
	}
	if o, err := rtk.Run(ctx, "acme", "message.outbound", map[string]any{"outgoing": "a SECRET"}, ""); err != nil || o.Verdict != "block" {
		t.Fatalf("chain after restart: %+v %v", o, err)
	}
	if o, err := rtk.Run(ctx, "acme", "message.outbound", map[string]any{"outgoing": "hi"}, "r1"); err != nil || o.Verdict != "pending" {
		t.Fatalf("run id after restart: %+v %v", o, err)
	}
	res, err := op.Resolve(ctx, "acme", out.Approval.ID, "deny", nil, "no")
	if err != nil || res.Verdict != "block" || res.Run != "r1" {
		t.Fatalf("resolve after restart: %+v %v", res, err)
	}
	if r, err := rtk.Result(ctx, "acme", out.Approval.ID, 0); err != nil || r == nil || r.Verdict != "block" {
		t.Fatalf("result after restart: %+v %v", r, err)
	}
}
