package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

type openAPIDoc struct {
	Paths map[string]map[string]struct {
		OperationID string        `json:"operationId"`
		Scope       server.Scope  `json:"x-scope"`
		Roles       []server.Role `json:"x-roles"`
		RequestBody *struct {
			Content map[string]any `json:"content"`
		} `json:"requestBody"`
	} `json:"paths"`
}

// TestOpenAPIServed: /openapi.json is the checked-in file, and every
// registered route is in it (and nothing else).
func TestOpenAPIServed(t *testing.T) {
	p := newPlatform(t)
	_, served, _ := httpGet(t, p.hs.URL+"/openapi.json", "", nil)
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(served) != string(file) {
		t.Fatal("/openapi.json is not openapi.json")
	}
	var doc openAPIDoc
	if err := json.Unmarshal(served, &doc); err != nil {
		t.Fatal(err)
	}
	var inDoc, registered []string
	for path, ops := range doc.Paths {
		for m, op := range ops {
			if op.Scope != server.ScopePublic {
				inDoc = append(inDoc, strings.ToUpper(m)+" "+path)
			}
		}
	}
	for _, r := range p.srv.Routes() {
		registered = append(registered, r.Method+" "+r.Path)
	}
	sort.Strings(inDoc)
	sort.Strings(registered)
	if !slices.Equal(inDoc, registered) {
		t.Fatalf("the document's operations %v are not the registered routes %v", inDoc, registered)
	}
}

// isolationBodies gives each operation a well-formed body, so that the
// isolation test reaches the route's checks: an operation added without one
// fails TestTenantIsolation.
var isolationBodies = map[string]string{
	"createTenant":    `{"id":"evil"}`,
	"createKey":       `{"role":"operator","tenant":"tb"}`,
	"grantCredit":     `{"amount":1000}`,
	"adjustCredit":    `{"amount":-1,"note":"isolation"}`,
	"uploadModule":    "WASM",
	"publishVersion":  `{"name":"policy","version":"2.0.0","digest":"DIGEST"}`,
	"addSigningKey":   `{"public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`,
	"signVersion":     `{"key_id":"KEYID","signature":"AAAA"}`,
	"bindChain":       "CHAIN",
	"resolveApproval": `{"decision":"deny","reason":"tenant A says no"}`,
	"run":             `{"point":"tool.before","context":{"tool":"shell.exec"}}`,
}

// TestTenantIsolation is driven by the OpenAPI document: every operation,
// with tenant B's (and publisher B's) objects in its path, called with each
// of tenant A's keys (operator, runtime, and publisher A's), is refused (403
// or 404, a problem, never B's data), except reading a published version, a
// catalogue every tenant's operator reads to bind; called with no key, it is
// 401. Afterwards B's state is as it was.
func TestTenantIsolation(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	for _, id := range []string{"ta", "tb"} {
		p.createTenant(t, id, false)
	}
	// B's world: publisher pb's signed version, tb's chain, a pending
	// approval, credit.
	pubB := p.key(t, server.RolePublisher, "pb")
	opB := p.key(t, server.RoleOperator, "tb")
	rtB := p.key(t, server.RoleRuntime, "tb")
	wasm := policyWasm(t)
	mod, err := pubB.UploadModule(ctx, "pb", wasm)
	if err != nil {
		t.Fatal(err)
	}
	v, err := pubB.Publish(ctx, "pb", "policy", "1.0.0", mod.Digest)
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := addSigned(t, pubB, "pb", "policy")
	cfgB := chainConfig(client.Pin(v))
	if _, err := opB.BindChain(ctx, "tb", cfgB); err != nil {
		t.Fatal(err)
	}
	if _, err := p.admin.GrantCredit(ctx, "tb", 50, "b"); err != nil {
		t.Fatal(err)
	}
	out, err := rtB.Run(ctx, "tb", "tool.before", map[string]any{"tool": "shell.exec"}, "b-run")
	if err != nil || out.Approval == nil {
		t.Fatalf("%+v %v", out, err)
	}
	approvalB := out.Approval.ID

	// A's keys. A also has its own chain, so that "no chain" cannot be
	// what refuses A.
	pubA := p.key(t, server.RolePublisher, "pa")
	opA := p.key(t, server.RoleOperator, "ta")
	if _, err := opA.BindChain(ctx, "ta", cfgB); err != nil {
		t.Fatal(err)
	}
	keysA := map[string]*client.Client{"operator": opA, "runtime": p.key(t, server.RoleRuntime, "ta"), "publisher": pubA}

	snapshot := func() string {
		var b strings.Builder
		for _, q := range []string{
			`SELECT COUNT(*) FROM serve_tenants`, `SELECT COUNT(*) FROM serve_keys`,
			`SELECT config FROM serve_bindings WHERE tenant = 'tb'`,
			`SELECT status FROM serve_approvals WHERE id = '` + approvalB + `'`,
			`SELECT COUNT(*) FROM serve_versions`, `SELECT COUNT(*) FROM serve_signatures`, `SELECT COUNT(*) FROM serve_signing_keys`,
			`SELECT COUNT(*) FROM serve_runs`, `SELECT COUNT(*) FROM serve_uploads`,
			`SELECT COUNT(*) FROM serve_signing_key_approvals`, `SELECT COUNT(*) FROM serve_revoked_keys`,
			`SELECT MIN(hash) || MAX(hash) FROM serve_keys WHERE tenant = 'tb'`,
		} {
			var s string
			if err := p.db.QueryRow(q).Scan(&s); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			b.WriteString(s + "|")
		}
		c, err := opB.Credit(ctx, "tb")
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.Repeat("x", int(c.Available)))
		return b.String()
	}
	keyB, err := p.admin.CreateKey(ctx, server.RoleOperator, "tb")
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot()

	params := map[string]string{"tenant": "tb", "publisher": "pb", "digest": mod.Digest, "name": "policy", "version": "1.0.0", "id": approvalB,
		"key": keyB.ID, "keyid": kid, "run": "b-run"}
	bodies := map[string][]byte{"WASM": wasm, "CHAIN": cfgB}
	paramRE := regexp.MustCompile(`\{([a-z]+)\}`)
	_, spec, _ := httpGet(t, p.hs.URL+"/openapi.json", "", nil)
	var doc openAPIDoc
	if err := json.Unmarshal(spec, &doc); err != nil {
		t.Fatal(err)
	}
	ops := 0
	for path, methods := range doc.Paths {
		for method, op := range methods {
			if op.Scope == server.ScopePublic {
				continue
			}
			ops++
			method = strings.ToUpper(method)
			url := paramRE.ReplaceAllStringFunc(path, func(m string) string {
				v, ok := params[m[1:len(m)-1]]
				if !ok {
					t.Fatalf("%s %s: no isolation case for the parameter %s: add one to params", method, path, m)
				}
				return v
			})
			var body []byte
			ctype := ""
			if op.RequestBody != nil {
				b, ok := isolationBodies[op.OperationID]
				if !ok {
					t.Fatalf("%s %s: no isolation case for the operation %s: add one to isolationBodies", method, path, op.OperationID)
				}
				if raw, ok := bodies[b]; ok {
					body = raw
				} else {
					body = []byte(strings.NewReplacer("DIGEST", mod.Digest, "KEYID", kid).Replace(b))
				}
				for ct := range op.RequestBody.Content {
					ctype = ct
				}
			}
			t.Run(op.OperationID+"/no key", func(t *testing.T) {
				wantProblem(t, client.New(p.hs.URL, ""), method, url, ctype, body, http.StatusUnauthorized)
			})
			if op.Scope == server.ScopeSelf {
				// Every key reads its own (TestMe); the guard checks no
				// path against the key, so such a route must name nothing.
				if strings.Contains(path, "{") {
					t.Fatalf("%s %s: a self-scoped route with a path parameter reaches other keys' objects", method, path)
				}
				continue
			}
			// B's object under A's own tenant or publisher: as unknown to
			// A as under B's.
			if strings.ContainsAny(path, "{") && regexp.MustCompile(`\{(id|digest|name|run)\}`).MatchString(path) {
				own := strings.NewReplacer("/v1/tenants/tb/", "/v1/tenants/ta/", "/v1/publishers/pb/", "/v1/publishers/pa/").Replace(url)
				for role, c := range keysA {
					if op.Scope == server.ScopeCatalogue && role == "operator" {
						continue
					}
					t.Run(op.OperationID+"/"+role+" of A, own path", func(t *testing.T) {
						if !slices.Contains(op.Roles, server.Role(role)) {
							return // refused by role, above
						}
						wantProblem(t, c, method, own, ctype, body, http.StatusNotFound, http.StatusUnprocessableEntity)
					})
				}
			}
			for role, c := range keysA {
				t.Run(op.OperationID+"/"+role+" of A", func(t *testing.T) {
					if op.Scope == server.ScopeCatalogue && role == "operator" {
						return // the catalogue is every tenant's to bind from
					}
					wantProblem(t, c, method, url, ctype, body, http.StatusForbidden, http.StatusNotFound)
				})
			}
		}
	}
	if ops < len(p.srv.Routes()) {
		t.Fatalf("%d operations checked, %d routes", ops, len(p.srv.Routes()))
	}
	if after := snapshot(); after != before {
		t.Fatalf("tenant B's state changed:\n%s\n%s", before, after)
	}
}

func wantProblem(t *testing.T, c *client.Client, method, url, ctype string, body []byte, statuses ...int) {
	t.Helper()
	var raw json.RawMessage
	err := c.Do(context.Background(), method, url, ctype, body, &raw)
	pr, ok := err.(*server.Problem)
	if !ok {
		t.Fatalf("%s %s: want a problem %v, got %v and %s", method, url, statuses, err, raw)
	}
	if !slices.Contains(statuses, pr.Status) {
		t.Fatalf("%s %s: want %v, got %d %s: %s", method, url, statuses, pr.Status, pr.Code, pr.Detail)
	}
}

// TestBindLocksPerTenant: a tenant's bind in progress (its chain being
// compiled, say) holds up that tenant's next bind only. Binds were one at a
// time per node for every tenant, so one tenant binding heavy
// configurations delayed every other tenant's binds and the node's reloads.
func TestBindLocksPerTenant(t *testing.T) {
	p := newPlatform(t)
	acme, globex := newTenant(t, p, "acme", false), newTenant(t, p, "globex", false)
	cfg := chainConfig(publishPolicy(t, acme.pub))
	release := server.HoldBind(p.srv, "acme")
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	done := make(chan error, 1)
	// ended waits for the bind in done to end well, failing with stuck if
	// it does not.
	ended := func(stuck string) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal(stuck)
		}
	}
	go func() { _, err := globex.op.BindChain(context.Background(), "globex", cfg); done <- err }()
	ended("globex's bind waits for acme's")
	go func() { _, err := acme.op.BindChain(context.Background(), "acme", cfg); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("acme's bind did not wait for acme's bind in progress: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	held = false
	release()
	ended("acme's bind did not go on once the bind in progress ended")
}
