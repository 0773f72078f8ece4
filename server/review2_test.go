package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
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
	past := time.Now().Add(-time.Hour).UnixNano()
	for i := range 150 {
		// No placeholders: the same text on SQLite and Postgres.
		if _, err := p.db.Exec(fmt.Sprintf(`INSERT INTO serve_approvals (id, tenant, run, status, view, expires, created) VALUES ('stuck%03d', 'evil', 'r', 'pending', '{}', %d, 'x')`,
			i, past+int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	rtk := newBound(t, p, expiringChainConfig).rt
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
	p := newPlatformTweaked(t, func(o *server.Options) { o.MaxWait, o.MaxPollsPerKey = maxWait, maxPolls })
	a := newAsking(t, p)
	id := a.pending(t, "r-poll", map[string]any{"tool": "shell.exec"})
	return p.hs.URL, id, a.rt, a.op, a.rt.Key
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
