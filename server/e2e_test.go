package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var p *server.Problem
	if !errors.As(err, &p) {
		t.Fatalf("want problem %d %s, got %v", status, code, err)
	}
	if p.Status != status || p.Code != code {
		t.Fatalf("want problem %d %s, got %d %s: %s", status, code, p.Status, p.Code, p.Detail)
	}
}

// TestEndToEnd drives the platform over real HTTP: a publisher uploads,
// publishes and signs; a tenant that requires signatures binds; the runtime
// key gets allow, block and pending; the operator approves; the client
// waiting on the approval receives the resumed outcome.
func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newTenant(t, p, "acme", true)
	pub, op, rtk := a.pub, a.op, a.rt
	a.grant(t, 100, "g1")
	if c, err := op.Credit(ctx, "acme"); err != nil || c.Available != 100 {
		t.Fatalf("credit %+v %v", c, err)
	}

	mod, err := pub.UploadModule(ctx, "pubco", policyWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	var report runtime.ModuleInfo
	if err := json.Unmarshal(mod.Report, &report); err != nil || report.Digest != mod.Digest || len(mod.Digest) != 64 || report.ABIVersion == "" {
		t.Fatalf("report %s: %v", mod.Report, err)
	}
	v, err := pub.Publish(ctx, "pubco", "policy", "1.0.0", mod.Digest)
	if err != nil {
		t.Fatal(err)
	}
	// Immutable: the same version for other bytes is refused; the same
	// publication again is not an error.
	mod2, err := pub.UploadModule(ctx, "pubco", guestWasm(t, "scripted"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pub.Publish(ctx, "pubco", "policy", "1.0.0", mod2.Digest)
	wantCode(t, err, 409, server.CodeConflict)
	if v2, err := pub.Publish(ctx, "pubco", "policy", "1.0.0", mod.Digest); err != nil || v2.Digest != mod.Digest {
		t.Fatalf("republish: %+v %v", v2, err)
	}
	// A digest the publisher never uploaded cannot be published.
	_, err = pub.Publish(ctx, "pubco", "policy", "1.0.1", "00"+mod.Digest[2:])
	wantCode(t, err, 422, server.CodeNotFound)

	// Unsigned: refused at bind by a tenant that requires signatures.
	_, err = op.BindChain(ctx, "acme", chainConfig(client.Pin(v)))
	wantCode(t, err, 422, server.CodeSignatureRequired)

	pk, sk, _ := ed25519.GenerateKey(rand.Reader)
	kid, err := pub.AddSigningKey(ctx, "pubco", pk)
	if err != nil {
		t.Fatal(err)
	}
	// A signature by another key does not verify.
	_, sk2, _ := ed25519.GenerateKey(rand.Reader)
	_, err = pub.Sign(ctx, "pubco", "policy", "1.0.0", kid, sk2)
	wantCode(t, err, 422, server.CodeBadSignature)
	if _, err := pub.Sign(ctx, "pubco", "policy", "1.0.0", kid, sk); err != nil {
		t.Fatal(err)
	}
	// A key the publisher registered with its own API key does not count
	// until an admin approves it (SECURITY.md: a stolen publisher key
	// cannot make a version trusted).
	_, err = op.BindChain(ctx, "acme", chainConfig(client.Pin(v)))
	wantCode(t, err, 422, server.CodeSignatureRequired)
	if d, err := p.admin.ApproveSigningKey(ctx, "pubco", kid); err != nil || !d.Approved {
		t.Fatalf("approve: %+v %v", d, err)
	}
	// A pin that is not the version's digest is refused.
	_, err = op.BindChain(ctx, "acme", chainConfig(v.Ref+"#sha256:"+"11"+v.Digest[2:]))
	wantCode(t, err, 422, server.CodeDigestMismatch)
	_, err = op.BindChain(ctx, "acme", chainConfig("pubco/policy@9.9.9#sha256:"+v.Digest))
	wantCode(t, err, 422, server.CodeUnknownVersion)
	if _, err := op.BindChain(ctx, "acme", chainConfig(client.Pin(v))); err != nil {
		t.Fatal(err)
	}

	out, err := rtk.Run(ctx, "acme", "message.outbound", map[string]any{"outgoing": "hello"}, "")
	if err != nil || out.Verdict != "allow" {
		t.Fatalf("allow: %+v %v", out, err)
	}
	out, err = rtk.Run(ctx, "acme", "message.outbound", map[string]any{"outgoing": "the SECRET is 42"}, "r-block")
	if err != nil || out.Verdict != "block" || out.Binding != "no-secrets" {
		t.Fatalf("block: %+v %v", out, err)
	}
	// The same run id again: the first outcome, not a second run.
	again, err := rtk.Run(ctx, "acme", "message.outbound", map[string]any{"outgoing": "hello"}, "r-block")
	if err != nil || again.Verdict != "block" {
		t.Fatalf("idempotent run: %+v %v", again, err)
	}
	out, err = rtk.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "ls"}}, "r-ask")
	if err != nil || out.Verdict != "pending" || out.Approval == nil || out.Approval.ID == "" {
		t.Fatalf("pending: %+v %v", out, err)
	}
	id := out.Approval.ID

	// Still pending: a short wait returns nothing.
	if res, err := rtk.Result(ctx, "acme", id, 0); err != nil || res != nil {
		t.Fatalf("result before resolution: %+v %v", res, err)
	}
	// The runtime key waits; the operator approves meanwhile.
	w := waitPoll(ctx, rtk, id, 30)
	list, err := op.Approvals(ctx, "acme", "pending")
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Binding != "approve-shell" {
		t.Fatalf("inbox: %+v %v", list, err)
	}
	time.Sleep(100 * time.Millisecond) // let the waiter wait (correct without it too)
	resumed, err := op.Resolve(ctx, "acme", id, "approve", nil, "")
	if err != nil || resumed.Verdict != "allow" {
		t.Fatalf("resolve: %+v %v", resumed, err)
	}
	if g := w.result(t, "the waiting client", 20*time.Second); g.err != nil || g.out == nil || g.out.Verdict != "allow" || g.out.Run != "r-ask" {
		t.Fatalf("waiting client: %+v %v", g.out, g.err)
	}
	// Resolved once: a second resolution is refused.
	_, err = op.Resolve(ctx, "acme", id, "deny", nil, "")
	wantCode(t, err, 409, "approval_resolved")
	if list, err := op.Approvals(ctx, "acme", "pending"); err != nil || len(list) != 0 {
		t.Fatalf("still pending: %+v %v", list, err)
	}
	// The audit records of every verdict, the approval's resolution among
	// them, are the tenant's to read.
	recs, err := op.Audit(ctx, "acme", -1, 100)
	if err != nil {
		t.Fatal(err)
	}
	var resolutions int
	for _, r := range recs {
		var rec struct {
			Tenant     string `json:"tenant"`
			Resolution string `json:"resolution"`
		}
		if err := json.Unmarshal(r, &rec); err != nil || rec.Tenant != "acme" {
			t.Fatalf("record %s: %v", r, err)
		}
		if rec.Resolution == "approved" {
			resolutions++
		}
	}
	if len(recs) < 4 || resolutions != 1 {
		t.Fatalf("%d records, %d approved resolutions", len(recs), resolutions)
	}
}
