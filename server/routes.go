package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/wasmhooks/wasmhooks/store"
)

// Scope says whose objects a route touches, and so which keys reach them.
type Scope string

// The scopes.
const (
	// ScopePublic routes need no key: /healthz, /readyz, /openapi.json.
	ScopePublic Scope = "public"
	// ScopeAdmin routes are the platform operator's.
	ScopeAdmin Scope = "admin"
	// ScopeTenant routes carry {tenant}: a tenant key reaches only its
	// own tenant's (an admin key any).
	ScopeTenant Scope = "tenant"
	// ScopePublisher routes carry {publisher}: a publisher key reaches
	// only its own.
	ScopePublisher Scope = "publisher"
	// ScopeCatalogue routes read published versions: their publisher,
	// and every tenant's operator (who binds them).
	ScopeCatalogue Scope = "catalogue"
	// ScopeSelf routes read only the caller's own key: every key
	// reaches them, so they take no path parameter (TestTenantIsolation
	// fails one that does).
	ScopeSelf Scope = "self"
)

// Route is one route of the API: the table below is the only place routes
// are registered, and the OpenAPI document is checked against it.
type Route struct {
	Method, Path string
	ID, Summary  string
	Roles        []Role
	Scope        Scope
	// Body is the request body's media type: "" (none),
	// "application/json" or "application/wasm".
	Body string
	// Produces is the 200 answer's media type: "" means
	// "application/json".
	Produces string
	h        handlerFunc
}

const jsonType, wasmType, eventStreamType = "application/json", "application/wasm", "text/event-stream"

func (s *Server) table() []Route {
	admin := []Role{RoleAdmin}
	pub := []Role{RolePublisher}
	op := []Role{RoleOperator}
	return []Route{
		{Method: "POST", Path: "/v1/tenants", ID: "createTenant", Summary: "Create a tenant", Roles: admin, Scope: ScopeAdmin, Body: jsonType, h: withBody(s, s.createTenant)},
		{Method: "GET", Path: "/v1/tenants", ID: "listTenants", Summary: "List the tenants", Roles: admin, Scope: ScopeAdmin, h: s.listTenants},
		{Method: "GET", Path: "/metrics", ID: "metrics", Summary: "Prometheus metrics (text exposition format; metrics.go)", Roles: admin, Scope: ScopeAdmin, Produces: "text/plain", h: s.serveMetrics},
		{Method: "GET", Path: "/v1/tenants/{tenant}", ID: "getTenant", Summary: "Read a tenant", Roles: []Role{RoleAdmin, RoleOperator}, Scope: ScopeTenant, h: s.getTenant},
		{Method: "POST", Path: "/v1/keys", ID: "createKey", Summary: "Create an API key (shown once)", Roles: admin, Scope: ScopeAdmin, Body: jsonType, h: withBody(s, s.createKey)},
		{Method: "GET", Path: "/v1/keys", ID: "listKeys", Summary: "List the API keys (?tenant=), never their secrets", Roles: admin, Scope: ScopeAdmin, h: s.listKeys},
		{Method: "DELETE", Path: "/v1/keys/{key}", ID: "revokeKey", Summary: "Revoke an API key: 401 from its next request", Roles: admin, Scope: ScopeAdmin, h: s.revokeKey},
		{Method: "POST", Path: "/v1/keys/{key}/rotate", ID: "rotateKey", Summary: "Give an API key a new secret (shown once); the old one stops working", Roles: admin, Scope: ScopeAdmin, h: s.rotateKey},
		{Method: "POST", Path: "/v1/tenants/{tenant}/credit", ID: "grantCredit", Summary: "Grant credit to a tenant", Roles: admin, Scope: ScopeTenant, Body: jsonType, h: creditRoute(s, s.grantCredit)},
		{Method: "POST", Path: "/v1/tenants/{tenant}/credit/adjustments", ID: "adjustCredit", Summary: "Adjust a tenant's credit, either sign, with a note (admin)", Roles: admin, Scope: ScopeTenant, Body: jsonType, h: creditRoute(s, s.adjustCredit)},
		{Method: "GET", Path: "/v1/tenants/{tenant}/credit", ID: "getCredit", Summary: "Read a tenant's credit", Roles: []Role{RoleAdmin, RoleOperator}, Scope: ScopeTenant, h: s.getCredit},

		{Method: "POST", Path: "/v1/publishers/{publisher}/modules", ID: "uploadModule", Summary: "Upload a module (validated as Load validates)", Roles: pub, Scope: ScopePublisher, Body: wasmType, h: s.uploadModule},
		{Method: "GET", Path: "/v1/publishers/{publisher}/modules/{digest}", ID: "getModule", Summary: "Read an uploaded module's validation report", Roles: pub, Scope: ScopePublisher, h: s.getModule},
		{Method: "POST", Path: "/v1/publishers/{publisher}/versions", ID: "publishVersion", Summary: "Publish name@version for an uploaded digest (immutable)", Roles: pub, Scope: ScopePublisher, Body: jsonType, h: withBody(s, s.publishVersion)},
		{Method: "GET", Path: "/v1/publishers/{publisher}/versions/{name}/{version}", ID: "getVersion", Summary: "Read a published version and its signatures", Roles: []Role{RolePublisher, RoleOperator}, Scope: ScopeCatalogue, h: s.getVersion},
		{Method: "POST", Path: "/v1/publishers/{publisher}/signing-keys", ID: "addSigningKey", Summary: "Register an ed25519 public key (an admin's is approved at once, a publisher's once an admin approves it)", Roles: []Role{RolePublisher, RoleAdmin}, Scope: ScopePublisher, Body: jsonType, h: withBody(s, s.addSigningKey)},
		{Method: "GET", Path: "/v1/publishers/{publisher}/versions", ID: "listVersions", Summary: "List a publisher's versions, with signatures and validation reports", Roles: []Role{RolePublisher, RoleOperator}, Scope: ScopeCatalogue, h: s.listVersions},
		{Method: "GET", Path: "/v1/publishers/{publisher}/signing-keys", ID: "listSigningKeys", Summary: "List a publisher's signing keys and whether each is approved", Roles: []Role{RolePublisher, RoleAdmin}, Scope: ScopePublisher, h: s.listSigningKeys},
		{Method: "PUT", Path: "/v1/publishers/{publisher}/signing-keys/{keyid}/approval", ID: "approveSigningKey", Summary: "Approve a publisher's signing key: its signatures count for require_signatures", Roles: admin, Scope: ScopeAdmin, h: s.approveSigningKey},
		{Method: "DELETE", Path: "/v1/publishers/{publisher}/signing-keys/{keyid}/approval", ID: "distrustSigningKey", Summary: "Withdraw a signing key's approval: its signatures stop counting", Roles: admin, Scope: ScopeAdmin, h: s.distrustSigningKey},
		{Method: "POST", Path: "/v1/publishers/{publisher}/versions/{name}/{version}/signatures", ID: "signVersion", Summary: "Add an ed25519 signature of a version", Roles: pub, Scope: ScopePublisher, Body: jsonType, h: withBody(s, s.signVersion)},

		{Method: "PUT", Path: "/v1/tenants/{tenant}/chain", ID: "bindChain", Summary: "Bind published versions into the tenant's chain", Roles: op, Scope: ScopeTenant, Body: jsonType, h: s.bindChain},
		{Method: "GET", Path: "/v1/tenants/{tenant}/chain", ID: "getChain", Summary: "Read the tenant's chain", Roles: op, Scope: ScopeTenant, h: s.getChain},
		{Method: "GET", Path: "/v1/tenants/{tenant}/approvals", ID: "listApprovals", Summary: "List the tenant's approvals", Roles: op, Scope: ScopeTenant, h: s.listApprovals},
		{Method: "GET", Path: "/v1/tenants/{tenant}/approvals/{id}", ID: "getApproval", Summary: "Read an approval", Roles: op, Scope: ScopeTenant, h: s.getApproval},
		{Method: "POST", Path: "/v1/tenants/{tenant}/approvals/{id}/resolve", ID: "resolveApproval", Summary: "Approve, deny or edit a pending approval", Roles: op, Scope: ScopeTenant, Body: jsonType, h: withBody(s, s.resolveApproval)},
		{Method: "GET", Path: "/v1/tenants/{tenant}/approvals/{id}/result", ID: "approvalResult", Summary: "Wait (long poll, ?wait=SECONDS) for an approval's result", Roles: []Role{RoleOperator, RoleRuntime}, Scope: ScopeTenant, h: s.approvalResult},
		{Method: "GET", Path: "/v1/tenants/{tenant}/approvals/{id}/events", ID: "approvalEvents", Summary: "Wait for an approval's result as Server-Sent Events (?wait=SECONDS)", Roles: []Role{RoleOperator, RoleRuntime}, Scope: ScopeTenant, Produces: eventStreamType, h: s.approvalEvents},
		{Method: "GET", Path: "/v1/tenants/{tenant}/audit", ID: "listAudit", Summary: "Read the tenant's audit records (?after=SEQ&limit=N)", Roles: op, Scope: ScopeTenant, h: s.listAudit},
		{Method: "GET", Path: "/v1/tenants/{tenant}/runs/{run}", ID: "getRun", Summary: "Read a run: its outcomes, approvals, and audit records with their verification status", Roles: op, Scope: ScopeTenant, h: s.getRun},
		{Method: "GET", Path: "/v1/tenants/{tenant}/hooks", ID: "listHooks", Summary: "List the modules the tenant's chain names, with signatures and validation reports", Roles: op, Scope: ScopeTenant, h: s.listHooks},
		{Method: "GET", Path: "/v1/tenants/{tenant}/usage", ID: "getUsage", Summary: "Read a tenant's credit and usage", Roles: []Role{RoleAdmin, RoleOperator}, Scope: ScopeTenant, h: s.getUsage},
		{Method: "GET", Path: "/v1/me", ID: "getMe", Summary: "Read the caller's key: its id, role and tenant", Roles: []Role{RoleAdmin, RolePublisher, RoleOperator, RoleRuntime}, Scope: ScopeSelf, h: s.getMe},
		{Method: "GET", Path: "/v1/tenants/{tenant}/audit/verify", ID: "verifyAudit", Summary: "Verify the tenant's audit chain with the platform's key, from its checkpoint on (?full=true: from record 0; ?checkpoint=JSON: a previous answer's checkpoint, which the chain must still hold)", Roles: op, Scope: ScopeTenant, h: s.verifyAudit},
		{Method: "POST", Path: "/v1/tenants/{tenant}/runs", ID: "run", Summary: "Run the tenant's chain at a point", Roles: []Role{RoleRuntime}, Scope: ScopeTenant, Body: jsonType, h: withBody(s, s.run)},
	}
}

// Routes lists the API's routes, for the OpenAPI document and its tests.
func (s *Server) Routes() []Route { return s.table() }

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(OpenAPI)
	})
	for _, rt := range s.table() {
		mux.Handle(rt.Method+" "+rt.Path, s.guard(rt))
	}
	s.consoleRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			writeProblem(w, problem(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s %s: the path takes %s", r.Method, r.URL.Path, allow))
			return
		}
		writeProblem(w, problem(http.StatusNotFound, CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// allowed lists the methods mux has a route for at r's path (HEAD with
// GET), or "" when it has none: a known path asked with another method is
// 405 with Allow, not 404.
func allowed(mux *http.ServeMux, r *http.Request) string {
	var out []string
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
		if m == r.Method {
			continue
		}
		probe := *r
		probe.Method = m
		if _, pattern := mux.Handler(&probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeProblem(w, problem(http.StatusServiceUnavailable, CodeShuttingDown, "the server is shutting down"))
		return
	}
	if err := s.db.PingContext(r.Context()); err != nil {
		writeProblem(w, problem(http.StatusServiceUnavailable, CodeInternal, "the database does not answer"))
		return
	}
	writeJSON(w, 200, map[string]string{"status": "ready"})
}

// guard authenticates the request, checks the key's role against the
// route's roles (403), then its tenant against the route's scope: another
// tenant's or publisher's objects are 404, so a key learns nothing of them,
// not even that they exist. Only then does the handler run.
func (s *Server) guard(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, prob := s.authenticate(r)
		if prob != nil {
			writeProblem(w, prob)
			return
		}
		noteKey(r, p)
		if !s.rateLimit(w, r, p) {
			return
		}
		if !slices.Contains(rt.Roles, p.Role) {
			writeProblem(w, problem(http.StatusForbidden, CodeForbidden, "a %s key may not %s", p.Role, rt.Summary))
			return
		}
		// A path whose parameters are not text a store can hold names
		// nothing (Postgres refuses it: a 500 where SQLite found no row).
		if !inScope(rt, r, p) || !store.Storable(r.URL.Path) {
			writeProblem(w, problem(http.StatusNotFound, CodeNotFound, "not found"))
			return
		}
		if rt.Body != "" {
			ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
			if strings.TrimSpace(ct) != rt.Body {
				writeProblem(w, problem(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "the body must be %s", rt.Body))
				return
			}
		}
		rt.h(w, r, p)
	})
}

func inScope(rt Route, r *http.Request, p *Principal) bool {
	switch rt.Scope {
	case ScopeAdmin:
		return p.Role == RoleAdmin
	case ScopeTenant:
		return p.Role == RoleAdmin || r.PathValue("tenant") == p.Tenant
	case ScopePublisher:
		// An admin reaches what a route's roles let it (registering and
		// listing a publisher's signing keys).
		return p.Role == RoleAdmin || r.PathValue("publisher") == p.Tenant
	case ScopeCatalogue:
		return p.Role == RoleOperator || r.PathValue("publisher") == p.Tenant
	case ScopeSelf:
		return true
	}
	return false
}
