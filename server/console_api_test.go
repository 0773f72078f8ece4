package server_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestMe: every key reads its own id, role and tenant, and only that.
func TestMe(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	p.createTenant(t, "acme", false)
	for _, c := range []struct {
		role   server.Role
		tenant string
	}{{server.RoleOperator, "acme"}, {server.RoleRuntime, "acme"}, {server.RolePublisher, "pubco"}} {
		cl, k := p.keyDoc(t, c.role, c.tenant)
		me, err := cl.Me(ctx)
		if err != nil || *me != (server.MeDoc{KeyID: k.ID, Role: c.role, Tenant: c.tenant}) {
			t.Fatalf("%s: %+v %v", c.role, me, err)
		}
	}
	if me, err := p.admin.Me(ctx); err != nil || me.Role != server.RoleAdmin || me.Tenant != "" {
		t.Fatalf("admin: %+v %v", me, err)
	}
	_, err := client.New(p.hs.URL, "whk_not-a-key").Me(ctx)
	wantCode(t, err, 401, server.CodeUnauthenticated)
}

// TestRunRead: a run's outcomes (the first, then its resolution's), its
// approval and its audit records, each verified under the host key and
// linked to the record before it; a record changed in the index, or
// re-hashed without its MAC, is shown as such. Run ids are matched
// exactly, LIKE's wildcards included.
func TestRunRead(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	id := a.pending(t, "r_1", map[string]any{"tool": "shell.exec"})
	// "rx1" matches r_1 as a LIKE pattern: its records must not show.
	a.pending(t, "rx1", map[string]any{"tool": "shell.exec"})
	if _, err := a.op.Resolve(ctx, "acme", id, "approve", nil, "looks fine"); err != nil {
		t.Fatal(err)
	}
	run, err := a.op.RunRecord(ctx, "acme", "r_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Outcomes) != 2 || len(run.Approvals) != 1 || len(run.Audit) < 2 {
		t.Fatalf("run: %d outcomes, %d approvals, %d records", len(run.Outcomes), len(run.Approvals), len(run.Audit))
	}
	var last struct {
		Verdict string `json:"verdict"`
		Trace   []struct {
			Binding    string `json:"binding"`
			Resolution string `json:"resolution"`
		} `json:"trace"`
	}
	if err := json.Unmarshal(run.Outcomes[1], &last); err != nil || last.Verdict != "allow" || len(last.Trace) == 0 || last.Trace[len(last.Trace)-1].Resolution != "approved" {
		t.Fatalf("last outcome %s: %v", run.Outcomes[1], err)
	}
	for _, r := range run.Audit {
		var rec audit.Record
		if err := json.Unmarshal(r.Record, &rec); err != nil || rec.Run != "r_1" {
			t.Fatalf("record %s: %v", r.Record, err)
		}
		if r.Verified != "verified" || r.Linked != "yes" {
			t.Fatalf("record %d: %s, linked %s: %s", rec.Seq, r.Verified, r.Linked, r.Problem)
		}
	}

	// Tampering with the index: a decision changed; a record with its MAC
	// removed and its hash recomputed (what someone without the key can
	// do).
	first := run.Audit[0]
	var rec audit.Record
	_ = json.Unmarshal(first.Record, &rec)
	changed := strings.Replace(string(first.Record), `"decision":"`+rec.Decision+`"`, `"decision":"continue"`, 1)
	if changed == string(first.Record) {
		t.Fatal("nothing changed")
	}
	setLine := func(seq uint64, line []byte) {
		t.Helper()
		p.exec(t, `UPDATE audit_records SET line = $1 WHERE chain = $2 AND seq = $3`, line, []byte("acme"), int64(seq))
	}
	setLine(rec.Seq, []byte(changed))
	second := run.Audit[1]
	var rec2 audit.Record
	_ = json.Unmarshal(second.Record, &rec2)
	rec2.MAC, rec2.Hash = "", ""
	rec2.Hash, _ = audit.Hash(&rec2)
	b, _ := json.Marshal(&rec2)
	setLine(rec2.Seq, b)
	// And the record before the second one (rx1's) given another hash:
	// the second is no longer linked to it.
	if rec2.Seq == 0 {
		t.Fatal("the resolution's record is the first of the chain")
	}
	before := queryValue[[]byte](t, p, `SELECT line FROM audit_records WHERE chain = $1 AND seq = $2`, []byte("acme"), int64(rec2.Seq-1))
	setLine(rec2.Seq-1, []byte(strings.Replace(string(before), `"hash":"`, `"hash":"00`, 1)))
	run, err = a.op.RunRecord(ctx, "acme", "r_1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Audit[0].Verified != "failed" || run.Audit[0].Problem == "" || run.Audit[1].Verified != "unkeyed" || run.Audit[1].Linked != "no" {
		t.Fatalf("after tampering: %+v", run.Audit[:2])
	}
	for _, bad := range []string{"no-such-run", "r%25", "r_"} {
		_, err = a.op.RunRecord(ctx, "acme", bad)
		wantCode(t, err, 404, server.CodeNotFound)
	}
}

// TestRunReadIndexed: a run's audit records are found by the run column
// (store migration 0007), only its own: not another run's whose id it
// prefixes, nor another tenant's of the same id. Records stored before that
// migration (run NULL, the same lines) are still found, by their lines, in
// seq order with the indexed ones. The usage's count of audit records is
// the chain's head.
func TestRunReadIndexed(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newTenant(t, p, "acme", false)
	pin := publishPolicy(t, a.pub)
	a.bind(t, chainConfig(pin))
	b := newTenant(t, p, "beta", false)
	b.bind(t, chainConfig(pin))
	id := a.pending(t, "r1", map[string]any{"tool": "shell.exec"})
	a.pending(t, "r10", map[string]any{"tool": "shell.exec"})
	b.pending(t, "r1", map[string]any{"tool": "shell.exec"})
	if _, err := a.op.Resolve(ctx, "acme", id, "approve", nil, "fine"); err != nil {
		t.Fatal(err)
	}
	a.pending(t, "r1.2", map[string]any{"tool": "shell.exec"}) // after r1's records
	read := func() []server.RecordDoc {
		t.Helper()
		run, err := a.op.RunRecord(ctx, "acme", "r1")
		if err != nil {
			t.Fatal(err)
		}
		var last uint64
		for i, r := range run.Audit {
			var rec audit.Record
			if err := json.Unmarshal(r.Record, &rec); err != nil || rec.Run != "r1" || rec.Tenant != "acme" || (i > 0 && rec.Seq <= last) {
				t.Fatalf("record %d %s: %v", i, r.Record, err)
			}
			if r.Verified != "verified" || r.Linked != "yes" {
				t.Fatalf("record %d: %s, linked %s: %s", rec.Seq, r.Verified, r.Linked, r.Problem)
			}
			last = rec.Seq
		}
		return run.Audit
	}
	indexed := read()
	if n := queryValue[int](t, p, `SELECT COUNT(*) FROM audit_records WHERE chain = $1 AND run = $2`, []byte("acme"), "r1"); len(indexed) < 2 || len(indexed) != n {
		t.Fatalf("%d records read, %d indexed under r1", len(indexed), n)
	}
	// As a database migrated from version 6 holds them: r1's first record,
	// r10's, r1.2's and beta's r1's without their run. r1 reads the same.
	var firstSeq uint64
	{
		var rec audit.Record
		_ = json.Unmarshal(indexed[0].Record, &rec)
		firstSeq = rec.Seq
	}
	for _, c := range []struct {
		query string
		args  []any
	}{
		{`UPDATE audit_records SET run = NULL WHERE chain = $1 AND seq = $2`, []any{[]byte("acme"), int64(firstSeq)}},
		{`UPDATE audit_records SET run = NULL WHERE chain = $1 AND run <> $2`, []any{[]byte("acme"), "r1"}},
		{`UPDATE audit_records SET run = NULL WHERE chain = $1`, []any{[]byte("beta")}},
	} {
		p.exec(t, c.query, c.args...)
	}
	if n := queryValue[int](t, p, `SELECT COUNT(*) FROM audit_records WHERE run IS NULL`); n < 4 {
		t.Fatalf("%d legacy rows", n)
	}
	legacy := read()
	if len(legacy) != len(indexed) {
		t.Fatalf("%d records with a legacy row, %d indexed", len(legacy), len(indexed))
	}
	for i := range legacy {
		if string(legacy[i].Record) != string(indexed[i].Record) {
			t.Fatalf("record %d: %s, indexed %s", i, legacy[i].Record, indexed[i].Record)
		}
	}
	_, err := a.op.RunRecord(ctx, "acme", "r")
	wantCode(t, err, 404, server.CodeNotFound)

	p.createTenant(t, "empty", false)
	for _, tenant := range []string{"acme", "beta", "empty"} {
		u, err := p.admin.Usage(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if n := queryValue[int](t, p, `SELECT COUNT(*) FROM audit_records WHERE chain = $1`, []byte(tenant)); u.AuditRecords != int64(n) || (tenant != "empty") != (n > 0) {
			t.Fatalf("%s: usage counts %d audit records, the chain holds %d", tenant, u.AuditRecords, n)
		}
	}
}

// TestHooksAndUsage: the tenant's hooks with their pinned versions,
// signatures (whether each verifies) and validation reports; a publisher's
// versions; a tenant's credit and usage.
func TestHooksAndUsage(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newTenant(t, p, "acme", false)
	pub, op := a.pub, a.op
	pin := publishPolicy(t, pub)
	if hooks, err := op.Hooks(ctx, "acme"); err != nil || len(hooks) != 0 {
		t.Fatalf("before binding: %+v %v", hooks, err)
	}
	if _, err := op.BindChain(ctx, "acme", chainConfig(pin)); err != nil {
		t.Fatal(err)
	}
	hooks, err := op.Hooks(ctx, "acme")
	if err != nil || len(hooks) != 1 || hooks[0].Name != "policy" || hooks[0].Ref != pin || hooks[0].Signed || hooks[0].Version == nil || len(hooks[0].Report) == 0 {
		t.Fatalf("unsigned: %+v %v", hooks, err)
	}
	kid, pk := addSigned(t, pub, "pubco", "policy")
	// A publisher's own key counts once an admin approves it.
	hooks, err = op.Hooks(ctx, "acme")
	if err != nil || len(hooks) != 1 || hooks[0].Signed || len(hooks[0].Signatures) != 1 || !hooks[0].Signatures[0].Valid {
		t.Fatalf("signed by a key not yet approved: %+v %v", hooks, err)
	}
	if _, err := p.admin.ApproveSigningKey(ctx, "pubco", kid); err != nil {
		t.Fatal(err)
	}
	// A signature stored by a key that no longer verifies it: shown as
	// not verifying.
	kid2, _ := addSigned(t, pub, "pubco", "policy")
	p.exec(t, `UPDATE serve_signing_keys SET public_key = $1 WHERE id = $2`, []byte(pk), kid2)
	hooks, err = op.Hooks(ctx, "acme")
	if err != nil || len(hooks) != 1 || !hooks[0].Signed || len(hooks[0].Signatures) != 2 {
		t.Fatalf("signed: %+v %v", hooks, err)
	}
	for _, s := range hooks[0].Signatures {
		if s.Valid != (s.KeyID == kid) {
			t.Fatalf("signature %+v", s)
		}
	}
	for _, c := range []*client.Client{pub, op} {
		vs, err := c.Versions(ctx, "pubco", "")
		if err != nil || len(vs) != 1 || vs[0].Version.Ref != "pubco/policy@1.0.0" || !vs[0].Signed || len(vs[0].Report) == 0 {
			t.Fatalf("versions: %+v %v", vs, err)
		}
	}

	if _, err := p.admin.GrantCredit(ctx, "acme", 70, "g1"); err != nil {
		t.Fatal(err)
	}
	rt := p.key(t, server.RoleRuntime, "acme")
	if _, err := rt.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec"}, "u1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Client{p.admin, op} {
		u, err := c.Usage(ctx, "acme")
		if err != nil || u.Tenant != "acme" || u.Available != 70 || u.Granted != 70 || u.Runs != 1 || u.ApprovalsPending != 1 || u.AuditRecords < 1 {
			t.Fatalf("usage: %+v %v", u, err)
		}
	}
	_, err = p.admin.Usage(ctx, "nobody")
	wantCode(t, err, 404, server.CodeNotFound)
}

// TestConsoleServed: the console's files, with their security headers; no
// other file; and app.js puts nothing into the page as HTML.
func TestConsoleServed(t *testing.T) {
	p := newPlatform(t)
	for _, c := range []struct {
		path, ctype string
		status      int
	}{
		{"/", "text/html; charset=utf-8", 200},
		{"/console/app.js", "text/javascript; charset=utf-8", 200},
		{"/console/style.css", "text/css; charset=utf-8", 200},
		{"/console/index.html", "application/problem+json", 404},
		{"/console/nope.js", "application/problem+json", 404},
		{"/console/../openapi.json", "application/json", 200}, // cleaned to /openapi.json
		{"/index.html", "application/problem+json", 404},
	} {
		status, body, h := httpGet(t, p.hs.URL+c.path, "", nil)
		if status != c.status || h.Get("Content-Type") != c.ctype {
			t.Fatalf("%s: %d %s", c.path, status, h.Get("Content-Type"))
		}
		if c.status != 200 || !strings.HasPrefix(c.path, "/") || c.path == "/console/../openapi.json" {
			continue
		}
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Fatalf("%s: CSP %q lacks %q", c.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("%s: headers %v", c.path, h)
		}
		if c.path == "/" && (strings.Contains(string(body), "<script>") || regexp.MustCompile(`\son[a-z]+\s*=`).Match(body)) {
			t.Fatalf("index.html has inline script or handlers")
		}
	}
	js, err := os.ReadFile("console/app.js")
	if err != nil {
		t.Fatal(err)
	}
	// Outside comments, no API that parses HTML or evaluates strings.
	code := regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAllString(string(js), "")
	if m := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\('on|\.src\s*=|\.href\s*=`).FindString(code); m != "" {
		t.Fatalf("app.js uses %s", m)
	}
}
