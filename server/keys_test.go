package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/api"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestKeyLifecycle: keys are listed without secrets; a rotated key's old
// secret is 401 at once and the new one works; a revoked key is 401 at once;
// the last admin key cannot be revoked.
func TestKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	p.createTenant(t, "acme", false)
	k, err := p.admin.CreateNamedKey(ctx, server.RoleOperator, "acme", "ci")
	if err != nil {
		t.Fatal(err)
	}
	op := client.New(p.hs.URL, k.Key)
	if _, err := op.Credit(ctx, "acme"); err != nil {
		t.Fatal(err)
	}

	var raw json.RawMessage
	if err := p.admin.Do(ctx, "GET", "/v1/keys", "", nil, &raw); err != nil {
		t.Fatal(err)
	}
	hash := queryValue[string](t, p, `SELECT hash FROM serve_keys WHERE id = $1`, k.ID)
	if strings.Contains(string(raw), k.Key) || strings.Contains(string(raw), hash) || strings.Contains(string(raw), adminKey) {
		t.Fatalf("the key list shows a secret or a hash: %s", raw)
	}
	keys, err := p.admin.Keys(ctx, "acme")
	if err != nil || len(keys) != 1 || keys[0].ID != k.ID || keys[0].Name != "ci" || keys[0].Role != server.RoleOperator {
		t.Fatalf("acme's keys: %+v %v", keys, err)
	}

	// Rotate: same id, role and tenant; the old secret stops at once.
	nk, err := p.admin.RotateKey(ctx, k.ID)
	if err != nil || nk.ID != k.ID || nk.Key == k.Key || nk.Role != server.RoleOperator || nk.Tenant != "acme" {
		t.Fatalf("rotate: %+v %v", nk, err)
	}
	_, err = op.Credit(ctx, "acme")
	wantCode(t, err, 401, server.CodeUnauthenticated)
	op2 := client.New(p.hs.URL, nk.Key)
	if _, err := op2.Credit(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	// Revoke: 401 from the next request.
	if err := p.admin.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	_, err = op2.Credit(ctx, "acme")
	wantCode(t, err, 401, server.CodeUnauthenticated)
	wantCode(t, p.admin.RevokeKey(ctx, k.ID), 404, server.CodeNotFound)
	_, err = p.admin.RotateKey(ctx, k.ID)
	wantCode(t, err, 404, server.CodeNotFound)
	// Only operators' keys of other tenants remain untouched: the list no
	// longer has it.
	if keys, err := p.admin.Keys(ctx, "acme"); err != nil || len(keys) != 0 {
		t.Fatalf("after revocation: %+v %v", keys, err)
	}

	// The last admin key stays.
	all, err := p.admin.Keys(ctx, "")
	if err != nil || len(all) != 1 || all[0].Role != server.RoleAdmin {
		t.Fatalf("keys: %+v %v", all, err)
	}
	wantCode(t, p.admin.RevokeKey(ctx, all[0].ID), 409, server.CodeConflict)
	// With a second admin, the bootstrap key (WASMHOOKS_ADMIN_KEY) can go.
	a2, err := p.admin.CreateKey(ctx, server.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	admin2 := client.New(p.hs.URL, a2.Key)
	if err := admin2.RevokeKey(ctx, all[0].ID); err != nil {
		t.Fatal(err)
	}
	_, err = p.admin.Keys(ctx, "")
	wantCode(t, err, 401, server.CodeUnauthenticated)

}

// TestRevokedAdminKeyNotRestored: a start whose WASMHOOKS_ADMIN_KEY was
// revoked fails, rather than bring the key back (bootstrap adds the admin
// key it is given when its hash is missing). On its own SQLite file: the
// test restarts the server on the same database.
func TestRevokedAdminKeyNotRestored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := hostKey()
	db, rt := openSQLite(t, dir), newRuntime(t)
	approvals, err := chain.NewDirApprovals(filepath.Join(dir, "approvals"))
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{DB: db, Runtime: rt, HostKey: key, Approvals: approvals, AdminKey: adminKey}
	srv, err := server.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	admin := client.New(hs.URL, adminKey)
	a2, err := admin.CreateKey(ctx, server.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	revokeAdminsBut(t, client.New(hs.URL, a2.Key), a2.ID)
	srv.Drain()
	hs.Close()
	srv.Close(ctx)

	_, err = server.New(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("a start with the revoked admin key: %v", err)
	}
	// Without it, the server starts, and the other admin key works.
	opts.AdminKey = ""
	srv, err = server.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(ctx)
	if srv.BootstrapKey() != "" {
		t.Fatal("a new bootstrap key was made although an admin key exists")
	}
	hs = httptest.NewServer(srv.Handler())
	defer hs.Close()
	if _, err := client.New(hs.URL, a2.Key).Keys(ctx, ""); err != nil {
		t.Fatal(err)
	}
}

// TestAuthFailLimit: an address that failed to authenticate Burst times is
// 429 auth_rate_limited (with Retry-After) before its key is read, a valid
// key's too; a request without a key is not a failure; another address is
// not affected.
func TestAuthFailLimit(t *testing.T) {
	ctx := context.Background()
	p := newPlatformTweaked(t, func(o *server.Options) { o.AuthFailLimit = server.RateLimit{PerSecond: 0.001, Burst: 3} })
	bad := client.New(p.hs.URL, "whk_guess")
	none := client.New(p.hs.URL, "")
	for i := 0; i < 5; i++ { // not counted
		_, err := none.Keys(ctx, "")
		wantCode(t, err, 401, server.CodeUnauthenticated)
	}
	for i := 0; i < 3; i++ {
		_, err := bad.Keys(ctx, "")
		wantCode(t, err, 401, server.CodeUnauthenticated)
	}
	_, err := bad.Keys(ctx, "")
	wantCode(t, err, 429, server.CodeAuthLimited)
	if pr := err.(*server.Problem); pr.RetryAfter < 1 {
		t.Fatalf("Retry-After %d", pr.RetryAfter)
	}
	// The admin's valid key, from the same address: refused too, so the
	// answer tells a guesser nothing.
	_, err = p.admin.Keys(ctx, "")
	wantCode(t, err, 429, server.CodeAuthLimited)
	// Another address (127.0.0.2, loopback too) is served.
	other := client.New(p.hs.URL, adminKey)
	other.HTTP = &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}).DialContext}}
	if _, err := other.Keys(ctx, ""); err != nil {
		t.Fatalf("another address: %v", err)
	}
}

// TestMethodNotAllowed: a known path with another method is 405
// problem+json with Allow; an unknown path is 404.
func TestMethodNotAllowed(t *testing.T) {
	p := newPlatform(t)
	for _, tt := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"DELETE", "/v1/tenants", 405, "GET, HEAD, POST"},
		{"PATCH", "/v1/tenants/acme/chain", 405, "GET, HEAD, PUT"},
		{"GET", "/v1/keys/key_1", 405, "DELETE"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"GET", "/v1/nothing", 404, ""},
		{"DELETE", "/v1/tenants/acme/nothing", 404, ""},
	} {
		status, body, h := httpDo(t, tt.method, p.hs.URL+tt.path, adminKey, nil, "")
		var pr server.Problem
		_ = json.Unmarshal(body, &pr)
		wantCode := server.CodeNotFound
		if tt.status == 405 {
			wantCode = server.CodeMethodNotAllowed
		}
		if status != tt.status || h.Get("Allow") != tt.allow || pr.Code != wantCode ||
			h.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %d Allow %q %s %q, want %d Allow %q %s", tt.method, tt.path, status, h.Get("Allow"),
				h.Get("Content-Type"), pr.Code, tt.status, tt.allow, wantCode)
		}
	}
}

// TestUploadQuota: a publisher's uploads past its quota, in modules or in
// bytes, are 403 quota_exceeded and store nothing; uploading a module it
// has uploaded before is not counted again; another publisher has its own.
func TestUploadQuota(t *testing.T) {
	ctx := context.Background()
	policy := policyWasm(t)
	scripted, err := os.ReadFile("../testdata/guests/scripted.wasm")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		quota server.UploadQuota
	}{
		{"modules", server.UploadQuota{MaxModules: 1}},
		{"bytes", server.UploadQuota{MaxBytes: int64(len(policy)) + int64(len(scripted)) - 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlatformTweaked(t, func(o *server.Options) { o.UploadQuota = tt.quota })
			pub := p.key(t, server.RolePublisher, "pubco")
			if _, err := pub.UploadModule(ctx, "pubco", policy); err != nil {
				t.Fatal(err)
			}
			if _, err := pub.UploadModule(ctx, "pubco", policy); err != nil {
				t.Fatalf("the same module again: %v", err)
			}
			modules, uploads := p.count(t, "serve_modules"), p.count(t, "serve_uploads")
			_, err := pub.UploadModule(ctx, "pubco", scripted)
			wantCode(t, err, 403, server.CodeQuotaExceeded)
			if p.count(t, "serve_modules") != modules || p.count(t, "serve_uploads") != uploads {
				t.Fatal("a refused upload stored something")
			}
			if _, err := p.key(t, server.RolePublisher, "other").UploadModule(ctx, "other", scripted); err != nil {
				t.Fatalf("another publisher: %v", err)
			}
		})
	}
}

// TestSigningKeyTrust: a signing key registered with the publisher's API
// key is not trusted until an admin approves it; one an admin registers is;
// a withdrawn approval makes the next bind refuse the version; a publisher
// cannot approve its own key, nor list another's.
func TestSigningKeyTrust(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newTenant(t, p, "acme", true)
	pub, op := a.pub, a.op
	pin := publishPolicy(t, pub)

	pk, sk, _ := ed25519.GenerateKey(rand.Reader)
	d, err := pub.RegisterSigningKey(ctx, "pubco", pk)
	if err != nil || d.Approved || d.ID != server.SigningKeyID(pk) {
		t.Fatalf("register: %+v %v", d, err)
	}
	if _, err := pub.Sign(ctx, "pubco", "policy", "1.0.0", d.ID, sk); err != nil {
		t.Fatal(err)
	}
	_, err = op.BindChain(ctx, "acme", chainConfig(pin))
	wantCode(t, err, 422, server.CodeSignatureRequired)
	_, err = pub.ApproveSigningKey(ctx, "pubco", d.ID)
	wantCode(t, err, 403, server.CodeForbidden)
	_, err = p.key(t, server.RolePublisher, "rival").SigningKeys(ctx, "pubco")
	wantCode(t, err, 404, server.CodeNotFound)
	_, err = p.admin.ApproveSigningKey(ctx, "rival", d.ID) // not rival's key
	wantCode(t, err, 404, server.CodeNotFound)

	// An admin registers a second key: approved at once.
	pk2, sk2, _ := ed25519.GenerateKey(rand.Reader)
	d2, err := p.admin.RegisterSigningKey(ctx, "pubco", pk2)
	if err != nil || !d2.Approved {
		t.Fatalf("admin registers: %+v %v", d2, err)
	}
	if _, err := pub.Sign(ctx, "pubco", "policy", "1.0.0", d2.ID, sk2); err != nil {
		t.Fatal(err)
	}
	if _, err := op.BindChain(ctx, "acme", chainConfig(pin)); err != nil {
		t.Fatal(err)
	}
	if vs, err := pub.Versions(ctx, "pubco", "policy"); err != nil || len(vs) != 1 || !vs[0].Signed {
		t.Fatalf("versions: %+v %v", vs, err)
	}
	ks, err := pub.SigningKeys(ctx, "pubco")
	if err != nil || len(ks) != 2 {
		t.Fatalf("list: %+v %v", ks, err)
	}
	// Withdrawn: the next bind refuses the version.
	if d, err := p.admin.DistrustSigningKey(ctx, "pubco", d2.ID); err != nil || d.Approved {
		t.Fatalf("distrust: %+v %v", d, err)
	}
	_, err = op.BindChain(ctx, "acme", chainConfig(pin))
	wantCode(t, err, 422, server.CodeSignatureRequired)
	// The catalogue lists the version with both signatures, each valid,
	// and not signed (by an approved key) any more.
	vs, err := op.Versions(ctx, "pubco", "")
	if err != nil || len(vs) != 1 || len(vs[0].Signatures) != 2 || vs[0].Ref != pin || vs[0].Signed ||
		!vs[0].Signatures[0].Valid || !vs[0].Signatures[1].Valid || vs[0].Version.Digest != strings.Split(pin, ":")[1] {
		t.Fatalf("versions: %+v %v", vs, err)
	}
	if vs, err := op.Versions(ctx, "pubco", "nothing"); err != nil || len(vs) != 0 {
		t.Fatalf("versions of another name: %+v %v", vs, err)
	}
}

// TestRevokedKeyOpenWaits: a key revoked (or rotated) while its long poll
// and its event stream wait for an approval does not receive the resumed
// run's outcome: the lookup per request let a stolen key's waits, opened
// before the revocation, run on and deliver it (up to MaxWait later, and
// MaxPollsPerKey of them). The long poll is 401; the stream ends without
// "resolved".
func TestRevokedKeyOpenWaits(t *testing.T) {
	for _, how := range []string{"revoke", "rotate"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			p := newPlatform(t)
			a := newAsking(t, p)
			k, err := p.admin.CreateKey(ctx, server.RoleRuntime, "acme")
			if err != nil {
				t.Fatal(err)
			}
			stolen := client.New(p.hs.URL, k.Key)
			id := a.pending(t, "r-revoked-"+how, map[string]any{"tool": "shell.exec"})

			poll, stream := waitPoll(ctx, stolen, id, 30), waitStream(ctx, stolen, id, 30)
			stream.begun(t, 20*time.Second)
			time.Sleep(300 * time.Millisecond) // the long poll is waiting too
			retireKey(t, p.admin, how, k.ID)
			if _, err := a.op.Resolve(ctx, "acme", id, "approve", nil, ""); err != nil {
				t.Fatal(err)
			}
			for name, w := range map[string]*waiting{"long poll": poll, "event stream": stream} {
				g := w.result(t, name, 20*time.Second)
				if g.out != nil {
					t.Errorf("%s: the %sd key received the outcome (verdict %s)", name, how, g.out.Verdict)
				}
				var pr *api.Problem
				if name == "long poll" && (!errors.As(g.err, &pr) || pr.Status != 401) {
					t.Errorf("%s: %v, want 401", name, g.err)
				}
			}
			// The runtime key that was not revoked still gets it.
			if out, err := a.rt.Result(ctx, "acme", id, 0); err != nil || out == nil {
				t.Fatalf("the live key: %+v %v", out, err)
			}
		})
	}
}

// TestLastAdminKeyAcrossNodes: two nodes each revoking one of the last two
// admin keys at once must leave one. The last-admin check was exact within
// one process only (a lock in memory): on two nodes both counted two admin
// keys, both deleted, and nobody could make keys again.
func TestLastAdminKeyAcrossNodes(t *testing.T) {
	ctx := context.Background()
	// Revoked keys are refused on the way: no failed-authentication limit.
	c := newCluster(t, 2, func(_ int, o *server.Options) { o.AuthFailLimit = server.RateLimit{PerSecond: -1} })
	n1, n2 := c.nodes[0], c.nodes[1]
	admin := n1.admin
	for i := range 30 {
		a, err := admin.CreateKey(ctx, server.RoleAdmin, "")
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		b, err := admin.CreateKey(ctx, server.RoleAdmin, "")
		if err != nil {
			t.Fatal(err)
		}
		// Only a and b are admin keys now.
		revokeAdminsBut(t, client.New(n1.hs.URL, a.Key), a.ID, b.ID)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, x := range []struct {
			node     *platform
			with, id string
		}{{n1, b.Key, a.ID}, {n2, a.Key, b.ID}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_ = client.New(x.node.hs.URL, x.with).RevokeKey(ctx, x.id)
			}()
		}
		close(start)
		wg.Wait()
		var left []string
		for _, k := range []*server.KeyDoc{a, b} {
			if queryValue[int](t, n1, `SELECT COUNT(*) FROM serve_keys WHERE id = $1`, k.ID) == 1 {
				left = append(left, k.ID)
			}
		}
		if len(left) != 1 {
			t.Fatalf("round %d: %d admin keys left of the last two, want 1", i, len(left))
		}
		admin = client.New(n1.hs.URL, map[string]string{a.ID: a.Key, b.ID: b.Key}[left[0]])
	}
}

// TestUploadsInFlightBounded: one publisher key has at most
// DefaultMaxUploadsInFlight uploads in flight; one more is 429
// rate_limited before its body is read. Uploads were bounded in rate only,
// so one key could hold hundreds at once, each buffering up to 32 MiB and
// then compiling it: the server's memory and CPU, for one third party.
func TestUploadsInFlightBounded(t *testing.T) {
	p := newPlatform(t)
	k, err := p.admin.CreateKey(context.Background(), server.RolePublisher, "pubco")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	upload := func(body io.Reader) (int, error) {
		req, err := http.NewRequest("POST", p.hs.URL+"/v1/publishers/pubco/modules", body)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+k.Key)
		req.Header.Set("Content-Type", "application/wasm")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			return 0, errors.New("429 without Retry-After")
		}
		return resp.StatusCode, nil
	}
	// Slow uploads, over raw connections: headers saying 1 MiB and 64 KiB
	// of it sent, the rest never; each tried again when the server
	// answers (refused: another upload held its slot a moment), until
	// stop.
	slow, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	ended := make(chan struct{}, server.DefaultMaxUploadsInFlight)
	for range server.DefaultMaxUploadsInFlight {
		go func() {
			defer func() { ended <- struct{}{} }()
			for slow.Err() == nil {
				conn, err := net.Dial("tcp", p.hs.Listener.Addr().String())
				if err != nil {
					return
				}
				go func() { <-slow.Done(); conn.Close() }()
				fmt.Fprintf(conn, "POST /v1/publishers/pubco/modules HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/wasm\r\nContent-Length: %d\r\n\r\n", k.Key, 1<<20)
				_, _ = conn.Write(make([]byte, 64<<10))
				_, _ = io.Copy(io.Discard, conn) // the answer, or nothing until stop
				conn.Close()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	policy := policyWasm(t)
	try := func(want int) {
		t.Helper()
		eventually(t, 10*time.Second, 50*time.Millisecond, "an upload", func() error {
			status, err := upload(bytes.NewReader(policy))
			if err != nil {
				t.Fatal(err)
			}
			if status != want {
				return fmt.Errorf("%d, want %d", status, want)
			}
			return nil
		})
	}
	try(http.StatusTooManyRequests) // both slow ones are in
	// Once they end, uploads pass again.
	stop()
	for range server.DefaultMaxUploadsInFlight {
		<-ended
	}
	try(http.StatusCreated)
}

// TestProposedSigningKeysBounded: a publisher proposes at most
// MaxProposedSigningKeys signing keys an admin has not approved; one more
// is 403 quota_exceeded, and nothing is stored. A key registered again, and
// a key an admin registers (approved at once), pass. They were unbounded:
// each is read (and its signatures checked) whenever anyone lists or binds
// the publisher's versions, so one publisher key could make every tenant's
// reads of its catalogue, and binds of it, as slow as it liked.
func TestProposedSigningKeysBounded(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	pub := p.key(t, server.RolePublisher, "pubco")
	var first ed25519.PublicKey
	for i := range server.MaxProposedSigningKeys {
		k := newPublicKey(t)
		if i == 0 {
			first = k
		}
		if _, err := pub.RegisterSigningKey(ctx, "pubco", k); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	_, err := pub.RegisterSigningKey(ctx, "pubco", newPublicKey(t))
	wantCode(t, err, 403, server.CodeQuotaExceeded)
	if keys, err := pub.SigningKeys(ctx, "pubco"); err != nil || len(keys) != server.MaxProposedSigningKeys {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	if _, err := pub.RegisterSigningKey(ctx, "pubco", first); err != nil {
		t.Fatalf("a key registered again: %v", err)
	}
	if d, err := p.admin.RegisterSigningKey(ctx, "pubco", newPublicKey(t)); err != nil || !d.Approved {
		t.Fatalf("an admin's key: %+v %v", d, err)
	}
}
