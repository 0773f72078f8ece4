package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// fuzzAPITables are the tables a refused request must leave as they were:
// TestBadInput's.
var fuzzAPITables = [...]string{"serve_tenants", "serve_modules", "serve_uploads", "serve_versions", "serve_signing_keys", "serve_signatures", "serve_bindings", "serve_runs", "serve_approvals", "serve_keys", "serve_signing_key_approvals", "serve_revoked_keys"}

// fuzzCode is the form of a problem's stable code.
var fuzzCode = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// pathParam is a route pattern's {name}.
var pathParam = regexp.MustCompile(`\{[a-z]+\}`)

// FuzzAPI sends any route of the route table (by its index) a request of
// the fuzzer's: its path parameters (the segments of params, split at "/"),
// its query, its body and its X-Request-Id and traceparent (header), with
// the key of any role (admin, the publisher pubco's, the tenant acme's
// operator and runtime keys) or header as its Authorization, to a platform
// (on SQLite, or Postgres: serverDBEnv) where pubco has published the policy guest, acme has bound it and beta
// is another tenant. The server never fails (no 500, no broken connection:
// a panic in a handler is either); every refusal is an
// application/problem+json whose status is the response's and whose code
// is a stable code; a 2xx answer of a JSON route is JSON; a refused request
// (4xx) changes no table of the platform's; a tenant's key succeeds only on
// its own tenant, a publisher's only on its own modules and keys; and the
// answer's request id is the client's when well formed, else well formed.
func FuzzAPI(f *testing.F) {
	ctx := context.Background()
	logs := &testutil.SyncBuffer{} // the server's warnings and errors, told with a failure
	db := openSQLite(f, f.TempDir())
	if os.Getenv(serverDBEnv) == "postgres" {
		db = postgresTarget.OpenAt(f, storetest.PostgresURL(f))
	}
	p := startPlatform(f, db, hostKey(), func(o *server.Options) {
		o.RateLimit = server.RateLimit{PerSecond: 1e6, Burst: 1e6}
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		o.AccessLog = slog.New(slog.DiscardHandler)
		o.AuthFailLimit = server.RateLimit{PerSecond: 1e6, Burst: 1e6}
	})
	a := newTenant(f, p, "acme", false)
	if err := p.admin.CreateTenant(ctx, "beta", false); err != nil {
		f.Fatal(err)
	}
	v := publishGuest(f, a.pub, "policy", "policy")
	a.bind(f, chainConfig(client.Pin(v)))
	approval := a.pending(f, "fuzz-pending", map[string]any{"tool": "shell.exec"})
	keys := []string{adminKey}
	for _, k := range []struct {
		role   server.Role
		tenant string
	}{{server.RolePublisher, "pubco"}, {server.RoleOperator, "acme"}, {server.RoleRuntime, "acme"}} {
		doc, err := p.admin.CreateKey(ctx, k.role, k.tenant)
		if err != nil {
			f.Fatal(err)
		}
		keys = append(keys, doc.Key)
	}
	routes := p.srv.Routes()

	real := map[string]string{"{tenant}": "acme", "{publisher}": "pubco", "{digest}": v.Digest, "{name}": "policy",
		"{version}": "1.0.0", "{id}": approval, "{run}": "fuzz-pending", "{keyid}": "nokey", "{key}": "nokey"}
	bodies := map[string][]string{
		"createTenant":    {`{"id":"t1"}`, `{"id":"../x"}`, `{"id":`},
		"createKey":       {`{"role":"operator","tenant":"acme"}`, `{"role":"root"}`},
		"grantCredit":     {`{"amount":5,"key":"g1"}`, `{"amount":-1,"key":"g2"}`, `{"amount":9223372036854775807,"key":"g3"}`},
		"adjustCredit":    {`{"amount":-3,"note":"n","key":"a1"}`},
		"publishVersion":  {`{"name":"p2","version":"1.0.1","digest":"` + v.Digest + `"}`},
		"addSigningKey":   {`{"public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`, `{"public_key":"!!"}`},
		"signVersion":     {`{"key_id":"nokey","signature":"AAAA"}`},
		"bindChain":       {string(chainConfig(client.Pin(v))), string(chainConfig("policy.wasm")), `{"bindings":[{"limits":{"fuel":-1}}]}`},
		"resolveApproval": {`{"decision":"deny","reason":"no"}`, `{"decision":"edit","edit":{"tool":"x"}}`, `{"decision":"maybe"}`},
		"resolveApproval/new": {`{"decision":"approve"}`, `{"decision":"edit","edit":{"arguments":{"cmd":"ls","n":[1.5,null]}},"reason":"safer"}`,
			`{"decision":"edit","edit":{"arguments":"x"}}`, `{"decision":"edit","edit":{"tool":"rm"}}`, `{"decision":"edit"}`, `{"decision":"deny","edit":{}}`},
		"run":               {`{"point":"message.outbound","context":{"outgoing":"a SECRET"},"run":"r1"}`, `{"point":"tool.before","context":{"tool":"shell.exec"}}`, `{"point":"nope","context":{}}`, `{"point":"message.outbound","context":{"a":1,"a":2}}`},
		"uploadModule":      {"not a module", "\x00asm\x01\x00\x00\x00"},
		"listAudit":         nil,
		"verifyAudit":       nil,
		"approvalResult":    nil,
		"approvalEvents":    nil,
		"approveSigningKey": nil,
	}
	queries := map[string][]string{
		"listAudit":      {"after=0&limit=10", "after=-1", "limit=99999999999999999999", "after=x"},
		"listKeys":       {"tenant=acme"},
		"verifyAudit":    {"full=true", "checkpoint=%7B%7D"},
		"approvalResult": {"wait=0", "wait=1e309"},
		"approvalEvents": {"wait=0s", "wait=-5"},
	}
	roleOf := map[server.Role]uint8{server.RoleAdmin: 0, server.RolePublisher: 1, server.RoleOperator: 2, server.RoleRuntime: 3}
	for i, rt := range routes {
		var params []string
		for _, m := range pathParam.FindAllString(rt.Path, -1) {
			params = append(params, real[m])
		}
		bs := bodies[rt.ID]
		if len(bs) == 0 {
			bs = []string{""}
		}
		qs := append([]string{""}, queries[rt.ID]...)
		for _, b := range bs {
			for _, q := range qs {
				f.Add(uint8(i), roleOf[rt.Roles[0]], strings.Join(params, "/"), q, []byte(b), "")
			}
		}
	}

	// {id} "new" is an approval made for the request: a pending one to
	// resolve, edit or wait for.
	for i, rt := range routes {
		if !strings.Contains(rt.Path, "{id}") {
			continue
		}
		bs := append([]string{""}, bodies[rt.ID+"/new"]...)
		for _, b := range bs {
			f.Add(uint8(i), roleOf[rt.Roles[0]], "acme/new", "", []byte(b), "")
		}
	}
	var made int
	for _, h := range []string{"req-1.a:b_c-d", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "Bearer", "bearer  " + keys[2], "Basic eA=="} {
		f.Add(uint8(0), uint8(4), "", "", []byte(`{"id":"t2"}`), h)
		f.Add(uint8(3), uint8(2), "beta", "", []byte(nil), h)
	}

	f.Fuzz(func(t *testing.T, route, role uint8, params, query string, body []byte, header string) {
		rt := routes[int(route)%len(routes)]
		segs := strings.Split(params, "/")
		n := 0
		values := map[string]string{} // the path's parameters, as the server reads them
		path := pathParam.ReplaceAllStringFunc(rt.Path, func(m string) string {
			s := ""
			if n < len(segs) {
				s = segs[n]
			}
			n++
			if m == "{id}" && s == "new" {
				made++
				s = a.pending(t, "fuzz-"+strconv.Itoa(made), map[string]any{"tool": "shell.exec"})
			}
			values[m] = s
			return url.PathEscape(s)
		})
		if rt.ID == "approvalResult" || rt.ID == "approvalEvents" {
			// A long poll waits as long as it is told: no more than
			// now.
			query = fuzzNoWait(query)
		}
		var rd io.Reader
		if rt.Body != "" {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, rt.Method, p.hs.URL+path, rd)
		if err != nil {
			t.Fatalf("%s %s: %v", rt.Method, path, err)
		}
		req.URL.RawQuery = fuzzRawQuery(query)
		if rt.Body != "" {
			req.Header.Set("Content-Type", rt.Body)
		}
		header = fuzzHeader(header)
		key := int(role) % (len(keys) + 1)
		if key < len(keys) {
			req.Header.Set("Authorization", "Bearer "+keys[key])
		} else {
			req.Header.Set("Authorization", header)
		}
		req.Header.Set(server.RequestIDHeader, header)
		req.Header.Set("traceparent", header)

		before := fuzzCounts(t, p)
		resp, err := p.hs.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s?%s: %v", rt.Method, path, query, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s %s?%s: reading the answer: %v", rt.Method, path, query, err)
		}
		what := rt.Method + " " + path + "?" + query + " " + strings.TrimSpace(string(got)) + "\nthe server's log:\n" + fuzzTail(logs.String(), 4<<10)
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if id := resp.Header.Get(server.RequestIDHeader); !fuzzRequestID.MatchString(id) || fuzzRequestID.MatchString(header) && id != header {
			t.Fatalf("request id %q for %q: %s", id, header, what)
		}
		if resp.StatusCode/100 == 2 {
			// Each tenant's (and publisher's) keys reach its own only.
			switch {
			case (key == 2 || key == 3) && rt.Scope == server.ScopeTenant && values["{tenant}"] != "acme",
				key == 1 && rt.Scope == server.ScopePublisher && values["{publisher}"] != "pubco",
				key == len(keys) && !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(header, k) }) && rt.Scope != server.ScopePublic:
				t.Fatalf("%d with key %d: %s", resp.StatusCode, key, what)
			}
		}
		switch {
		case resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusGatewayTimeout:
			t.Fatalf("%d: %s", resp.StatusCode, what)
		case resp.StatusCode >= 400:
			var pr struct {
				Status int    `json:"status"`
				Code   string `json:"code"`
			}
			if ct != "application/problem+json" || json.Unmarshal(got, &pr) != nil || pr.Status != resp.StatusCode || !fuzzCode.MatchString(pr.Code) {
				t.Fatalf("%d %s, not a problem: %s", resp.StatusCode, ct, what)
			}
			if after := fuzzCounts(t, p); after != before {
				t.Fatalf("%d %s changed the tables: %v -> %v", resp.StatusCode, what, before, after)
			}
		case resp.StatusCode >= 200 && resp.StatusCode < 300 && (rt.Produces == "" && path == rt.Path || ct == "application/json"):
			if !json.Valid(got) {
				t.Fatalf("%d %s: not JSON", resp.StatusCode, what)
			}
		}
	})
}

// fuzzNoWait is query with a wait the server would wait for (none, which
// means the longest, or a positive number of seconds) made 0; any other is
// left to be refused.
func fuzzNoWait(query string) string {
	q, _ := url.ParseQuery(query)
	w := q.Get("wait")
	n, err := strconv.ParseFloat(strings.TrimSuffix(w, "s"), 64)
	if w != "" && (err != nil || !(n > 0)) {
		return query
	}
	q.Set("wait", "0")
	return q.Encode()
}

// fuzzRequestID is the form of a well-formed request id.
var fuzzRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// fuzzHeader is h as a header's value can carry it: controls but tab
// replaced (net/http sends no request holding them), outer blanks
// trimmed (the server reads none).
func fuzzHeader(h string) string {
	h = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return '?'
		}
		return r
	}, h)
	return strings.Trim(h, " \t")
}

// fuzzTail is the last n bytes of s.
func fuzzTail(s string, n int) string {
	return s[max(0, len(s)-n):]
}

// fuzzRawQuery is query with the bytes a request line cannot hold (controls,
// spaces, '#', non-ASCII) percent-encoded, as a client sends them: sent
// raw, net/http refuses the request line before any route sees it.
func fuzzRawQuery(query string) string {
	var b strings.Builder
	for i := 0; i < len(query); i++ {
		if c := query[i]; c <= ' ' || c >= 0x7f || c == '#' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// fuzzCounts returns the rows of each of fuzzAPITables.
func fuzzCounts(t *testing.T, p *platform) [len(fuzzAPITables)]int {
	t.Helper()
	var out [len(fuzzAPITables)]int
	for i, tb := range fuzzAPITables {
		out[i] = p.count(t, tb)
	}
	return out
}
