package server_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
)

// TestExpiryNotBlockedByStuckApprovals: approvals the expiry loop cannot
// resolve (here rows whose approval the store does not know, as after a
// crash between the store's Done and the index's update; a tenant makes
// such ones itself with an approve-on-expiry binding it then unbinds: the
// stale approval refuses the approve) must not keep every later approval of
// every tenant from expiring. The loop read the 100 oldest due rows only.
func TestExpiryNotBlockedByStuckApprovals(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	if err := p.admin.CreateTenant(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour).UnixNano()
	for i := range 150 {
		if _, err := p.db.Exec(`INSERT INTO serve_approvals (id, tenant, run, status, view, expires, created) VALUES (?, 'evil', 'r', 'pending', '{}', ?, 'x')`,
			fmt.Sprintf("stuck%03d", i), past+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	pub := p.key(t, server.RolePublisher, "pubco")
	op := p.key(t, server.RoleOperator, "acme")
	rtk := p.key(t, server.RoleRuntime, "acme")
	mod, err := pub.UploadModule(ctx, "pubco", policyWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := pub.Publish(ctx, "pubco", "policy", "1.0.0", mod.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(chainConfig(client.Pin(v))), `"reason": "shell needs a human"}}`,
		`"reason": "shell needs a human"}}, "approval": {"timeout": "200ms", "on_expiry": "deny"}`, 1)
	if _, err := op.BindChain(ctx, "acme", []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	out, err := rtk.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec"}, "r-exp")
	if err != nil || out.Approval == nil {
		t.Fatalf("%+v %v", out, err)
	}
	res, err := rtk.Result(ctx, "acme", out.Approval.ID, 10)
	if err != nil || res == nil || res.Verdict != "block" {
		t.Fatalf("acme's approval did not expire behind the stuck ones: %+v %v", res, err)
	}
}

// pollPlatform is a platform whose long polls are bounded by maxWait and
// maxPolls per key, with acme's chain bound and one approval pending.
func pollPlatform(t *testing.T, maxWait time.Duration, maxPolls int) (hsURL, approval string, rtk, op *client.Client, rtkKey string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	approvals, _ := chain.NewDirApprovals(filepath.Join(dir, "approvals"))
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	srv, err := server.New(ctx, server.Options{DB: db, Runtime: rt, HostKey: key, Approvals: approvals, AdminKey: adminKey,
		MaxWait: maxWait, MaxPollsPerKey: maxPolls})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Drain()
		hs.Close()
		srv.Close(context.Background())
	})
	admin := client.New(hs.URL, adminKey)
	if err := admin.CreateTenant(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	mk := func(role server.Role, tenant string) (*client.Client, string) {
		k, err := admin.CreateKey(ctx, role, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return client.New(hs.URL, k.Key), k.Key
	}
	pub, _ := mk(server.RolePublisher, "pubco")
	op, _ = mk(server.RoleOperator, "acme")
	rtk, rtkKey = mk(server.RoleRuntime, "acme")
	mod, err := pub.UploadModule(ctx, "pubco", policyWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := pub.Publish(ctx, "pubco", "policy", "1.0.0", mod.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.BindChain(ctx, "acme", chainConfig(client.Pin(v))); err != nil {
		t.Fatal(err)
	}
	out, err := rtk.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec"}, "r-poll")
	if err != nil || out.Approval == nil {
		t.Fatalf("%+v %v", out, err)
	}
	return hs.URL, out.Approval.ID, rtk, op, rtkKey
}

// TestLongPollsPerKeyBounded: a key's open long polls are bounded
// (MaxPollsPerKey); one more is 429 rate_limited, and another key is still
// served. Without the bound a key held rate x MaxWait polls.
func TestLongPollsPerKeyBounded(t *testing.T) {
	ctx := context.Background()
	_, id, rtk, op, _ := pollPlatform(t, 30*time.Second, 2)
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// Polls are opened one by one and kept open, until one is refused.
	errs := make(chan error, 16)
	var err error
	started := 0
	for err == nil && started < 10 {
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, perr := rtk.Result(pctx, "acme", id, 30)
			errs <- perr
		}()
		select {
		case err = <-errs:
		case <-time.After(300 * time.Millisecond):
		}
	}
	wantCode(t, err, 429, server.CodeRateLimited)
	if started != 3 {
		t.Errorf("refused at poll %d, want 3 (2 allowed)", started)
	}
	// A poll that does not wait is not counted; another key is served.
	if _, err := rtk.Result(ctx, "acme", id, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Result(ctx, "acme", id, 0); err != nil {
		t.Fatal(err)
	}
}

// TestLongPollHugeWait: a wait past int64 nanoseconds (1e12 s) waits
// MaxWait; it converted to a negative duration and did not wait at all.
func TestLongPollHugeWait(t *testing.T) {
	url, id, _, _, key := pollPlatform(t, time.Second, 0)
	req, _ := http.NewRequest("GET", url+"/v1/tenants/acme/approvals/"+id+"/result?wait=1e12", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("wait=1e12 returned after %v; want about MaxWait (1 s)", d)
	}
}

// TestBindModulesBounded: a configuration naming one published module under
// many names is refused past MaxBindModules: each name's module was read
// (a copy each) before anything was checked, so one 4 MiB bind could hold
// tens of thousands of copies of a large module.
func TestBindModulesBounded(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	if err := p.admin.CreateTenant(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	pub := p.key(t, server.RolePublisher, "pubco")
	op := p.key(t, server.RoleOperator, "acme")
	mod, err := pub.UploadModule(ctx, "pubco", policyWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := pub.Publish(ctx, "pubco", "policy", "1.0.0", mod.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"modules": {"policy": "` + client.Pin(v) + `"`)
		for i := range n - 1 {
			fmt.Fprintf(&b, `, "m%d": "%s"`, i, client.Pin(v))
		}
		b.WriteString(`}, "bindings": [{"name": "b", "module": "policy", "point": "message.outbound", "phase": "guard", "settings": {"when": "x", "decide": {"action": "block", "reason": "x"}}}]}`)
		return []byte(b.String())
	}
	if _, err := op.BindChain(ctx, "acme", cfg(server.MaxBindModules)); err != nil {
		t.Fatalf("%d modules: %v", server.MaxBindModules, err)
	}
	_, err = op.BindChain(ctx, "acme", cfg(server.MaxBindModules+1))
	wantCode(t, err, 422, server.CodeInvalidConfig)
}
