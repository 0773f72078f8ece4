package server

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server/api"
	"github.com/wasmhooks/wasmhooks/store"
)

// A binding's module is named "publisher/name@version#sha256:HEX": a
// published version pinned to its digest.
var moduleRefRE = regexp.MustCompile(`^([a-z0-9][a-z0-9._-]{0,63})/([a-z0-9][a-z0-9._-]{0,63})@([^#]{1,64})#sha256:([0-9a-f]{64})$`)

// MaxBindModules bounds the module names of one chain configuration (64).
// Every name's module is read from the database while the configuration is
// parsed, so a 4 MiB configuration naming one published module under 40,000
// names held 40,000 copies of it: a tenant's operator could exhaust the
// server's memory with one request. The modules of one digest share one copy.
const MaxBindModules = 64

// parseBinding parses a tenant's chain configuration (chain.ParseConfig's
// format) with every module a pinned version: published, at the pinned
// digest, and signed when the tenant requires signatures.
func (s *Server) parseBinding(ctx context.Context, tenant string, data []byte) (chain.Config, *Problem) {
	t := tenantDoc{ID: tenant}
	err := s.db.QueryRowContext(ctx, `SELECT require_signatures FROM serve_tenants WHERE id = ?`, tenant).Scan(&t.RequireSignatures)
	if err != nil {
		return chain.Config{}, s.internal(err)
	}
	names := 0
	byDigest := map[string][]byte{}
	cfg, err := chain.ParseConfig(data, func(ref string) ([]byte, error) {
		if names++; names > MaxBindModules {
			return nil, problem(http.StatusUnprocessableEntity, CodeInvalidConfig, "a configuration names at most %d modules", MaxBindModules)
		}
		m := moduleRefRE.FindStringSubmatch(ref)
		if m == nil {
			return nil, problem(http.StatusUnprocessableEntity, CodeInvalidConfig, "module %q is not publisher/name@version#sha256:DIGEST", ref)
		}
		v, pr := s.version(ctx, m[1], m[2], m[3])
		if pr != nil {
			return nil, pr
		}
		if v.Digest != m[4] {
			return nil, problem(http.StatusUnprocessableEntity, CodeDigestMismatch, "%s is %s, not the pinned %s", v.Ref, v.Digest, m[4])
		}
		if t.RequireSignatures {
			ok, pr := s.signed(ctx, v)
			if pr != nil {
				return nil, pr
			}
			if !ok {
				return nil, problem(http.StatusUnprocessableEntity, CodeSignatureRequired, "tenant %s requires signed versions, and %s has no valid signature", tenant, v.Ref)
			}
		}
		if wasm, ok := byDigest[v.Digest]; ok {
			return wasm, nil
		}
		var wasm []byte
		if err := s.db.QueryRowContext(ctx, `SELECT wasm FROM serve_modules WHERE digest = ?`, v.Digest).Scan(&wasm); err != nil {
			return nil, s.internal(err)
		}
		byDigest[v.Digest] = wasm
		return wasm, nil
	})
	if err != nil {
		var pr *Problem
		if errors.As(err, &pr) {
			if pr.Status == http.StatusNotFound {
				pr.Status = http.StatusUnprocessableEntity
			}
			pr = &Problem{Type: pr.Type, Title: http.StatusText(pr.Status), Status: pr.Status, Code: pr.Code, Detail: err.Error()}
			return chain.Config{}, pr
		}
		return chain.Config{}, problem(http.StatusUnprocessableEntity, CodeInvalidConfig, "%v", err)
	}
	return cfg, nil
}

func (s *Server) bindChain(w http.ResponseWriter, r *http.Request, _ *Principal) {
	tenant := r.PathValue("tenant")
	data, pr := readBody(w, r, DefaultMaxConfigBytes)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	if !json.Valid(data) {
		writeProblem(w, problem(http.StatusBadRequest, CodeMalformedJSON, "the body is not JSON"))
		return
	}
	cfg, pr := s.parseBinding(r.Context(), tenant, data)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	// A tenant's binds are one at a time (so the stored configuration is
	// the one in force), other tenants' go on meanwhile; runs go on too, on
	// the configuration they started with.
	// The other nodes are told at commit and reload it (reloadTenant).
	defer s.bindLocks.Lock(tenant)()
	c := s.chainFor(tenant)
	var err error
	if c == nil {
		c, err = chain.New(r.Context(), cfg, s.chainOptions())
	} else {
		err = c.Reload(r.Context(), cfg)
	}
	if err != nil {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidConfig, "%v", err))
		return
	}
	s.mu.Lock()
	s.chains[tenant] = c
	s.mu.Unlock()
	v, err := s.storeBinding(r.Context(), tenant, data)
	if err != nil {
		// The chain in force here is the new one, the stored one the old,
		// which the next sync brings back (this node's version of it is
		// forgotten): say so rather than pretend it was bound.
		s.mu.Lock()
		delete(s.versions, tenant)
		s.mu.Unlock()
		writeProblem(w, s.internal(err))
		return
	}
	s.mu.Lock()
	s.versions[tenant] = v
	s.mu.Unlock()
	info, _ := c.Info()
	writeJSON(w, 200, map[string]any{"tenant": tenant, "info": info})
}

// storeBinding stores tenant's configuration under the next version and
// tells the other nodes, in one transaction; it returns the version.
func (s *Server) storeBinding(ctx context.Context, tenant string, data []byte) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var v int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO serve_bindings (tenant, config, updated, version) VALUES (?, ?, ?, 1)
		ON CONFLICT (tenant) DO UPDATE SET config = excluded.config, updated = excluded.updated, version = serve_bindings.version + 1
		RETURNING version`, tenant, string(data), now()).Scan(&v); err != nil {
		return 0, err
	}
	s.notify(ctx, tx, chanBindings, tenant)
	return v, tx.Commit()
}

func (s *Server) getChain(w http.ResponseWriter, r *http.Request, _ *Principal) {
	tenant := r.PathValue("tenant")
	var cfg string
	if pr := s.scanRow(s.db.QueryRowContext(r.Context(), `SELECT config FROM serve_bindings WHERE tenant = ?`, tenant),
		problem(http.StatusNotFound, CodeNoChain, "tenant %s has bound nothing", tenant), &cfg); pr != nil {
		writeProblem(w, pr)
		return
	}
	doc := map[string]any{"tenant": tenant, "config": json.RawMessage(cfg)}
	if c := s.chainFor(tenant); c != nil {
		if info, ok := c.Info(); ok {
			doc["info"] = info
		}
	}
	writeJSON(w, 200, doc)
}

func viewOf(a *chain.Approval) *ApprovalView {
	return &ApprovalView{ID: a.ID, Run: a.Run, Status: "pending", Point: a.Point, Binding: a.Binding, Reason: a.Reason,
		UserMessage: a.UserMessage, Proposed: a.Proposed, Pending: a.Pending, Editable: a.Editable, Created: a.Created, Expires: a.Expires}
}

// outcomeDoc is an outcome as the API returns it: the chain's, with its
// approval as an ApprovalView.
func outcomeDoc(out *chain.Outcome) ([]byte, error) {
	o := *out
	a := o.Approval
	o.Approval = nil
	b, err := json.Marshal(&o)
	if err != nil || a == nil {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m["approval"], err = json.Marshal(viewOf(a)); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// recordPending indexes the outcome's approval, when it is pending, under
// its tenant. (Its audit records are in the tenant's chain already.)
func (s *Server) recordPending(ctx context.Context, out *chain.Outcome) error {
	if out.Verdict != chain.Pending || out.Approval == nil {
		return nil
	}
	created := now()
	return s.retryDB(ctx, func() error { return s.indexPending(ctx, out.Approval, out.Tenant, out.Run, created) })
}

// indexApproval indexes the pending approval a under its own tenant and
// run, made when it says, unless the index has it: an approval found in the
// store alone (firstslice.go, indexStranded).
func (s *Server) indexApproval(ctx context.Context, a *chain.Approval) error {
	return s.indexPending(ctx, a, a.Tenant, a.Run, a.Created.UTC().Format(time.RFC3339Nano))
}

// indexPending indexes the pending approval a of tenant's run, made at
// created, unless the index has it.
func (s *Server) indexPending(ctx context.Context, a *chain.Approval, tenant, run, created string) error {
	view, err := json.Marshal(viewOf(a))
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO serve_approvals (id, tenant, run, status, view, expires, created) VALUES (?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		a.ID, tenant, run, string(view), a.Expires.UnixNano(), created)
	return err
}

var runIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

type runRequest struct {
	Point   string          `json:"point"`
	Context json.RawMessage `json:"context"`
	// Run identifies the run; a run posted again with the same id gets
	// the first one's outcome and does not run again.
	Run string `json:"run"`
}

func (s *Server) run(w http.ResponseWriter, r *http.Request, _ *Principal, req *runRequest) {
	tenant := r.PathValue("tenant")
	if req.Run != "" && !runIDRE.MatchString(req.Run) {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "run is 1 to 128 of [A-Za-z0-9._:-]"))
		return
	}
	var ctxMap map[string]any
	if len(req.Context) > 0 && string(req.Context) != "null" {
		v, err := abi.ParseJSON(req.Context, abi.JSONLimits{MaxBytes: int(s.opts.MaxBodyBytes)})
		m, ok := v.(map[string]any)
		if err != nil || !ok {
			writeProblem(w, problem(http.StatusBadRequest, CodeMalformedJSON, "context must be a JSON object (strict JSON: %v)", err))
			return
		}
		ctxMap = m
	}
	c := s.chainFor(tenant)
	if c == nil {
		writeProblem(w, problem(http.StatusConflict, CodeNoChain, "tenant %s has no chain bound", tenant))
		return
	}
	if req.Run != "" {
		// One request per run id at a time in this process, and one node
		// at a time in the database (claimRun): the others wait for its
		// outcome and answer with it.
		unlock := s.runLock(tenant, req.Run)
		defer unlock()
		stored, pr := s.claimRun(r.Context(), tenant, req.Run)
		if pr != nil {
			if pr.Code == CodeRunInProgress {
				w.Header().Set("Retry-After", "1")
			}
			writeProblem(w, pr)
			return
		}
		if stored != nil {
			w.Header().Set("Idempotent-Replayed", "true")
			writeRaw(w, 200, stored)
			return
		}
		finished := false
		defer func() {
			if !finished {
				s.dropRun(context.WithoutCancel(r.Context()), tenant, req.Run)
			}
		}()
		finish := func(doc []byte) ([]byte, error) {
			out, err := s.finishRun(context.WithoutCancel(r.Context()), tenant, req.Run, doc)
			finished = err == nil
			return out, err
		}
		s.runAndReply(w, r, c, tenant, req, ctxMap, finish)
		return
	}
	s.runAndReply(w, r, c, tenant, req, ctxMap, nil)
}

// runAndReply runs the chain and writes its outcome; with finish (a run
// id's), the outcome is stored first and the one stored is written.
func (s *Server) runAndReply(w http.ResponseWriter, r *http.Request, c *chain.Chain, tenant string, req *runRequest, ctxMap map[string]any, finish func([]byte) ([]byte, error)) {
	// The run goes on if the client goes away: its effects (credit, audit,
	// an approval) are the same whether anyone reads the outcome.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.opts.RunTimeout)
	defer cancel()
	start := time.Now()
	out, err := c.Run(ctx, chain.Input{Tenant: tenant, Point: req.Point, Context: ctxMap, Run: req.Run})
	s.observeRun(w, tenant, req.Point, time.Since(start), out, err)
	if err != nil {
		writeProblem(w, s.chainProblem(err))
		return
	}
	if err := s.recordPending(ctx, out); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	doc, err := outcomeDoc(out)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	if finish != nil {
		if doc, err = finish(doc); err != nil {
			writeProblem(w, s.internal(err))
			return
		}
	}
	writeRaw(w, 200, doc)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte("\n"))
}

// chainProblem maps an error of Run or Resolve to its problem, with the
// chain's stable code.
func (s *Server) chainProblem(err error) *Problem {
	var refused *chain.ApprovalError
	switch {
	case errors.As(err, &refused):
		return problem(http.StatusConflict, refused.Code, "%v", err)
	case errors.Is(err, chain.ErrUnknownApproval):
		return problem(http.StatusNotFound, "unknown_approval", "%v", err)
	case errors.Is(err, chain.ErrInvalidResolution):
		return problem(http.StatusUnprocessableEntity, "invalid_resolution", "%v", err)
	case errors.Is(err, chain.ErrInvalidInput):
		return problem(http.StatusUnprocessableEntity, "invalid_input", "%v", err)
	case errors.Is(err, chain.ErrClosed):
		return problem(http.StatusServiceUnavailable, CodeShuttingDown, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return problem(http.StatusGatewayTimeout, CodeTimeout, "the run took longer than %s", s.opts.RunTimeout)
	case errors.Is(err, chain.ErrAudit):
		return s.internal(err)
	}
	if c := runtime.Code(err); c != "" {
		return problem(http.StatusUnprocessableEntity, string(c), "%v", err)
	}
	return s.internal(err)
}

// approvalRow reads an approval of tenant: another tenant's is not found.
func (s *Server) approvalRow(ctx context.Context, tenant, id string) (status string, view, outcome []byte, pr *Problem) {
	var oc sql.NullString
	var v string
	if pr := s.scanRow(s.db.QueryRowContext(ctx, `SELECT status, view, outcome FROM serve_approvals WHERE id = ? AND tenant = ?`, id, tenant),
		problem(http.StatusNotFound, CodeNotFound, "not found"), &status, &v, &oc); pr != nil {
		return "", nil, nil, pr
	}
	return status, []byte(v), []byte(oc.String), nil
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, _ *Principal) {
	status := r.URL.Query().Get("status")
	if status == "" {
		status = "pending"
	}
	if status != "pending" && status != "resolved" && status != statusUnrecorded {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "status is pending, resolved or unrecorded"))
		return
	}
	out, err := queryAll(r.Context(), s.db, func(rows *sql.Rows) (json.RawMessage, error) {
		var st, v string
		if err := rows.Scan(&st, &v); err != nil {
			return nil, err
		}
		return withStatus([]byte(v), st), nil
	}, `SELECT status, view FROM serve_approvals WHERE tenant = ? AND status = ? ORDER BY created LIMIT 500`, r.PathValue("tenant"), status)
	s.writeList(w, "approvals", out, err)
}

func withStatus(view []byte, status string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(view, &m) != nil {
		return view
	}
	m["status"], _ = json.Marshal(status)
	b, _ := json.Marshal(m)
	return b
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, _ *Principal) {
	status, view, _, pr := s.approvalRow(r.Context(), r.PathValue("tenant"), r.PathValue("id"))
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	writeRaw(w, 200, withStatus(view, status))
}

type resolveRequest struct {
	Decision chain.ResolutionDecision `json:"decision"`
	Edit     map[string]any           `json:"edit,omitempty"`
	Reason   string                   `json:"reason,omitempty"`
}

func (s *Server) resolveApproval(w http.ResponseWriter, r *http.Request, p *Principal, req *resolveRequest) {
	tenant, id := r.PathValue("tenant"), r.PathValue("id")
	status, _, _, pr := s.approvalRow(r.Context(), tenant, id)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	if status != "pending" {
		writeProblem(w, problem(http.StatusConflict, chain.ApprovalResolved, "approval %s is resolved already", id))
		return
	}
	c := s.chainFor(tenant)
	if c == nil {
		writeProblem(w, problem(http.StatusConflict, CodeNoChain, "tenant %s has no chain bound", tenant))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.opts.RunTimeout)
	defer cancel()
	out, err := c.Resolve(ctx, id, chain.Resolution{Decision: req.Decision, Edit: req.Edit, Reason: req.Reason, Actor: p.KeyID})
	if err != nil {
		writeProblem(w, s.chainProblem(err))
		return
	}
	doc, err := s.finishResolution(ctx, tenant, id, out)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	writeRaw(w, 200, doc)
}

// finishResolution records a resolved approval's outcome as its result,
// indexes the approval the resumed run may have paused on again, and wakes
// the result's waiters, on every node; it returns the outcome as recorded
// (outcomeDoc). The store has resolved the approval already (Done), so a
// failing database is tried again (retryDB) before the index is left saying
// pending.
func (s *Server) finishResolution(ctx context.Context, tenant, id string, out *chain.Outcome) ([]byte, error) {
	ctx = context.WithoutCancel(ctx)
	if err := s.recordPending(ctx, out); err != nil {
		return nil, err
	}
	doc, err := outcomeDoc(out)
	if err != nil {
		return nil, err
	}
	err = s.retryDB(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `UPDATE serve_approvals SET status = 'resolved', outcome = ? WHERE id = ? AND tenant = ?`, string(doc), id, tenant); err != nil {
			return err
		}
		s.notify(ctx, tx, chanApprovals, id)
		return tx.Commit()
	})
	if err != nil {
		return nil, err
	}
	s.wake(id)
	s.observeResumed(out)
	return doc, nil
}

// approvalResult waits up to ?wait= seconds (at most MaxWait) for the
// approval to resolve, and returns its status and, once resolved, the
// resumed run's outcome.
func (s *Server) approvalResult(w http.ResponseWriter, r *http.Request, p *Principal) {
	tenant, id := r.PathValue("tenant"), r.PathValue("id")
	wait, pr := s.parseWait(r, 0)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	if wait > 0 {
		end, ok := s.startWait(w, r, p, "long polls")
		if !ok {
			return
		}
		defer end()
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	// Another node may resolve it: its notification wakes the waiter, and
	// the table is read again now and then.
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	// answer writes doc, unless the key was revoked or rotated while the
	// request waited.
	waited := false
	answer := func(doc ResultDoc) {
		if waited {
			switch live, err := s.keyLive(context.WithoutCancel(r.Context()), p); {
			case err != nil:
				writeProblem(w, s.internal(err))
				return
			case !live:
				writeProblem(w, keyGone())
				return
			}
		}
		writeJSON(w, 200, doc)
	}
	for {
		status, _, outcome, pr := s.approvalRow(r.Context(), tenant, id)
		if pr != nil {
			writeProblem(w, pr)
			return
		}
		if status != "pending" {
			// A waiter made between a pending read and the resolution's
			// wake is closed by nobody else: drop it.
			s.wake(id)
			doc := ResultDoc{ID: id, Status: status}
			if status == "resolved" {
				doc.Outcome = outcome
			}
			answer(doc)
			return
		}
		// Made only for an approval of this tenant that exists, so that
		// polling made-up ids leaves nothing behind; a resolution between
		// the read and here is seen at the next tick.
		ch := s.waiter(id)
		waited = true
		select {
		case <-ch:
		case <-tick.C:
		case <-deadline.C:
			answer(ResultDoc{ID: id, Status: status})
			return
		case <-s.done:
			answer(ResultDoc{ID: id, Status: status})
			return
		case <-r.Context().Done():
			return
		}
	}
}

// MaxAuditPage bounds the records one audit read returns (500).
const MaxAuditPage = 500

// listAudit returns the tenant's audit records after ?after= (a seq), at
// most ?limit= (MaxAuditPage): the stored lines of the tenant's own audit
// chain (store.TenantAudit), numbered from 0, each linked to the one before,
// as they are hashed and MACed.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, _ *Principal) {
	after, limit := int64(-1), int64(MaxAuditPage)
	if q := r.URL.Query().Get("after"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "after is a record's seq"))
			return
		}
		after = n
	}
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n < 1 {
			writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "limit is a positive number"))
			return
		}
		limit = min(n, MaxAuditPage)
	}
	out, err := queryAll(r.Context(), s.db, scanLine, `SELECT line FROM audit_records WHERE chain = ? AND seq > ? ORDER BY seq LIMIT ?`, []byte(r.PathValue("tenant")), after, limit)
	s.writeList(w, "records", out, err)
}

// scanLine reads a row of one audit record's line.
func scanLine(rows *sql.Rows) (rec json.RawMessage, err error) {
	err = rows.Scan(&rec)
	return
}

// verifyAudit verifies the tenant's audit chain as stored, with the host
// key (audit.VerifyStoreFrom): each record's hash and MAC, each linked to
// the one before, against the chain's checkpoint kept in the database
// (audit_checkpoints) and the one the request gives (?checkpoint=, a
// previous answer's). It reads the chain from the older of the two on,
// or from record 0 with ?full=true or when there is none; a verification
// that holds keeps the checkpoint of the end it reached, for the next one
// (RATIONALE.md#the-audit-log-over-a-store).
func (s *Server) verifyAudit(w http.ResponseWriter, r *http.Request, _ *Principal) {
	tenant := r.PathValue("tenant")
	full, given, p := s.verifyParams(r)
	if p != nil {
		writeProblem(w, p)
		return
	}
	// A verification may read the whole chain (a full one, or the first):
	// one at a time per tenant on the whole platform (a lease: every node
	// sharing the database counts it), so that a tenant's operators cannot
	// load the shared database with many at once.
	end, ok, err := s.startLease(r.Context(), "verify:"+tenant, 1)
	switch {
	case err != nil:
		s.unavailable(w, "the tenant's running verifications", err)
		return
	case !ok:
		w.Header().Set("Retry-After", "1")
		writeProblem(w, problem(http.StatusTooManyRequests, CodeRateLimited, "a verification of tenant %s's audit chain is running already", tenant))
		return
	}
	defer end()
	doc, err := s.verifyChain(r.Context(), tenant, full, given)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	writeJSON(w, 200, doc)
}

// MaxVerifyCheckpointBytes bounds a verification's ?checkpoint= (1 KiB;
// the JSON of a checkpoint is under 200 bytes): a longer one is 422.
const MaxVerifyCheckpointBytes = 1 << 10

// verifyParams reads a verification's ?full= and ?checkpoint= (the JSON of
// an audit.Checkpoint, whose MAC must verify under the host key). A query
// that does not parse, or that gives either twice, is refused: a
// checkpoint dropped (url.Values drops a pair it cannot parse) or one of
// two ignored would leave a verification answering for a checkpoint it
// never checked.
func (s *Server) verifyParams(r *http.Request) (full bool, given *audit.Checkpoint, p *Problem) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return false, nil, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "the query does not parse")
	}
	for _, name := range []string{"full", "checkpoint"} {
		if len(q[name]) > 1 {
			return false, nil, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "%s is given more than once", name)
		}
	}
	if v := q.Get("full"); v != "" {
		if full, err = strconv.ParseBool(v); err != nil {
			return false, nil, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "full is true or false")
		}
	}
	if v, ok := q["checkpoint"]; ok {
		if len(v[0]) > MaxVerifyCheckpointBytes {
			return false, nil, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "checkpoint is longer than %d bytes", MaxVerifyCheckpointBytes)
		}
		var c api.AuditCheckpoint
		dec := json.NewDecoder(strings.NewReader(v[0]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil || dec.More() {
			return false, nil, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "checkpoint is the JSON of a verification's checkpoint ({\"records\":N,\"head\":\"...\",\"mac\":\"...\"})")
		}
		given = (*audit.Checkpoint)(&c)
		if err := given.Check(s.opts.HostKey); err != nil {
			return false, nil, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "the checkpoint does not verify under the platform's key (changed, or made by another platform)")
		}
	}
	return full, given, nil
}

// verifyChain verifies tenant's chain (see verifyAudit) and keeps the
// checkpoint of the end it verified.
func (s *Server) verifyChain(ctx context.Context, tenant string, full bool, given *audit.Checkpoint) (*AuditVerifyDoc, error) {
	key := s.opts.HostKey
	as := store.NewAuditStore(s.sdb, tenant)
	var st audit.Store = as
	if wrap := s.verifyStore.Load(); wrap != nil {
		st = (*wrap)(st)
	}
	doc := &AuditVerifyDoc{Tenant: tenant}
	kept, err := as.Checkpoint(ctx)
	if err == nil && kept != nil {
		err = kept.Check(key)
	}
	switch {
	case errors.Is(err, audit.ErrCheckpoint), errors.Is(err, store.ErrCorrupt):
		doc.Cause = api.AuditCauseCheckpoint
		doc.Error = fmt.Sprintf("the chain's checkpoint kept in the database was changed there (%v); nothing was verified: compare the chain with a copy kept elsewhere, then delete its audit_checkpoints row", err)
		return doc, nil
	case err != nil:
		return nil, err
	}
	var checks []audit.Checkpoint
	for _, c := range []*audit.Checkpoint{kept, given} {
		if c != nil {
			checks = append(checks, *c)
		}
	}
	from, err := audit.NewCheckpoint(key, 0, "")
	if err != nil {
		return nil, err
	}
	if !full && len(checks) > 0 {
		slices.SortFunc(checks, func(a, b audit.Checkpoint) int { return cmp.Compare(a.Records, b.Records) })
		from, checks = checks[0], checks[1:]
	}
	doc.Full, doc.From = from.Records == 0, from.Records
	// Tenant: the records of another tenant's chain, MACed under the same
	// key, do not verify as this one's.
	res, err := audit.VerifyStoreFrom(ctx, st, from, audit.VerifyOptions{Key: key, Checkpoints: checks, Tenant: tenant})
	doc.Records, doc.Read = res.Records, res.Read
	var ve *audit.VerifyError
	switch {
	case errors.As(err, &ve):
		doc.Records, doc.Seq, doc.Error, doc.Cause = ve.Index, &ve.Seq, ve.Reason, api.AuditCauseRecord
		if ve.Missing {
			doc.Cause = api.AuditCauseMissing
		}
	case errors.Is(err, store.ErrCorrupt): // the chain's head row contradicts itself
		doc.Error, doc.Cause = err.Error(), api.AuditCauseRecord
	case err != nil:
		return nil, err
	default:
		doc.Verified = true
		c := api.AuditCheckpoint(res.End)
		doc.Checkpoint = &c
		if res.End.Records > 0 {
			if _, err := as.SaveCheckpoint(ctx, res.End); err != nil {
				// The verification holds; the next one starts from the
				// checkpoint kept before.
				s.log.Warn("server: keeping the audit chain's checkpoint", "tenant", tenant, "err", err)
			}
		}
	}
	return doc, nil
}
