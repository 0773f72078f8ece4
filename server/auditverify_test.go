package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/api"
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
	ops := boundTenants(t, p, "ta", "tb")
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
	line := queryValue[[]byte](t, p, `SELECT line FROM audit_records WHERE chain = $1 AND seq = 1`, []byte("ta"))
	forged := bytes.Replace(line, []byte(`"allow"`), []byte(`"block"`), 1)
	if bytes.Equal(forged, line) {
		forged = bytes.Replace(line, []byte(`"block"`), []byte(`"allow"`), 1)
	}
	if bytes.Equal(forged, line) {
		t.Fatalf("record 1 has no verdict to rewrite: %s", line)
	}
	p.exec(t, `UPDATE audit_records SET line = $1 WHERE chain = $2 AND seq = 1`, forged, []byte("ta"))
	// The verification from the checkpoint the first one kept reads the
	// chain from record 2 on: the rewrite before it is found by a full one.
	v, err := ops["ta"].op.VerifyAuditFrom(ctx, "ta", true, nil)
	if err != nil || v.Verified || v.Seq == nil || *v.Seq != 1 || v.Records != 1 || v.Error == "" || v.Cause != api.AuditCauseRecord {
		t.Fatalf("verify of a rewritten chain: %+v %v", v, err)
	}
	if v, err := ops["tb"].op.VerifyAudit(ctx, "tb"); err != nil || !v.Verified {
		t.Fatalf("the other tenant's chain: %+v %v", v, err)
	}
}

// boundTenants makes tenants on p, each bound to a chain of a published
// policy hook, and returns their keys.
func boundTenants(t *testing.T, p *platform, tenants ...string) map[string]tenantKeys {
	t.Helper()
	pin := publishPolicy(t, p.key(t, server.RolePublisher, "pubco"))
	ops := map[string]tenantKeys{}
	for _, tenant := range tenants {
		ops[tenant] = newTenant(t, p, tenant, false)
		ops[tenant].bind(t, chainConfig(pin))
	}
	return ops
}

// TestAuditVerifyOneAtATime: a verification may read the tenant's whole
// chain (a full one), so a tenant's second one while the first runs is
// refused (429 rate_limited, Retry-After) instead of loading the shared
// database with both; another tenant's goes on, and the tenant's next one,
// once the first ended, runs.
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

// TestAuditVerifyOneAtATimeAcrossNodes: the bound holds for the platform:
// a verification running on one node makes the tenant's second one, on the
// other node sharing the database, 429 (without the lease each node let
// one run: two at once).
func TestAuditVerifyOneAtATimeAcrossNodes(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, db string) {
		ctx := context.Background()
		c := twoNodes(t, db, func(*server.Options) {})
		ta := newTenant(t, c.nodes[0], "ta", false)
		release := server.HoldVerify(c.nodes[0].srv, "ta")
		if release == nil {
			t.Fatal("no verification was running, yet the hold was refused")
		}
		_, err := on(ta.op, c.nodes[1]).VerifyAudit(ctx, "ta")
		wantCode(t, err, 429, server.CodeRateLimited)
		release()
		if v, err := on(ta.op, c.nodes[1]).VerifyAudit(ctx, "ta"); err != nil || !v.Verified {
			t.Fatalf("after the first ended: %+v %v", v, err)
		}
	})
}

// auditChain is a tenant whose audit chain holds records, as verified once
// (its checkpoint kept), and how to verify it counting the rows read.
type auditChain struct {
	t      *testing.T
	p      *platform
	tenant string
	keys   tenantKeys
	reads  *atomic.Int64
	first  *api.AuditCheckpoint // the checkpoint of the first verification
}

// newAuditChain makes tenant with n audit records, verified once.
func newAuditChain(t *testing.T, p *platform, pin, tenant string, reads *atomic.Int64, n int) *auditChain {
	t.Helper()
	c := &auditChain{t: t, p: p, tenant: tenant, keys: newTenant(t, p, tenant, false), reads: reads}
	c.keys.bind(t, chainConfig(pin))
	c.run(n)
	v, rows := c.verify(false, nil)
	if !v.Verified || !v.Full || v.From != 0 || v.Records != n || v.Read != n || rows != int64(n) || v.Checkpoint == nil || v.Checkpoint.Records != uint64(n) {
		t.Fatalf("the first verification: %+v, %d rows", v, rows)
	}
	c.first = v.Checkpoint
	return c
}

// run makes n records.
func (c *auditChain) run(n int) {
	c.t.Helper()
	for range n {
		if _, err := c.keys.rt.Run(context.Background(), c.tenant, "message.outbound", map[string]any{"outgoing": "hello"}, ""); err != nil {
			c.t.Fatal(err)
		}
	}
}

// verify verifies the chain and returns the answer and the rows it read.
func (c *auditChain) verify(full bool, given *api.AuditCheckpoint) (*api.AuditVerifyDoc, int64) {
	c.t.Helper()
	c.reads.Store(0)
	v, err := c.keys.op.VerifyAuditFrom(context.Background(), c.tenant, full, given)
	if err != nil {
		c.t.Fatal(err)
	}
	return v, c.reads.Load()
}

// exec runs a statement on the database, as an attacker who can write it.
func (c *auditChain) exec(query string, args ...any) {
	c.t.Helper()
	c.p.exec(c.t, query, args...)
}

// cut deletes the records from seq on and, if rewind, puts the chain's head
// row back to the record before, as a writer hiding the cut would.
func (c *auditChain) cut(seq int, rewind bool) {
	c.t.Helper()
	c.exec(`DELETE FROM audit_records WHERE chain = $1 AND seq >= $2`, []byte(c.tenant), seq)
	if rewind {
		h := queryValue[string](c.t, c.p, `SELECT hash FROM audit_records WHERE chain = $1 AND seq = $2`, []byte(c.tenant), seq-1)
		c.exec(`UPDATE audit_chains SET next = $1, head = $2 WHERE chain = $3`, seq, h, []byte(c.tenant))
	}
}

// wantBroken checks a verification's answer: not verified, for cause, at
// seq (none for the checkpoint's cause).
func (c *auditChain) wantBroken(v *api.AuditVerifyDoc, cause string, seq uint64) {
	c.t.Helper()
	if v.Verified || v.Cause != cause || v.Error == "" || v.Checkpoint != nil {
		c.t.Fatalf("got %+v, want a failure for %s", v, cause)
	}
	if cause == api.AuditCauseCheckpoint {
		if v.Seq != nil {
			c.t.Fatalf("got %+v, want no seq", v)
		}
		return
	}
	if v.Seq == nil || *v.Seq != seq || v.Records != int(seq) {
		c.t.Fatalf("got %+v, want the failure at seq %d", v, seq)
	}
}

// TestAuditVerifyCheckpoint: a verification keeps the checkpoint of the
// end it verified (records counted and head hash, MACed under the host key)
// in the database, and the next one reads the chain from there (only the
// checkpoint's last record and those after it: counted as rows read)
// unless ?full=true; records cut from the end after a checkpoint are
// reported as missing with the first missing seq, the database's head row
// rewound or not; a record rewritten before the checkpoint is found by a
// full verification; a checkpoint row changed in the database is refused as
// such; and a checkpoint the client kept and passes back catches what a
// writer of the database can hide (the checkpoint row deleted, or rolled
// back with the chain to an older pair).
func TestAuditVerifyCheckpoint(t *testing.T) {
	p := newPlatform(t)
	pin := publishPolicy(t, p.key(t, server.RolePublisher, "pubco"))
	reads := server.CountVerifyReads(p.srv)

	t.Run("incremental", func(t *testing.T) {
		c := newAuditChain(t, p, pin, "inc", reads, 4)
		if kept := queryValue[int64](t, p, `SELECT records FROM audit_checkpoints WHERE chain = $1`, []byte("inc")); kept != 4 {
			t.Fatalf("the checkpoint kept: %d", kept)
		}
		c.run(3)
		// Record 3 (the checkpoint's last) and the three after it.
		if v, rows := c.verify(false, nil); !v.Verified || v.Full || v.From != 4 || v.Records != 7 || v.Read != 4 || rows != 4 || v.Checkpoint.Records != 7 {
			t.Fatalf("from the checkpoint: %+v, %d rows", v, rows)
		}
		v, rows := c.verify(false, nil)
		if !v.Verified || v.From != 7 || v.Records != 7 || rows != 1 {
			t.Fatalf("nothing new: %+v, %d rows", v, rows)
		}
		// The answer's checkpoint passed back, nothing new: the kept one
		// and the client's count the same records.
		if v, rows := c.verify(false, v.Checkpoint); !v.Verified || v.From != 7 || v.Records != 7 || rows != 1 {
			t.Fatalf("nothing new, the answer's checkpoint passed back: %+v, %d rows", v, rows)
		}
		if v, rows := c.verify(true, nil); !v.Verified || !v.Full || v.From != 0 || v.Records != 7 || rows != 7 {
			t.Fatalf("full: %+v, %d rows", v, rows)
		}
		// The client's older checkpoint: read from it.
		if v, rows := c.verify(false, c.first); !v.Verified || v.From != 4 || v.Records != 7 || rows != 4 {
			t.Fatalf("from the client's checkpoint: %+v, %d rows", v, rows)
		}
	})
	for _, rewind := range []bool{false, true} {
		t.Run(fmt.Sprintf("cut, head row rewound %v", rewind), func(t *testing.T) {
			tenant := fmt.Sprintf("cut%v", rewind)
			c := newAuditChain(t, p, pin, tenant, reads, 7)
			c.cut(5, rewind)
			v, _ := c.verify(false, nil)
			c.wantBroken(v, api.AuditCauseMissing, 5)
			v, _ = c.verify(true, nil)
			c.wantBroken(v, api.AuditCauseMissing, 5)
		})
	}
	// Records cut (the head row rewound) and the chain grown again by
	// runs (records MACed by the platform, as after a cut it did not see):
	// the checkpoint's last record is not the one it names, to its count
	// or past it.
	for _, more := range []int{3, 5} {
		t.Run(fmt.Sprintf("cut and regrown by %d", more), func(t *testing.T) {
			c := newAuditChain(t, p, pin, fmt.Sprintf("regrown%d", more), reads, 7)
			c.cut(4, true)
			c.run(more)
			v, _ := c.verify(false, nil)
			c.wantBroken(v, api.AuditCauseRecord, 6)
		})
	}
	// Another tenant's records, head row and checkpoint row put in the
	// place of the tenant's (one key MACs every tenant's chain): refused
	// at the first record read, without naming the other tenant.
	t.Run("another tenant's chain", func(t *testing.T) {
		donor := newAuditChain(t, p, pin, "donor", reads, 6)
		c := newAuditChain(t, p, pin, "victim", reads, 4)
		victim, from := []byte("victim"), []byte("donor")
		c.exec(`DELETE FROM audit_records WHERE chain = $1`, victim)
		c.exec(`INSERT INTO audit_records (chain, seq, prev, hash, run, line) SELECT $1, seq, prev, hash, run, line FROM audit_records WHERE chain = $2`, victim, from)
		c.exec(`UPDATE audit_chains SET next = (SELECT next FROM audit_chains WHERE chain = $2), head = (SELECT head FROM audit_chains WHERE chain = $2) WHERE chain = $1`, victim, from)
		c.exec(`UPDATE audit_checkpoints SET records = $1, head = $2, mac = $3 WHERE chain = $4`, int64(donor.first.Records), donor.first.Head, donor.first.MAC, victim)
		v, _ := c.verify(false, nil)
		c.wantBroken(v, api.AuditCauseRecord, 5)
		v, _ = c.verify(true, nil)
		c.wantBroken(v, api.AuditCauseRecord, 0)
		if strings.Contains(v.Error, "donor") {
			t.Fatalf("the error names the other tenant: %s", v.Error)
		}
	})
	t.Run("rewritten before the checkpoint", func(t *testing.T) {
		c := newAuditChain(t, p, pin, "rew", reads, 5)
		line := queryValue[[]byte](t, p, `SELECT line FROM audit_records WHERE chain = $1 AND seq = 1`, []byte("rew"))
		forged := bytes.Replace(line, []byte(`"continue"`), []byte(`"block"`), 1)
		if bytes.Equal(forged, line) {
			t.Fatalf("record 1 has no verdict to rewrite: %s", line)
		}
		c.exec(`UPDATE audit_records SET line = $1 WHERE chain = $2 AND seq = 1`, forged, []byte("rew"))
		// From the checkpoint: record 1 is not read.
		if v, rows := c.verify(false, nil); !v.Verified || v.From != 5 || rows != 1 {
			t.Fatalf("from the checkpoint: %+v, %d rows", v, rows)
		}
		v, _ := c.verify(true, nil)
		c.wantBroken(v, api.AuditCauseRecord, 1)
	})
	t.Run("the checkpoint row changed", func(t *testing.T) {
		c := newAuditChain(t, p, pin, "ckpt", reads, 7)
		// A cut hidden by moving the checkpoint back with the head row:
		// its MAC does not verify.
		c.cut(5, true)
		h := queryValue[string](t, p, `SELECT head FROM audit_chains WHERE chain = $1`, []byte("ckpt"))
		c.exec(`UPDATE audit_checkpoints SET records = 5, head = $1 WHERE chain = $2`, h, []byte("ckpt"))
		for _, full := range []bool{false, true} {
			v, rows := c.verify(full, nil)
			c.wantBroken(v, api.AuditCauseCheckpoint, 0)
			if rows != 0 {
				t.Fatalf("%d rows read", rows)
			}
		}
	})
	t.Run("what the client kept", func(t *testing.T) {
		c := newAuditChain(t, p, pin, "client", reads, 4)
		c.run(3)
		v, _ := c.verify(false, nil)
		at7 := v.Checkpoint
		// The checkpoint row deleted and the chain cut: the database alone
		// cannot tell (a full verification of 5 records holds)...
		c.cut(5, true)
		c.exec(`DELETE FROM audit_checkpoints WHERE chain = $1`, []byte("client"))
		if v, _ := c.verify(false, nil); !v.Verified || !v.Full || v.Records != 5 {
			t.Fatalf("the chain cut, its checkpoint deleted: %+v", v)
		}
		// ... the client's checkpoint can.
		v, _ = c.verify(false, at7)
		c.wantBroken(v, api.AuditCauseMissing, 5)
		v, _ = c.verify(true, at7)
		c.wantBroken(v, api.AuditCauseMissing, 5)
		// Rolled back to an older pair (the checkpoint of 4 records, kept
		// from the first answer): the same.
		c.exec(`UPDATE audit_checkpoints SET records = $1, head = $2, mac = $3 WHERE chain = $4`, int64(c.first.Records), c.first.Head, c.first.MAC, []byte("client"))
		if v, _ := c.verify(false, nil); !v.Verified || v.From != 4 {
			t.Fatalf("rolled back to an older pair: %+v", v)
		}
		v, _ = c.verify(false, at7)
		c.wantBroken(v, api.AuditCauseMissing, 5)
	})
	t.Run("bad parameters", func(t *testing.T) {
		c := newAuditChain(t, p, pin, "bad", reads, 2)
		forged := *c.first
		forged.Records++
		_, err := c.keys.op.VerifyAuditFrom(context.Background(), "bad", false, &forged)
		wantCode(t, err, 422, server.CodeInvalidRequest)
		good, err := json.Marshal(c.first)
		if err != nil {
			t.Fatal(err)
		}
		extra := append(bytes.TrimSuffix(good, []byte("}")), `,"extra":1}`...)
		for _, query := range []string{
			"?full=maybe", "?full=true&full=false",
			"?checkpoint=%7Bnot", "?checkpoint=" + url.QueryEscape(string(extra)),
			"?checkpoint=" + url.QueryEscape(string(good)) + "&checkpoint=" + url.QueryEscape(string(good)),
			"?checkpoint=" + url.QueryEscape(string(good)) + "&x=%zz",
			"?checkpoint=" + url.QueryEscape(string(good)+strings.Repeat(" ", server.MaxVerifyCheckpointBytes)),
		} {
			var d api.AuditVerifyDoc
			err := c.keys.op.Do(context.Background(), "GET", "/v1/tenants/bad/audit/verify"+query, "", nil, &d)
			wantCode(t, err, 422, server.CodeInvalidRequest)
		}
		var d api.AuditVerifyDoc
		if err := c.keys.op.Do(context.Background(), "GET", "/v1/tenants/bad/audit/verify?checkpoint="+url.QueryEscape(string(good)), "", nil, &d); err != nil || !d.Verified {
			t.Fatalf("the good checkpoint: %+v %v", d, err)
		}
	})
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
	if doneAt := queryValue[sql.NullInt64](t, p, `SELECT done_at FROM serve_approvals WHERE id = $1`, id); !doneAt.Valid {
		t.Fatalf("done_at %v", doneAt)
	}
	// The node died before recording the outcome, long ago.
	p.exec(t, `UPDATE serve_approvals SET status = 'pending', outcome = NULL, done_at = 1 WHERE id = $1`, id)
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
	p.exec(t, `UPDATE serve_approvals SET done_at = $1 WHERE id = $2`, time.Now().UnixNano(), id2)
	if res, err := rtk.Result(ctx, "acme", id2, 1); err != nil || res != nil {
		t.Fatalf("an approval being resumed: %+v %v", res, err)
	}
}

// TestRunReadAnotherTenantsRecord: the console's run read checks each
// record is the tenant's: another tenant's record of the same run id,
// MACed under the one key and put in the tenant's chain in its place, is
// shown failed, not verified.
func TestRunReadAnotherTenantsRecord(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	ops := boundTenants(t, p, "ta", "tb")
	for tenant, keys := range ops {
		if _, err := keys.rt.Run(ctx, tenant, "message.outbound", map[string]any{"outgoing": "hello"}, "r_1"); err != nil {
			t.Fatal(err)
		}
	}
	if run, err := ops["ta"].op.RunRecord(ctx, "ta", "r_1"); err != nil || len(run.Audit) != 1 || run.Audit[0].Verified != "verified" {
		t.Fatalf("ta's run: %+v %v", run, err)
	}
	p.exec(t, `UPDATE audit_records SET line = (SELECT line FROM audit_records WHERE chain = $1 AND seq = 0) WHERE chain = $2 AND seq = 0`, []byte("tb"), []byte("ta"))
	run, err := ops["ta"].op.RunRecord(ctx, "ta", "r_1")
	if err != nil || len(run.Audit) != 1 || run.Audit[0].Verified != "failed" || run.Audit[0].Problem == "" || strings.Contains(run.Audit[0].Problem, "tb") {
		t.Fatalf("tb's record in ta's chain: %+v %v", run, err)
	}
}
