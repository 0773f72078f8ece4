package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestExpiryNotBlockedByStuckApprovals: approvals the expiry loop cannot
// resolve (here rows whose approval the store does not know, as after a
// crash between the store's Done and the index's update; a tenant makes
// such ones itself with an approve-on-expiry binding it then unbinds: the
// stale approval refuses the approve) must not keep every later approval of
// every tenant from expiring. The loop read the 100 oldest due rows only.
func TestExpiryNotBlockedByStuckApprovals(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	if err := p.admin.CreateTenant(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour).UnixNano()
	for i := range 150 {
		if _, err := p.db.Exec(`INSERT INTO serve_approvals (id, tenant, run, status, view, expires, created) VALUES (?, 'evil', 'r', 'pending', '{}', ?, 'x')`,
			fmt.Sprintf("stuck%03d", i), past+int64(i)); err != nil {
			t.Fatal(err)
		}
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
	res, err := rtk.Result(ctx, "acme", out.Approval.ID, 10)
	if err != nil || res == nil || res.Verdict != "block" {
		t.Fatalf("acme's approval did not expire behind the stuck ones: %+v %v", res, err)
	}
}
