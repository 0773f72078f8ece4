package server

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"slices"
	"strings"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/server/api"
)

// The operator console: static HTML, CSS and JavaScript embedded in the
// binary, served at / and /console/. It holds no secret and renders nothing
// on the server: the page signs in with an API key pasted by its user (kept
// in the tab's sessionStorage, sent as Authorization: Bearer) and calls the
// /v1 routes like any client, so every check of the API applies to it.
//
// The page shows text written by hooks and their users (approvals' views,
// traces, reasons): app.js puts data into the page only as text
// (textContent, createTextNode, never innerHTML), and consoleCSP forbids
// inline script, so markup in that text is shown, never run.
//
//go:embed console
var consoleFiles embed.FS

// consoleCSP is the console's Content-Security-Policy: its own script,
// style and fetches only, no inline script or style, no plugins, no
// framing, no <base> or form posts elsewhere.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// The documents of the console's routes (package api).
type (
	MeDoc         = api.MeDoc
	UsageDoc      = api.UsageDoc
	RecordDoc     = api.RecordDoc
	RunDoc        = api.RunDoc
	HookDoc       = api.HookDoc
	SignatureView = api.SignatureView
)

// consoleRoutes registers the console's pages: public, like /healthz (the
// data they show comes from /v1 routes, each with its key).
func (s *Server) consoleRoutes(mux *http.ServeMux) {
	static, _ := fs.Sub(consoleFiles, "console")
	serve := func(w http.ResponseWriter, name string) {
		b, err := fs.ReadFile(static, name)
		if err != nil {
			writeProblem(w, problem(http.StatusNotFound, CodeNotFound, "no console file %s", name))
			return
		}
		h := w.Header()
		switch {
		case strings.HasSuffix(name, ".html"):
			h.Set("Content-Type", "text/html; charset=utf-8")
		case strings.HasSuffix(name, ".js"):
			h.Set("Content-Type", "text/javascript; charset=utf-8")
		case strings.HasSuffix(name, ".css"):
			h.Set("Content-Type", "text/css; charset=utf-8")
		case strings.HasSuffix(name, ".svg"):
			h.Set("Content-Type", "image/svg+xml")
		default:
			h.Set("Content-Type", "application/octet-stream")
		}
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { serve(w, "index.html") })
	mux.HandleFunc("GET /console/{file}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if name == "index.html" || strings.HasPrefix(name, ".") {
			name = "-"
		}
		serve(w, name)
	})
}

func (s *Server) getMe(w http.ResponseWriter, r *http.Request, p *Principal) {
	writeJSON(w, 200, MeDoc{KeyID: p.KeyID, Role: p.Role, Tenant: p.Tenant})
}

func (s *Server) getUsage(w http.ResponseWriter, r *http.Request, _ *Principal) {
	tenant := r.PathValue("tenant")
	if _, p := s.tenant(r, tenant); p != nil {
		writeProblem(w, p)
		return
	}
	ctx := r.Context()
	u := UsageDoc{Tenant: tenant}
	var err error
	if u.Available, u.Pending, err = s.ledger.Balance(ctx, tenant); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	lu, err := s.ledger.Usage(ctx, tenant)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	u.Granted, u.Adjusted, u.Charged, u.Charges = lu.Granted, lu.Adjusted, lu.Charged, lu.Charges
	for _, c := range []struct {
		n *int64
		q string
	}{
		{&u.Runs, `SELECT COUNT(*) FROM serve_runs WHERE tenant = ?`},
		{&u.ApprovalsPending, `SELECT COUNT(*) FROM serve_approvals WHERE tenant = ? AND status = 'pending'`},
		{&u.ApprovalsResolved, `SELECT COUNT(*) FROM serve_approvals WHERE tenant = ? AND status = 'resolved'`},
	} {
		if err := s.db.QueryRowContext(ctx, c.q, tenant).Scan(c.n); err != nil {
			writeProblem(w, s.internal(err))
			return
		}
	}
	// The tenant's own audit chain (store.TenantAudit) is named by its id;
	// its head row counts its records (their seqs are 0 to next-1, without
	// gaps: store.AuditStore), none when it has no head row yet.
	switch err := s.db.QueryRowContext(ctx, `SELECT next FROM audit_chains WHERE chain = ?`, []byte(tenant)).Scan(&u.AuditRecords); {
	case errors.Is(err, sql.ErrNoRows):
		u.AuditRecords = 0
	case err != nil:
		writeProblem(w, s.internal(err))
		return
	}
	writeJSON(w, 200, u)
}

// MaxRunRecords bounds the audit records one run read returns (500).
const MaxRunRecords = 500

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, _ *Principal) {
	ctx := r.Context()
	tenant, run := r.PathValue("tenant"), r.PathValue("run")
	if !runIDRE.MatchString(run) {
		writeProblem(w, problem(http.StatusNotFound, CodeNotFound, "not found"))
		return
	}
	doc := RunDoc{Tenant: tenant, Run: run, Outcomes: []json.RawMessage{}, Approvals: []json.RawMessage{}, Audit: []RecordDoc{}}
	var first string
	switch err := s.db.QueryRowContext(ctx, `SELECT outcome FROM serve_runs WHERE tenant = ? AND run = ?`, tenant, run).Scan(&first); {
	case err == nil:
		doc.Outcomes = append(doc.Outcomes, json.RawMessage(first))
	case !errors.Is(err, sql.ErrNoRows):
		writeProblem(w, s.internal(err))
		return
	}
	rows, err := s.db.QueryContext(ctx, `SELECT status, view, outcome FROM serve_approvals WHERE tenant = ? AND run = ? ORDER BY created, id LIMIT ?`, tenant, run, MaxRunRecords)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	for rows.Next() {
		var st, view string
		var oc sql.NullString
		if err := rows.Scan(&st, &view, &oc); err != nil {
			rows.Close()
			writeProblem(w, s.internal(err))
			return
		}
		doc.Approvals = append(doc.Approvals, withStatus([]byte(view), st))
		if oc.Valid && oc.String != "" {
			doc.Outcomes = append(doc.Outcomes, json.RawMessage(oc.String))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	// The tenant's audit chain keeps records as the bytes that were hashed,
	// each with its run in a column indexed by (chain, run, seq) (store
	// migration 0007): the run's records are found by the index. Those
	// stored before that migration have run NULL: they are found by their
	// lines' run field (runIDRE keeps the id free of JSON escapes), among
	// the tenant's NULL rows only, through the same index. Every line found
	// is then checked exactly.
	contains := `instr(line, ?) > 0`
	if s.db.pg {
		contains = `position(?::bytea in line) > 0`
	}
	recs, err := queryAll(ctx, s.db, scanLine, `SELECT line FROM (
		SELECT seq, line FROM audit_records WHERE chain = ? AND run = ?
		UNION ALL
		SELECT seq, line FROM audit_records WHERE chain = ? AND run IS NULL AND `+contains+`
	) r ORDER BY seq LIMIT ?`,
		[]byte(tenant), run, []byte(tenant), []byte(`"run":"`+run+`"`), MaxRunRecords)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	var run1 []audit.Record
	var raws []json.RawMessage
	for _, raw := range recs {
		var rec audit.Record
		if json.Unmarshal(raw, &rec) != nil || rec.Run != run {
			continue
		}
		run1, raws = append(run1, rec), append(raws, raw)
	}
	prev, err := s.prevHashes(ctx, tenant, run1)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	for i := range run1 {
		rd := s.verifyRecord(tenant, &run1[i], prev)
		rd.Record = raws[i]
		doc.Audit = append(doc.Audit, rd)
	}
	if len(doc.Outcomes) == 0 && len(doc.Approvals) == 0 && len(doc.Audit) == 0 {
		writeProblem(w, problem(http.StatusNotFound, CodeNotFound, "not found"))
		return
	}
	writeJSON(w, 200, doc)
}

// prevHashes reads the hashes of the records just before recs in the
// tenant's audit chain, by seq.
func (s *Server) prevHashes(ctx context.Context, tenant string, recs []audit.Record) (map[uint64][]string, error) {
	prev := map[uint64][]string{}
	args := []any{[]byte(tenant)}
	for _, r := range recs {
		if r.Seq > 0 {
			args = append(args, int64(r.Seq-1))
		}
	}
	if len(args) == 1 {
		return prev, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, line FROM audit_records WHERE chain = ? AND seq IN (?`+strings.Repeat(`, ?`, len(args)-2)+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var raw []byte
		if err := rows.Scan(&seq, &raw); err != nil {
			return nil, err
		}
		var r struct {
			Hash string `json:"hash"`
		}
		if json.Unmarshal(raw, &r) == nil && r.Hash != "" {
			prev[uint64(seq)] = append(prev[uint64(seq)], r.Hash)
		}
	}
	return prev, rows.Err()
}

// verifyRecord checks rec, read from tenant's chain, on its own
// (audit.VerifyRecord, under the host key when it carries a MAC; and the
// record must be the tenant's: one key MACs every tenant's records) and its
// prev against prev (prevHashes).
func (s *Server) verifyRecord(tenant string, rec *audit.Record, prev map[uint64][]string) RecordDoc {
	var d RecordDoc
	var key []byte
	if rec.MAC != "" {
		key = s.opts.HostKey
	}
	switch err := audit.VerifyRecord(rec, key); {
	case err != nil:
		d.Verified, d.Problem = "failed", err.Error()
	case rec.Tenant != tenant:
		d.Verified, d.Problem = "failed", "the record is another tenant's (moved into this tenant's chain)"
	case key == nil:
		d.Verified = "unkeyed"
	default:
		d.Verified = "verified"
	}
	switch hashes, ok := prev[rec.Seq-1]; {
	case rec.Seq == 0 && rec.Prev == "":
		d.Linked = "yes"
	case rec.Seq == 0:
		d.Linked = "no"
	case !ok:
		d.Linked = "unknown"
	case slices.Contains(hashes, rec.Prev):
		d.Linked = "yes"
	default:
		d.Linked = "no"
	}
	return d
}

func (s *Server) listHooks(w http.ResponseWriter, r *http.Request, _ *Principal) {
	ctx := r.Context()
	tenant := r.PathValue("tenant")
	t, pr := s.tenant(r, tenant)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	var cfg string
	switch err := s.db.QueryRowContext(ctx, `SELECT config FROM serve_bindings WHERE tenant = ?`, tenant).Scan(&cfg); {
	case errors.Is(err, sql.ErrNoRows):
		writeJSON(w, 200, map[string]any{"tenant": tenant, "require_signatures": t.RequireSignatures, "hooks": []HookDoc{}})
		return
	case err != nil:
		writeProblem(w, s.internal(err))
		return
	}
	var c struct {
		Modules map[string]string `json:"modules"`
	}
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	hooks := []HookDoc{}
	for name, ref := range c.Modules {
		h, err := s.hook(ctx, name, ref)
		if err != nil {
			writeProblem(w, s.internal(err))
			return
		}
		hooks = append(hooks, h)
	}
	slices.SortFunc(hooks, func(a, b HookDoc) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, 200, map[string]any{"tenant": tenant, "require_signatures": t.RequireSignatures, "hooks": hooks})
}

func (s *Server) hook(ctx context.Context, name, ref string) (HookDoc, error) {
	h := HookDoc{Name: name, Ref: ref, Signatures: []SignatureView{}}
	m := moduleRefRE.FindStringSubmatch(ref)
	if m == nil {
		h.Problem = "not a pinned version"
		return h, nil
	}
	v, pr := s.version(ctx, m[1], m[2], m[3])
	if pr != nil {
		if pr.Code == CodeInternal {
			return h, errors.New(pr.Detail)
		}
		h.Problem = pr.Detail
		return h, nil
	}
	if v.Digest != m[4] {
		h.Problem = "the version's digest is not the pinned one"
		return h, nil
	}
	h.Version = v
	for _, sd := range v.Signatures {
		sv := SignatureView{KeyID: sd.KeyID}
		pub, pr := s.signingKey(ctx, v.Publisher, sd.KeyID)
		switch {
		case pr != nil && pr.Code == CodeInternal:
			return h, errors.New(pr.Detail)
		case pr == nil:
			sv.Valid = ed25519.Verify(pub, SigningMessage(v.Ref, v.Digest, v.ManifestDigest), sd.Signature)
		}
		h.Signatures = append(h.Signatures, sv)
	}
	// Signed is what require_signatures asks: a valid signature under a
	// key an admin approved (publish.go's signed), not any valid one.
	if h.Signed, pr = s.signed(ctx, v); pr != nil {
		return h, errors.New(pr.Detail)
	}
	var report string
	if err := s.db.QueryRowContext(ctx, `SELECT report FROM serve_modules WHERE digest = ?`, v.Digest).Scan(&report); err != nil {
		return h, err
	}
	h.Report = json.RawMessage(report)
	return h, nil
}

// MaxVersionsPage bounds the versions one list returns (500).
const MaxVersionsPage = 500

func (s *Server) listVersions(w http.ResponseWriter, r *http.Request, _ *Principal) {
	ctx := r.Context()
	publisher := r.PathValue("publisher")
	type nv struct{ name, version string }
	all, err := queryAll(ctx, s.db, func(rows *sql.Rows) (x nv, err error) {
		err = rows.Scan(&x.name, &x.version)
		return
	}, `SELECT name, version FROM serve_versions WHERE publisher = ? ORDER BY name, created, version LIMIT ?`, publisher, MaxVersionsPage)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	out := []HookDoc{}
	for _, x := range all {
		v, pr := s.version(ctx, publisher, x.name, x.version)
		if pr != nil {
			writeProblem(w, pr)
			return
		}
		h, err := s.hook(ctx, x.name, v.Ref+"#sha256:"+v.Digest)
		if err != nil {
			writeProblem(w, s.internal(err))
			return
		}
		out = append(out, h)
	}
	writeJSON(w, 200, map[string]any{"publisher": publisher, "versions": out})
}
