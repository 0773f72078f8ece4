package server_test

import (
	"context"
	"testing"
)

// TestRestart: a server started again on the same data has its tenants'
// chains, keys and credit, and resolves an approval the first one paused.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := hostKey()
	p1 := newPlatformAt(t, dir, key)
	a := newTenant(t, p1, "acme", false)
	op, rtk := a.op, a.rt
	a.grant(t, 7, "g")
	a.bind(t, chainConfig(publishPolicy(t, a.pub)))
	id := a.pending(t, "r1", map[string]any{"tool": "shell.exec"})
	stopPlatform(t, p1)

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
	res, err := op.Resolve(ctx, "acme", id, "deny", nil, "no")
	if err != nil || res.Verdict != "block" || res.Run != "r1" {
		t.Fatalf("resolve after restart: %+v %v", res, err)
	}
	if r, err := rtk.Result(ctx, "acme", id, 0); err != nil || r == nil || r.Verdict != "block" {
		t.Fatalf("result after restart: %+v %v", r, err)
	}
}
