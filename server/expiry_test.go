package server_test

import (
	"context"
	"testing"
)

// TestApprovalExpiry: an approval nobody resolves is decided by its
// binding's expiry policy, and the client waiting for it gets that outcome.
func TestApprovalExpiry(t *testing.T) {
	ctx := context.Background()
	a := newBound(t, newPlatform(t), expiringChainConfig)
	op, rtk := a.op, a.rt
	out, err := rtk.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec"}, "r-exp")
	if err != nil || out.Approval == nil {
		t.Fatalf("%+v %v", out, err)
	}
	res, err := rtk.Result(ctx, "acme", out.Approval.ID, 30)
	if err != nil || res == nil || res.Verdict != "block" || res.Run != "r-exp" {
		t.Fatalf("expired: %+v %v", res, err)
	}
	if list, err := op.Approvals(ctx, "acme", "pending"); err != nil || len(list) != 0 {
		t.Fatalf("still pending: %+v %v", list, err)
	}
}
