package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/api"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestAccessLogTenantBounded: the access line's and the span's tenant come
// from the path before any key is checked, and were not cut as the path
// is: a client without a key wrote a 60 KiB tenant (the header limit) into
// every line and span, past MaxLoggedPathBytes. A tenant that is not a
// tenant's name (1 to 64 of [a-z0-9._-]) is cut like the path.
func TestAccessLogTenantBounded(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := newPlatformTweaked(t, func(o *server.Options) {
		o.AccessLog = slog.New(slog.NewJSONHandler(logs, nil))
		o.TracerProvider = tp
	})
	long := strings.Repeat("t", 16<<10)
	if status, _, _ := httpGet(t, p.hs.URL+"/v1/tenants/"+long+"/credit", "whk_wrong", nil); status != 401 {
		t.Fatalf("a wrong key: %d", status)
	}
	if status, _, _ := httpGet(t, p.hs.URL+"/v1/tenants/acme/credit", "whk_wrong", nil); status != 401 {
		t.Fatalf("a wrong key: %d", status)
	}
	all := logs.String()
	if strings.Contains(all, long[:2*server.MaxLoggedPathBytes]) {
		t.Errorf("the access log carries the path's tenant uncut (%d bytes of log)", len(all))
	}
	if !strings.Contains(all, `"tenant":"acme"`) {
		t.Errorf("a tenant's name is not logged whole:\n%s", all)
	}
	for _, sp := range rec.Ended() {
		for _, a := range sp.Attributes() {
			if len(a.Value.String()) > server.MaxLoggedPathBytes+3 {
				t.Errorf("span %s: attribute %s is %d bytes", sp.Name(), a.Key, len(a.Value.String()))
			}
		}
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
			var n int
			// A cluster is on Postgres: $1 as it is.
			if err := n1.db.QueryRow(`SELECT COUNT(*) FROM serve_keys WHERE id = $1`, k.ID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				left = append(left, k.ID)
			}
		}
		if len(left) != 1 {
			t.Fatalf("round %d: %d admin keys left of the last two, want 1", i, len(left))
		}
		admin = client.New(n1.hs.URL, map[string]string{a.ID: a.Key, b.ID: b.Key}[left[0]])
	}
}

// TestApprovalEventsUnrecorded: an approval marked unrecorded (resolved by
// the store, its outcome never recorded) ends its event stream at once,
// already marked or marked while the stream waits, and the client says
// ErrUnrecorded. The stream looked for "resolved" only: it waited MaxWait,
// then said "timeout" with status pending, so an SSE client waited again,
// for ever, for an outcome that would never come.
func TestApprovalEventsUnrecorded(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	unrecord := func(id string) {
		t.Helper()
		// The store resolved it long ago (Done), and the resuming node
		// died before recording the outcome.
		if _, err := p.db.Exec(q(`UPDATE serve_approvals SET done_at = 1 WHERE id = $1`), id); err != nil {
			t.Fatal(err)
		}
	}
	// Marked while the stream waits (the expiry pass runs every 100 ms).
	id := a.pending(t, "r-unrec-1", map[string]any{"tool": "shell.exec"})
	w := waitStream(ctx, a.rt, id, 20)
	time.Sleep(200 * time.Millisecond)
	unrecord(id)
	if g := w.result(t, "the stream, after the approval became unrecorded", 15*time.Second); !errors.Is(g.err, client.ErrUnrecorded) {
		t.Fatalf("the waiting stream: %v, want ErrUnrecorded", g.err)
	}
	// Marked already when the stream starts.
	if _, err := a.rt.WaitResult(ctx, "acme", id, 2, nil); !errors.Is(err, client.ErrUnrecorded) {
		t.Fatalf("a stream on an unrecorded approval: %v, want ErrUnrecorded", err)
	}
}

// TestRunIDWaitLeavesNoWaiter: a request that waited for another node's
// claim on its run id, then found that node's stored outcome with the claim
// still there (the release failed or has not run yet), leaves no waiter
// behind. The node that ran it does not announce a stored outcome, so
// nobody closed the waiter: one map entry kept for ever per such run id.
func TestRunIDWaitLeavesNoWaiter(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	// Another node holds the claim, and stores its outcome a little later.
	if _, err := p.db.Exec(q(`INSERT INTO serve_run_claims (tenant, run, owner, lease_until) VALUES ('acme', 'r-other', 'node-other', $1)`),
		time.Now().Add(time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	stored := make(chan error, 1)
	go func() {
		time.Sleep(800 * time.Millisecond)
		_, err := p.db.Exec(q(`INSERT INTO serve_runs (tenant, run, outcome) VALUES ('acme', 'r-other', $1)`),
			`{"run":"r-other","tenant":"acme","point":"tool.before","verdict":"allow","modified":false,"context":{},"trace":[],"audit":[]}`)
		stored <- err // its claim stays: giving it up failed (finishRun logs that, and goes on)
	}()
	out, err := a.rt.Run(ctx, "acme", "tool.before", map[string]any{"tool": "ls"}, "r-other")
	if err != nil || out.Verdict != "allow" || out.Run != "r-other" {
		t.Fatalf("%+v %v", out, err)
	}
	if err := <-stored; err != nil {
		t.Fatal(err)
	}
	if n := server.Waiters(p.srv); n != 0 {
		t.Fatalf("%d waiters left behind", n)
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
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, err := upload(bytes.NewReader(policy))
			if err != nil {
				t.Fatal(err)
			}
			if status == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d, want %d", status, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	try(http.StatusTooManyRequests) // both slow ones are in
	// Once they end, uploads pass again.
	stop()
	for range server.DefaultMaxUploadsInFlight {
		<-ended
	}
	try(http.StatusCreated)
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
	newPub := func() ed25519.PublicKey {
		k, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	var first ed25519.PublicKey
	for i := range server.MaxProposedSigningKeys {
		k := newPub()
		if i == 0 {
			first = k
		}
		if _, err := pub.RegisterSigningKey(ctx, "pubco", k); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	_, err := pub.RegisterSigningKey(ctx, "pubco", newPub())
	wantCode(t, err, 403, server.CodeQuotaExceeded)
	if keys, err := pub.SigningKeys(ctx, "pubco"); err != nil || len(keys) != server.MaxProposedSigningKeys {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	if _, err := pub.RegisterSigningKey(ctx, "pubco", first); err != nil {
		t.Fatalf("a key registered again: %v", err)
	}
	if d, err := p.admin.RegisterSigningKey(ctx, "pubco", newPub()); err != nil || !d.Approved {
		t.Fatalf("an admin's key: %+v %v", d, err)
	}
}

// TestResolvedButIndexedPendingBecomesUnrecorded: an approval the store
// resolved whose index row still says pending with no time of resolution
// (the index's update failed, then its node died) is found by the expiry
// pass once it is due (the store answers "resolved"), given that time, and
// marked unrecorded like the others: its waiters were told pending for ever.
func TestResolvedButIndexedPendingBecomesUnrecorded(t *testing.T) {
	ctx := context.Background()
	p := newPlatformTweaked(t, func(o *server.Options) { o.RunTimeout = time.Second })
	a := newAsking(t, p)
	id := a.pending(t, "r-lost-index", map[string]any{"tool": "shell.exec"})
	if _, err := a.op.Resolve(ctx, "acme", id, "approve", nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := p.db.Exec(q(`UPDATE serve_approvals SET status = 'pending', outcome = NULL, done_at = NULL, expires = $1 WHERE id = $2`),
		time.Now().Add(-time.Minute).UnixNano(), id); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(40 * time.Second)
	for {
		out, err := a.rt.Result(ctx, "acme", id, 5)
		if errors.Is(err, client.ErrUnrecorded) {
			return
		}
		if err != nil || out != nil {
			t.Fatalf("%+v %v", out, err)
		}
		if time.Now().After(deadline) {
			t.Fatal("still pending 40 s on (the unrecorded mark comes twice RunTimeout + 10 s after it is found)")
		}
	}
}
