package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestAuditPerTenantVerify: each tenant's audit records are a chain of its
// own, numbered from 0 (another tenant's traffic shows in neither its
// numbers nor its links), and GET .../audit/verify verifies it with the
// platform's key; a record rewritten in the database is reported, by seq,
// and the other tenant's chain still verifies.
func TestAuditPerTenantVerify(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	pin := publishPolicy(t, p.key(t, server.RolePublisher, "pubco"))
	ops := map[string]tenantKeys{}
	for _, tenant := range []string{"ta", "tb"} {
		ops[tenant] = newTenant(t, p, tenant, false)
		ops[tenant].bind(t, chainConfig(pin))
	}
	// Interleaved traffic: ta 3 runs, tb 2.
	for i, tenant := range []string{"ta", "tb", "ta", "tb", "ta"} {
		msg := "hello"
		if i%2 == 0 {
			msg = "the SECRET"
		}
		if _, err := ops[tenant].rt.Run(ctx, tenant, "message.outbound", map[string]any{"outgoing": msg}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for tenant, want := range map[string]int{"ta": 3, "tb": 2} {
		recs, err := ops[tenant].op.Audit(ctx, tenant, -1, 100)
		if err != nil || len(recs) != want {
			t.Fatalf("%s: %d records, want %d: %v", tenant, len(recs), want, err)
		}
		for i, raw := range recs {
			var r struct {
				Seq    int    `json:"seq"`
				Tenant string `json:"tenant"`
			}
			if err := json.Unmarshal(raw, &r); err != nil || r.Seq != i || r.Tenant != tenant {
				t.Fatalf("%s record %d: %s %v", tenant, i, raw, err)
			}
		}
		v, err := ops[tenant].op.VerifyAudit(ctx, tenant)
		if err != nil || !v.Verified || v.Records != want {
			t.Fatalf("%s verify: %+v %v", tenant, v, err)
		}
	}
	// Rewrite ta's record 1: its verdict.
	var line []byte
	if err := p.db.QueryRow(q(`SELECT line FROM audit_records WHERE chain = $1 AND seq = 1`), []byte("ta")).Scan(&line); err != nil {
		t.Fatal(err)
	}
	forged := bytes.Replace(line, []byte(`"allow"`), []byte(`"block"`), 1)
	if bytes.Equal(forged, line) {
		forged = bytes.Replace(line, []byte(`"block"`), []byte(`"allow"`), 1)
	}
	if bytes.Equal(forged, line) {
		t.Fatalf("record 1 has no verdict to rewrite: %s", line)
	}
	if _, err := p.db.Exec(q(`UPDATE audit_records SET line = $1 WHERE chain = $2 AND seq = 1`), forged, []byte("ta")); err != nil {
		t.Fatal(err)
	}
	v, err := ops["ta"].op.VerifyAudit(ctx, "ta")
	if err != nil || v.Verified || v.Seq == nil || *v.Seq != 1 || v.Records != 1 || v.Error == "" {
		t.Fatalf("verify of a rewritten chain: %+v %v", v, err)
	}
	if v, err := ops["tb"].op.VerifyAudit(ctx, "tb"); err != nil || !v.Verified {
		t.Fatalf("the other tenant's chain: %+v %v", v, err)
	}
}

// TestAuditVerifyOneAtATime: a verification reads the tenant's whole chain,
// so a tenant's second one while the first runs is refused (429
// rate_limited, Retry-After) instead of loading the shared database with
// both; another tenant's goes on, and the tenant's next one, once the first
// ended, runs.
func TestAuditVerifyOneAtATime(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	ta, tb := newTenant(t, p, "ta", false), newTenant(t, p, "tb", false)
	release := server.HoldVerify(p.srv, "ta")
	_, err := ta.op.VerifyAudit(ctx, "ta")
	wantCode(t, err, 429, server.CodeRateLimited)
	var pr *server.Problem
	if errors.As(err, &pr) && pr.RetryAfter != 1 {
		t.Errorf("Retry-After %d, want 1", pr.RetryAfter)
	}
	if v, err := tb.op.VerifyAudit(ctx, "tb"); err != nil || !v.Verified {
		t.Fatalf("another tenant's verification: %+v %v", v, err)
	}
	release()
	if v, err := ta.op.VerifyAudit(ctx, "ta"); err != nil || !v.Verified {
		t.Fatalf("after the first ended: %+v %v", v, err)
	}
}

// TestApprovalOutcomeUnrecorded: an approval the store resolved whose
// outcome was never recorded (its node died between the store's Done and
// the index's update: simulated by putting the index row back to pending)
// is not left pending for ever: once the resume's time is long past, the
// expiry pass marks it unrecorded, and a waiting client is told so
// (client.ErrUnrecorded) instead of waiting; it is resolved for good.
func TestApprovalOutcomeUnrecorded(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	op, rtk := a.op, a.rt
	id := a.pending(t, "r1", map[string]any{"tool": "shell.exec"})
	if _, err := op.Resolve(ctx, "acme", id, "approve", nil, ""); err != nil {
		t.Fatal(err)
	}
	// The resume noted when the store resolved it.
	var doneAt sql.NullInt64
	if err := p.db.QueryRow(q(`SELECT done_at FROM serve_approvals WHERE id = $1`), id).Scan(&doneAt); err != nil || !doneAt.Valid {
		t.Fatalf("done_at %v %v", doneAt, err)
	}
	// The node died before recording the outcome, long ago.
	if _, err := p.db.Exec(q(`UPDATE serve_approvals SET status = 'pending', outcome = NULL, done_at = 1 WHERE id = $1`), id); err != nil {
		t.Fatal(err)
	}
	if _, err := rtk.Result(ctx, "acme", id, 30); !errors.Is(err, client.ErrUnrecorded) {
		t.Fatalf("the waiting client: %v", err)
	}
	if list, err := op.Approvals(ctx, "acme", "unrecorded"); err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("unrecorded: %+v %v", list, err)
	}
	_, err := op.Resolve(ctx, "acme", id, "deny", nil, "")
	wantCode(t, err, 409, "approval_resolved")
	// One being resumed now (done_at recent) is left alone.
	id2 := a.pending(t, "r2", map[string]any{"tool": "shell.exec"})
	if _, err := p.db.Exec(q(`UPDATE serve_approvals SET done_at = $1 WHERE id = $2`), time.Now().UnixNano(), id2); err != nil {
		t.Fatal(err)
	}
	if res, err := rtk.Result(ctx, "acme", id2, 1); err != nil || res != nil {
		t.Fatalf("an approval being resumed: %+v %v", res, err)
	}
}
