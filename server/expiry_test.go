package server_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
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

// TestExpiryNotBlockedByStuckApprovals: approvals the expiry loop cannot
// resolve (here rows whose approval the store does not know, as after a
// crash between the store's Done and the index's update; a tenant makes
// such ones itself with an approve-on-expiry binding it then unbinds: the
// stale approval refuses the approve) must not keep every later approval of
// every tenant from expiring. The loop read the 100 oldest due rows only.
func TestExpiryNotBlockedByStuckApprovals(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	past := time.Now().Add(-time.Hour).UnixNano()
	for i := range 150 {
		// No placeholders: the same text on SQLite and Postgres.
		p.exec(t, fmt.Sprintf(`INSERT INTO serve_approvals (id, tenant, run, status, view, expires, created) VALUES ('stuck%03d', 'evil', 'r', 'pending', '{}', %d, 'x')`,
			i, past+int64(i)))
	}
	rtk := newBound(t, p, expiringChainConfig).rt
	out, err := rtk.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec"}, "r-exp")
	if err != nil || out.Approval == nil {
		t.Fatalf("%+v %v", out, err)
	}
	res, err := rtk.Result(ctx, "acme", out.Approval.ID, 10)
	if err != nil || res == nil || res.Verdict != "block" {
		t.Fatalf("acme's approval did not expire behind the stuck ones: %+v %v", res, err)
	}
}

// TestResolvedButIndexedPendingBecomesUnrecorded: an approval the store
// resolved whose index row still says pending with no time of resolution
// (the index's update failed, then its node died) is found by the expiry
// pass once it is due (the store answers "resolved"), given that time, and
// marked unrecorded like the others: its waiters were told pending for ever.
func TestResolvedButIndexedPendingBecomesUnrecorded(t *testing.T) {
	ctx := context.Background()
	p := newPlatformTweaked(t, func(o *server.Options) { o.RunTimeout = time.Second })
	a := newAsking(t, p)
	id := a.pending(t, "r-lost-index", map[string]any{"tool": "shell.exec"})
	if _, err := a.op.Resolve(ctx, "acme", id, "approve", nil, ""); err != nil {
		t.Fatal(err)
	}
	p.exec(t, `UPDATE serve_approvals SET status = 'pending', outcome = NULL, done_at = NULL, expires = $1 WHERE id = $2`,
		time.Now().Add(-time.Minute).UnixNano(), id)
	eventually(t, 40*time.Second, 0, "the unrecorded mark comes twice RunTimeout + 10 s after it is found", func() error {
		out, err := a.rt.Result(ctx, "acme", id, 5)
		if errors.Is(err, client.ErrUnrecorded) {
			return nil
		}
		if err != nil || out != nil {
			t.Fatalf("%+v %v", out, err)
		}
		return errors.New("still pending 40 s on")
	})
}
