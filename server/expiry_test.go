package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestApprovalExpiry: an approval nobody resolves is decided by its
// binding's expiry policy, and the client waiting for it gets that outcome.
func TestApprovalExpiry(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	if err := p.admin.CreateTenant(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	pub := p.key(t, server.RolePublisher, "pubco")
	op := p.key(t, server.RoleOperator, "acme")
	rtk := p.key(t, server.RoleRuntime, "acme")
	mod, err := pub.UploadModule(ctx, "pubco", policyWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := pub.Publish(ctx, "pubco", "policy", "1.0.0", mod.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(chainConfig(client.Pin(v))), `"reason": "shell needs a human"}}`,
		`"reason": "shell needs a human"}}, "approval": {"timeout": "200ms", "on_expiry": "deny"}`, 1)
	if _, err := op.BindChain(ctx, "acme", []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	out, err := rtk.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec"}, "r-exp")
	if err != nil || out.Approval == nil {
		t.Fatalf("%+v %v", out, err)
	}
	res, err := rtk.Result(ctx, "acme", out.Approval.ID, 30)
	if err != nil || res == nil || res.Verdict != "block" || res.Run != "r-exp" {
		t.Fatalf("expired: %+v %v", res, err)
	}
	if list, _ := op.Approvals(ctx, "acme", "pending"); len(list) != 0 {
		t.Fatalf("still pending: %+v", list)
	}
}
