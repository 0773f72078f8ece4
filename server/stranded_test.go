package server_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
)

// strand runs run to a pending approval on p, then deletes the approval's
// index row and the run id's stored outcome, as a node that died between the
// chain's Put and recordPending leaves them (its claim's lease ended: no
// claim either). It returns the approval's id and its index row's view.
func strand(t *testing.T, p *platform, a tenantKeys, run string) (id, view string) {
	t.Helper()
	id = a.pending(t, run, map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "ls"}})
	view = queryValue[string](t, p, `SELECT view FROM serve_approvals WHERE id = $1`, id)
	p.exec(t, `DELETE FROM serve_approvals WHERE id = $1`, id)
	p.exec(t, `DELETE FROM serve_runs WHERE tenant = 'acme' AND run = $1`, run)
	return id, view
}

// indexed returns the index's rows of approval id and the view of the one.
func indexed(t *testing.T, p *platform, id string) (n int, view string) {
	t.Helper()
	var v sql.NullString
	if err := p.db.QueryRow(p.q(`SELECT COUNT(*), MAX(view) FROM serve_approvals WHERE id = $1`), id).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	return n, v.String
}

// TestStrandedApprovalIsIndexed: an approval the store holds but the index
// lacks (its node died between the two) is left alone while younger than
// the cutoff, then indexed as recordPending would have (the same view,
// pending), once however often the pass runs, and can be listed, read and
// resolved through the API with its outcome recorded.
func TestStrandedApprovalIsIndexed(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	id, view := strand(t, p, a, "r-stranded")
	var got map[string]any
	wantCode(t, a.op.Do(ctx, "GET", "/v1/tenants/acme/approvals/"+id, "", nil, &got), 404, "not_found")

	server.IndexStranded(p.srv, time.Now().Add(-time.Hour))
	if n, _ := indexed(t, p, id); n != 0 {
		t.Fatalf("an approval younger than the cutoff was indexed (%d rows)", n)
	}
	for range 2 {
		server.IndexStranded(p.srv, time.Now())
	}
	if n, v := indexed(t, p, id); n != 1 || v != view {
		t.Fatalf("indexed %d times, view %s, want once, %s", n, v, view)
	}
	list, err := a.op.Approvals(ctx, "acme", "pending")
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Run != "r-stranded" || list[0].Status != "pending" {
		t.Fatalf("pending list: %+v %v", list, err)
	}
	if err := a.op.Do(ctx, "GET", "/v1/tenants/acme/approvals/"+id, "", nil, &got); err != nil || got["status"] != "pending" {
		t.Fatalf("read: %v %v", got, err)
	}
	out, err := a.op.Resolve(ctx, "acme", id, "approve", nil, "")
	if err != nil || out.Verdict != "allow" || out.Run != "r-stranded" {
		t.Fatalf("resolve: %+v %v", out, err)
	}
	if res, err := a.rt.Result(ctx, "acme", id, 0); err != nil || res == nil || res.Verdict != "allow" {
		t.Fatalf("result: %+v %v", res, err)
	}
	server.IndexStranded(p.srv, time.Now())
	if list, err := a.op.Approvals(ctx, "acme", "resolved"); err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("resolved list after another pass: %+v %v", list, err)
	}
}

// TestStrandedApprovalAndTheRunPostedAgain: the run id of a stranded
// approval posted again before the pass runs again and makes a second
// approval, stored as the run id's outcome; the pass indexes the first
// beside it. Both are pending and each resolves on its own, its outcome on
// its own row; the run id still answers with the second run's outcome.
func TestStrandedApprovalAndTheRunPostedAgain(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	first, _ := strand(t, p, a, "r-again")
	second := a.pending(t, "r-again", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "ls"}})
	if second == first {
		t.Fatal("the run posted again answered with the stranded approval")
	}
	server.IndexStranded(p.srv, time.Now())
	list, err := a.op.Approvals(ctx, "acme", "pending")
	if err != nil || len(list) != 2 || list[0].Run != "r-again" || list[1].Run != "r-again" {
		t.Fatalf("pending list: %+v %v", list, err)
	}
	for id, decision := range map[string]string{first: "approve", second: "deny"} {
		out, err := a.op.Resolve(ctx, "acme", id, decision, nil, "")
		if err != nil || out.Run != "r-again" {
			t.Fatalf("resolve %s: %+v %v", decision, out, err)
		}
	}
	for id, want := range map[string]string{first: "allow", second: "block"} {
		if res, err := a.rt.Result(ctx, "acme", id, 0); err != nil || res == nil || string(res.Verdict) != want {
			t.Fatalf("result of %s: %+v %v, want %s", id, res, err, want)
		}
	}
	again, err := a.rt.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "ls"}}, "r-again")
	if err != nil || again.Approval == nil || again.Approval.ID != second {
		t.Fatalf("the run id's stored outcome: %+v %v, want the second run's (approval %s)", again, err, second)
	}
}

// TestNodesIndexStrandedOnce: two nodes on one Postgres running the pass at
// once index a stranded approval once, and either node serves it.
func TestNodesIndexStrandedOnce(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2, nil)
	n1, n2 := c.nodes[0], c.nodes[1]
	a := newAsking(t, n1)
	id, view := strand(t, n1, a, "r-nodes")
	var wg sync.WaitGroup
	for range 4 {
		for _, n := range c.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				server.IndexStranded(n.srv, time.Now())
			}()
		}
	}
	wg.Wait()
	if n, v := indexed(t, n1, id); n != 1 || v != view {
		t.Fatalf("indexed %d times, view %s, want once, %s", n, v, view)
	}
	// Node 2 resolves with its own copy of the binding, which reaches it by
	// notification: wait for it before resolving there.
	waitBound(t, a.rt, n2, "tool.before", map[string]any{"tool": "x"})
	list, err := on(a.op, n2).Approvals(ctx, "acme", "pending")
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("pending list on node 2: %+v %v", list, err)
	}
	if out, err := on(a.op, n2).Resolve(ctx, "acme", id, "approve", nil, ""); err != nil || out.Verdict != "allow" {
		t.Fatalf("resolve on node 2: %+v %v", out, err)
	}
}
