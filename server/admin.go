package server

import (
	"database/sql"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/store"
)

// nameRE is a tenant's, publisher's or module's name.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

type tenantDoc struct {
	ID                string `json:"id"`
	RequireSignatures bool   `json:"require_signatures"`
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request, _ *Principal, req *tenantDoc) {
	if !nameRE.MatchString(req.ID) {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "a tenant id is 1 to 64 of [a-z0-9._-], starting with a letter or digit"))
		return
	}
	res, err := s.db.ExecContext(r.Context(), `INSERT INTO serve_tenants (id, require_signatures, created) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		req.ID, req.RequireSignatures, now())
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		writeProblem(w, problem(http.StatusConflict, CodeConflict, "tenant %q exists", req.ID))
		return
	}
	writeJSON(w, http.StatusCreated, req)
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request, _ *Principal) {
	out, err := queryAll(r.Context(), s.db, func(rows *sql.Rows) (t tenantDoc, err error) {
		err = rows.Scan(&t.ID, &t.RequireSignatures)
		return
	}, `SELECT id, require_signatures FROM serve_tenants ORDER BY id`)
	s.writeList(w, "tenants", out, err)
}

// writeList answers a list route: {key: items}, or the internal error err.
func (s *Server) writeList(w http.ResponseWriter, key string, items any, err error) {
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	writeJSON(w, 200, map[string]any{key: items})
}

func (s *Server) tenant(r *http.Request, id string) (*tenantDoc, *Problem) {
	t := tenantDoc{ID: id}
	if pr := s.scanRow(s.db.QueryRowContext(r.Context(), `SELECT require_signatures FROM serve_tenants WHERE id = ?`, id),
		problem(http.StatusNotFound, CodeNotFound, "not found"), &t.RequireSignatures); pr != nil {
		return nil, pr
	}
	return &t, nil
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request, _ *Principal) {
	t, p := s.tenant(r, r.PathValue("tenant"))
	respond(w, 200, t, p)
}

type keyRequest struct {
	Role   Role   `json:"role"`
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, _ *Principal, req *keyRequest) {
	switch {
	case !validRole(req.Role):
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "role must be admin, publisher, operator or runtime"))
		return
	case req.Role == RoleAdmin && req.Tenant != "":
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "an admin key has no tenant"))
		return
	case req.Role != RoleAdmin && !nameRE.MatchString(req.Tenant):
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "tenant (the publisher's name for a publisher key) is 1 to 64 of [a-z0-9._-]"))
		return
	case len(req.Name) > 128 || strings.ContainsAny(req.Name, "\x00\n\r"):
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "name is at most 128 bytes of one line"))
		return
	}
	if req.Role == RoleOperator || req.Role == RoleRuntime {
		if _, p := s.tenant(r, req.Tenant); p != nil {
			if p.Code == CodeNotFound {
				p = problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "no tenant %q", req.Tenant)
			}
			writeProblem(w, p)
			return
		}
	}
	key, id, err := s.newStoredKey(r.Context(), req.Role, req.Tenant, req.Name)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	writeJSON(w, http.StatusCreated, KeyDoc{ID: id, Key: key, Role: req.Role, Tenant: req.Tenant})
}

type creditRequest struct {
	Amount int64 `json:"amount"`
	// Key makes the grant idempotent: a grant retried with the same key
	// is applied once.
	Key string `json:"key"`
}

func (s *Server) grantCredit(w http.ResponseWriter, r *http.Request, tenant string, req *creditRequest) {
	if req.Amount <= 0 || len(req.Key) > 128 {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "amount must be positive, key at most 128 bytes"))
		return
	}
	if req.Key == "" {
		req.Key = "grant_" + randomID(12)
	}
	s.writeLedgerEntry(w, r, tenant, s.ledger.Grant(r.Context(), tenant, req.Amount, req.Key))
}

// creditRoute adapts h, the handler of a credit route whose body is a JSON
// T, to the route table: the path's tenant must exist, then the body decode
// (withBody), before h runs with both.
func creditRoute[T any](s *Server, h func(w http.ResponseWriter, r *http.Request, tenant string, req *T)) handlerFunc {
	body := withBody(s, func(w http.ResponseWriter, r *http.Request, _ *Principal, req *T) {
		h(w, r, r.PathValue("tenant"), req)
	})
	return func(w http.ResponseWriter, r *http.Request, p *Principal) {
		if _, pr := s.tenant(r, r.PathValue("tenant")); pr != nil {
			writeProblem(w, pr)
			return
		}
		body(w, r, p)
	}
}

// writeLedgerEntry answers a grant or an adjustment: the ledger's refusal
// (409 for credit that holds keep or a key used by another entry, 422 for
// an amount it refuses, 500 for anything else), or the tenant's credit.
func (s *Server) writeLedgerEntry(w http.ResponseWriter, r *http.Request, tenant string, err error) {
	switch {
	case errors.Is(err, capability.ErrInsufficientCredit), errors.Is(err, capability.ErrIdempotencyConflict):
		writeProblem(w, problem(http.StatusConflict, CodeConflict, "%v", err))
	case errors.Is(err, capability.ErrInvalidAmount), errors.Is(err, store.ErrInvalidNote):
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "%v", err))
	case err != nil:
		writeProblem(w, s.internal(err))
	default:
		s.writeCredit(w, r, tenant)
	}
}

// MaxAdjustmentNote bounds an adjustment's note (500 bytes).
const MaxAdjustmentNote = 500

type adjustRequest struct {
	// Amount is added to the balance: negative to take credit back.
	Amount int64 `json:"amount"`
	// Note says why; it is kept with the ledger entry. Required.
	Note string `json:"note"`
	// Key makes the adjustment idempotent, as for a grant.
	Key string `json:"key"`
}

// adjustCredit (admin) adds Amount, of either sign, to a tenant's credit
// with a note saying why (a correction, a refund, credit taken back): the
// ledger's adjustment entry. Credit that open holds keep cannot be taken
// back (409 conflict); a key already used by another entry is 409 too.
func (s *Server) adjustCredit(w http.ResponseWriter, r *http.Request, tenant string, req *adjustRequest) {
	if req.Amount == 0 || req.Note == "" || len(req.Note) > MaxAdjustmentNote || len(req.Key) > 128 {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "amount must not be 0, note is 1 to %d bytes, key at most 128 bytes", MaxAdjustmentNote))
		return
	}
	if req.Key == "" {
		req.Key = "adjust_" + randomID(12)
	}
	s.writeLedgerEntry(w, r, tenant, s.ledger.Adjust(r.Context(), tenant, req.Amount, req.Key, req.Note))
}

func (s *Server) getCredit(w http.ResponseWriter, r *http.Request, _ *Principal) {
	tenant := r.PathValue("tenant")
	if _, p := s.tenant(r, tenant); p != nil {
		writeProblem(w, p)
		return
	}
	s.writeCredit(w, r, tenant)
}

func (s *Server) writeCredit(w http.ResponseWriter, r *http.Request, tenant string) {
	avail, pending, err := s.ledger.Balance(r.Context(), tenant)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	writeJSON(w, 200, CreditDoc{Tenant: tenant, Available: avail, Pending: pending})
}

// listKeys lists the API keys (admin): ids, roles, tenants, names, never a
// secret (only hashes are stored, and those are not shown either).
// ?tenant= narrows it to one tenant's (or publisher's) keys.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, _ *Principal) {
	q, args := `SELECT id, role, tenant, name, created FROM serve_keys`, []any{}
	if t := r.URL.Query().Get("tenant"); !store.Storable(t) {
		s.writeList(w, "keys", []KeyInfo{}, nil) // no tenant's name
		return
	} else if t != "" {
		q += ` WHERE tenant = ?`
		args = append(args, t)
	}
	out, err := queryAll(r.Context(), s.db, func(rows *sql.Rows) (k KeyInfo, err error) {
		var role string
		err = rows.Scan(&k.ID, &role, &k.Tenant, &k.Name, &k.Created)
		k.Role = Role(role)
		return
	}, q+` ORDER BY created, id`, args...)
	s.writeList(w, "keys", out, err)
}

// revokeKey deletes an API key (admin): its next request is 401, and its
// hash is kept among the revoked so that WASMHOOKS_ADMIN_KEY cannot bring
// it back at the next start. The last admin key cannot be revoked (409):
// nobody could make keys again.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, _ *Principal) {
	id := r.PathValue("key")
	defer s.runLocks.Lock(keysLock)() // the last-admin check and the delete are one step (in this process)
	info, hash, pr := s.keyByID(r, id)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	var check func(*sqlTx) *Problem
	if info.Role == RoleAdmin {
		// Counted in the delete's transaction, the admin keys' rows
		// locked on Postgres: two nodes revoking the last two admin keys
		// at once each counted two, and both deleted. (SQLite: one
		// writer at a time, the second's stale read fails its write.)
		check = func(tx *sqlTx) *Problem {
			q := `SELECT id FROM serve_keys WHERE role = ?`
			if s.db.pg {
				q += ` FOR UPDATE`
			}
			rows, err := tx.QueryContext(r.Context(), q, string(RoleAdmin))
			if err != nil {
				return s.internal(err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return s.internal(err)
			}
			if n <= 1 {
				return problem(http.StatusConflict, CodeConflict, "%s is the last admin key: create another before revoking it", id)
			}
			return nil
		}
	}
	if pr := s.retireKey(r, hash, check, `DELETE FROM serve_keys WHERE id = ? AND hash = ?`, id, hash); pr != nil {
		writeProblem(w, pr)
		return
	}
	writeJSON(w, 200, map[string]any{"revoked": info})
}

// rotateKey gives an API key a new secret (admin), keeping its id, role and
// tenant: the old secret is 401 from now on (and revoked for good), the new
// one is in the answer only.
func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request, _ *Principal) {
	id := r.PathValue("key")
	defer s.runLocks.Lock(keysLock)()
	info, hash, pr := s.keyByID(r, id)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	key, err := newKey()
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	if pr := s.retireKey(r, hash, nil, `UPDATE serve_keys SET hash = ? WHERE id = ? AND hash = ?`, hashKey(key), id, hash); pr != nil {
		writeProblem(w, pr)
		return
	}
	writeJSON(w, 200, KeyDoc{ID: id, Key: key, Role: info.Role, Tenant: info.Tenant})
}

// keysLock is the runLocks key of changes to API keys (a run lock's key
// starts with a tenant's name, never with a NUL).
const keysLock = "\x00keys"

func (s *Server) keyByID(r *http.Request, id string) (*KeyInfo, string, *Problem) {
	k := KeyInfo{ID: id}
	var role, hash string
	if pr := s.scanRow(s.db.QueryRowContext(r.Context(), `SELECT hash, role, tenant, name, created FROM serve_keys WHERE id = ?`, id),
		problem(http.StatusNotFound, CodeNotFound, "no key %q", id), &hash, &role, &k.Tenant, &k.Name, &k.Created); pr != nil {
		return nil, "", pr
	}
	k.Role = Role(role)
	return &k, hash, nil
}

// retireKey runs change (a delete or a rehash of the key's row, on
// condition that its hash is still hash) and records hash as revoked, in one
// transaction, after check (if not nil) passes in it. A key changed
// meanwhile (by another node) is 409, and nothing is done.
func (s *Server) retireKey(r *http.Request, hash string, check func(*sqlTx) *Problem, change string, args ...any) *Problem {
	tx, err := s.db.BeginTx(r.Context(), nil)
	if err != nil {
		return s.internal(err)
	}
	defer tx.Rollback()
	if check != nil {
		if pr := check(tx); pr != nil {
			return pr
		}
	}
	res, err := tx.ExecContext(r.Context(), change, args...)
	if err != nil {
		return s.internal(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.internal(err)
	} else if n != 1 {
		return problem(http.StatusConflict, CodeConflict, "the key changed meanwhile; list the keys again")
	}
	if _, err := tx.ExecContext(r.Context(), `INSERT INTO serve_revoked_keys (hash, revoked) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING`, hash, now()); err != nil {
		return s.internal(err)
	}
	s.notify(r.Context(), tx, chanKeys, "") // the other nodes forget their cached keys
	if err := tx.Commit(); err != nil {
		return s.internal(err)
	}
	s.keys.invalidate()
	return nil
}
