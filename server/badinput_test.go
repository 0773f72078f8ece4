package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestBadInput: every bad request is a problem+json with a stable code, and
// nothing is stored.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newTenant(t, p, "acme", false)
	pub, op, rtk := a.pub, a.op, a.rt
	tables := []string{"serve_tenants", "serve_modules", "serve_uploads", "serve_versions", "serve_signing_keys", "serve_signatures", "serve_bindings", "serve_runs", "serve_approvals", "serve_keys", "serve_signing_key_approvals", "serve_revoked_keys"}
	before := map[string]int{}
	for _, tb := range tables {
		before[tb] = p.count(t, tb)
	}
	big := bytes.Repeat([]byte("a"), 70<<10)
	cases := []struct {
		name   string
		do     func() error
		status int
		code   string
	}{
		{"malformed tenant", func() error {
			return p.admin.Do(ctx, "POST", "/v1/tenants", "application/json", []byte(`{"id":`), nil)
		}, 400, server.CodeMalformedJSON},
		{"unknown field", func() error {
			return p.admin.Do(ctx, "POST", "/v1/tenants", "application/json", []byte(`{"id":"x","admin":true}`), nil)
		}, 400, server.CodeMalformedJSON},
		{"trailing data", func() error {
			return p.admin.Do(ctx, "POST", "/v1/tenants", "application/json", []byte(`{"id":"x"} {}`), nil)
		}, 400, server.CodeMalformedJSON},
		{"bad tenant id", func() error {
			return p.admin.Do(ctx, "POST", "/v1/tenants", "application/json", []byte(`{"id":"../x"}`), nil)
		}, 422, server.CodeInvalidRequest},
		{"oversized run", func() error {
			return rtk.Do(ctx, "POST", "/v1/tenants/acme/runs", "application/json", append(append([]byte(`{"point":"message.outbound","context":{"outgoing":"`), big...), `"}}`...), nil)
		}, 413, server.CodeBodyTooLarge},
		{"wrong content type", func() error {
			return p.admin.Do(ctx, "POST", "/v1/tenants", "text/plain", []byte(`{"id":"x"}`), nil)
		}, 415, server.CodeUnsupportedMedia},
		{"duplicate keys in context", func() error {
			return rtk.Do(ctx, "POST", "/v1/tenants/acme/runs", "application/json", []byte(`{"point":"message.outbound","context":{"a":1,"a":2}}`), nil)
		}, 400, server.CodeMalformedJSON},
		{"run without a chain", func() error {
			_, err := rtk.Run(ctx, "acme", "message.outbound", nil, "r1")
			return err
		}, 409, server.CodeNoChain},
		{"garbage module", func() error {
			_, err := pub.UploadModule(ctx, "pubco", []byte("not a module"))
			return err
		}, 422, "invalid_module"},
		{"wrong role binds", func() error {
			_, err := rtk.BindChain(ctx, "acme", chainConfig("pubco/policy@1.0.0#sha256:"+strings.Repeat("0", 64)))
			return err
		}, 403, server.CodeForbidden},
		{"unknown version", func() error {
			_, err := op.BindChain(ctx, "acme", chainConfig("pubco/policy@1.0.0#sha256:"+strings.Repeat("0", 64)))
			return err
		}, 422, server.CodeUnknownVersion},
		{"unpinned module", func() error {
			_, err := op.BindChain(ctx, "acme", chainConfig("policy.wasm"))
			return err
		}, 422, server.CodeInvalidConfig},
		{"malformed chain", func() error {
			_, err := op.BindChain(ctx, "acme", []byte(`{"modules":`))
			return err
		}, 400, server.CodeMalformedJSON},
		{"publish unknown digest", func() error {
			_, err := pub.Publish(ctx, "pubco", "x", "1.0.0", strings.Repeat("a", 64))
			return err
		}, 422, server.CodeNotFound},
		{"publish bad semver", func() error {
			_, err := pub.Publish(ctx, "pubco", "x", "1.0", strings.Repeat("a", 64))
			return err
		}, 422, server.CodeInvalidRequest},
		{"short signing key", func() error {
			_, err := pub.AddSigningKey(ctx, "pubco", make([]byte, 5))
			return err
		}, 422, server.CodeInvalidRequest},
		{"unknown key", func() error {
			return client.New(p.hs.URL, "whk_nope").CreateTenant(ctx, "z", false)
		}, 401, server.CodeUnauthenticated},
		{"wrong method", func() error {
			return p.admin.Do(ctx, "PUT", "/v1/tenants", "application/json", []byte(`{"id":"x"}`), nil)
		}, 405, server.CodeMethodNotAllowed},
		{"revoke an unknown key", func() error { return p.admin.RevokeKey(ctx, "key_0000") }, 404, server.CodeNotFound},
		{"rotate an unknown key", func() error {
			_, err := p.admin.RotateKey(ctx, "key_0000")
			return err
		}, 404, server.CodeNotFound},
		{"approve an unknown signing key", func() error {
			_, err := p.admin.ApproveSigningKey(ctx, "pubco", "ed25519:0000000000000000")
			return err
		}, 404, server.CodeNotFound},
		{"publisher approves", func() error {
			_, err := pub.ApproveSigningKey(ctx, "pubco", "ed25519:0000000000000000")
			return err
		}, 403, server.CodeForbidden},
		{"signing key for a bad publisher name", func() error {
			_, err := p.admin.RegisterSigningKey(ctx, "../x", make([]byte, 32))
			return err
		}, 422, server.CodeInvalidRequest},
		{"no key", func() error {
			return client.New(p.hs.URL, "").CreateTenant(ctx, "z", false)
		}, 401, server.CodeUnauthenticated},
	}
	rt := newRuntime(t)
	entries, err := os.ReadDir("../testdata/adversarial")
	if err != nil {
		t.Fatal(err)
	}
	hostile := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".wat") {
			continue
		}
		wasm := testutil.WAT(t, string(testutil.ReadFile(t, "testdata/adversarial/"+e.Name())))
		// The oracle is Load itself: the server refuses exactly what Load
		// refuses, with its code. (The corpus's modules that Load accepts,
		// those that misbehave only when run, are not bad input here.)
		m, lerr := rt.Load(ctx, wasm)
		if lerr == nil {
			m.Close(ctx)
			continue
		}
		want := string(runtime.Code(lerr))
		hostile++
		cases = append(cases, struct {
			name   string
			do     func() error
			status int
			code   string
		}{"hostile " + e.Name(), func() error {
			_, err := pub.UploadModule(ctx, "pubco", wasm)
			return err
		}, 422, want})
	}
	if hostile == 0 {
		t.Fatal("no module of ../testdata/adversarial is refused by Load: the hostile uploads test nothing")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			var pr *server.Problem
			if !errors.As(err, &pr) {
				t.Fatalf("want a problem, got %v", err)
			}
			if pr.Status != c.status || (c.code != "" && pr.Code != c.code) || pr.Code == "" {
				t.Fatalf("want %d %q, got %d %q: %s", c.status, c.code, pr.Status, pr.Code, pr.Detail)
			}
		})
	}
	for _, tb := range tables {
		if n := p.count(t, tb); n != before[tb] {
			t.Errorf("%s: %d rows, %d before: a refused request stored something", tb, n, before[tb])
		}
	}
}

// TestBindModulesBounded: a configuration naming one published module under
// many names is refused past MaxBindModules: each name's module was read
// (a copy each) before anything was checked, so one 4 MiB bind could hold
// tens of thousands of copies of a large module.
func TestBindModulesBounded(t *testing.T) {
	ctx := context.Background()
	a := newTenant(t, newPlatform(t), "acme", false)
	op := a.op
	pin := publishPolicy(t, a.pub)
	cfg := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"modules": {"policy": "` + pin + `"`)
		for i := range n - 1 {
			fmt.Fprintf(&b, `, "m%d": "%s"`, i, pin)
		}
		b.WriteString(`}, "bindings": [{"name": "b", "module": "policy", "point": "message.outbound", "phase": "guard", "settings": {"when": "x", "decide": {"action": "block", "reason": "x"}}}]}`)
		return []byte(b.String())
	}
	if _, err := op.BindChain(ctx, "acme", cfg(server.MaxBindModules)); err != nil {
		t.Fatalf("%d modules: %v", server.MaxBindModules, err)
	}
	_, err := op.BindChain(ctx, "acme", cfg(server.MaxBindModules+1))
	wantCode(t, err, 422, server.CodeInvalidConfig)
}

// TestSlowBodyCutOff: a request body that stops coming is given up after
// Options.BodyTimeout, the connection closed. A request the server answers
// without reading its body (a 401 to a client without a key, a 404) had the
// rest of it (up to 256 KiB) read after the answer with no deadline, so
// anyone, without a key, held a connection and its goroutine for as long as
// it liked by sending a byte now and then (the headers have 10 s, an idle
// connection 2 min, a body had none).
func TestSlowBodyCutOff(t *testing.T) {
	p := newPlatformTweaked(t, func(o *server.Options) { o.BodyTimeout = 300 * time.Millisecond })
	for _, tt := range []struct{ name, path, auth, want string }{
		{"no key", "/v1/tenants/acme/runs", "", ""},
		{"wrong key", "/v1/tenants/acme/runs", "Authorization: Bearer whk_wrong\r\n", ""},
		{"admin key", "/v1/tenants", "Authorization: Bearer " + adminKey + "\r\n", "HTTP/1.1 408 "}, // read by the handler: body_timeout
		{"no route", "/nowhere", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", p.hs.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", tt.path, tt.auth)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			var got bytes.Buffer
			if _, err := io.Copy(&got, conn); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("the connection is still open 10 s after its body stopped")
				}
			}
			if !strings.HasPrefix(got.String(), tt.want) || (tt.want != "" && !strings.Contains(got.String(), server.CodeBodyTimeout)) {
				t.Fatalf("answer %q, want %q... %s", got.String(), tt.want, server.CodeBodyTimeout)
			}
		})
	}
}
