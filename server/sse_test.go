package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestApprovalEvents: the Server-Sent Events stream of an approval gives
// "status" then, once an operator resolves it, "resolved" with the resumed
// outcome, and ends; an approval resolved already gives "resolved" at once.
func TestApprovalEvents(t *testing.T) {
	ctx := context.Background()
	a, id, w := streamWaiting(t, newPlatform(t), "r-sse", map[string]any{"tool": "shell.exec"}, 30)
	if _, err := a.op.Resolve(ctx, "acme", id, "approve", nil, ""); err != nil {
		t.Fatal(err)
	}
	g := w.result(t, "the waiting client", 20*time.Second)
	if g.err != nil || g.out == nil || g.out.Verdict != "allow" || g.out.Run != "r-sse" {
		t.Fatalf("waiting client: %+v %v", g.out, g.err)
	}
	if strings.Join(g.events, ",") != "status:pending,resolved:resolved" {
		t.Fatalf("events %v", g.events)
	}
	// Resolved already: the result at once.
	o, err := a.op.WaitResult(ctx, "acme", id, 30, nil)
	if err != nil || o == nil || o.Verdict != "allow" {
		t.Fatalf("after resolution: %+v %v", o, err)
	}
	// An unknown approval is a problem, not an empty stream.
	_, err = a.rt.WaitResult(ctx, "acme", "no-such-approval", 1, nil)
	wantCode(t, err, 404, server.CodeNotFound)
	err = a.rt.Do(ctx, "GET", "/v1/tenants/acme/approvals/"+id+"/events?wait=soon", "", nil, nil)
	wantCode(t, err, 422, server.CodeInvalidRequest)
}

// TestApprovalEventsHeartbeatAndEnd reads the stream's bytes: the headers,
// heartbeat comments while it waits, and a "timeout" event at the end of
// ?wait=, after which the server closes the stream; a key's open waits
// (streams and long polls together) are bounded.
func TestApprovalEventsHeartbeatAndEnd(t *testing.T) {
	p := newPlatformTweaked(t, func(o *server.Options) {
		o.Heartbeat = 50 * time.Millisecond
		o.MaxPollsPerKey = 1
	})
	a := newAsking(t, p)
	id := a.pending(t, "r-beat", map[string]any{"tool": "shell.exec"})

	req, _ := http.NewRequest("GET", p.hs.URL+"/v1/tenants/acme/approvals/"+id+"/events?wait=1", nil)
	req.Header.Set("Authorization", "Bearer "+a.rt.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	// While this stream is open, the key's one wait is taken: a long poll
	// and a second stream are refused.
	_, err = a.rt.Result(context.Background(), "acme", id, 5)
	wantCode(t, err, 429, server.CodeRateLimited)
	_, err = a.rt.WaitResult(context.Background(), "acme", id, 5, nil)
	wantCode(t, err, 429, server.CodeRateLimited)

	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() { // ends when the server closes the stream
		lines = append(lines, sc.Text())
	}
	all := strings.Join(lines, "\n")
	if !strings.HasPrefix(all, "event: status\ndata: {") || strings.Count(all, ": heartbeat") < 3 ||
		!strings.HasSuffix(all, "event: timeout\ndata: {\"id\":\""+id+"\",\"status\":\"pending\"}\n") {
		t.Fatalf("stream:\n%s", all)
	}
	// The wait is given back when the stream ends (the handler returns
	// just after the client saw the end: allow it a moment).
	eventually(t, 10*time.Second, 20*time.Millisecond, "after the stream", func() error {
		if o, err := a.rt.Result(context.Background(), "acme", id, 1); err != nil || o != nil {
			return fmt.Errorf("%+v %v", o, err)
		}
		return nil
	})
}

// TestApprovalEventsExpiry: an approval nobody resolves is decided by its
// binding's expiry policy, and its event stream delivers that outcome.
func TestApprovalEventsExpiry(t *testing.T) {
	ctx := context.Background()
	rt := newBound(t, newPlatform(t), expiringChainConfig).rt
	out, err := rt.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec"}, "r-sse-exp")
	if err != nil || out.Approval == nil {
		t.Fatalf("%+v %v", out, err)
	}
	res, err := rt.WaitResult(ctx, "acme", out.Approval.ID, 30, nil)
	if err != nil || res == nil || res.Verdict != "block" || res.Run != "r-sse-exp" {
		t.Fatalf("expired: %+v %v", res, err)
	}
}

// TestApprovalEventsDrain: a draining server ends its event streams at
// once with "timeout" (the approval is still pending; the client waits
// again elsewhere), so that shutdown does not wait for them.
func TestApprovalEventsDrain(t *testing.T) {
	p := newPlatform(t)
	_, _, w := streamWaiting(t, p, "r-drain", map[string]any{"tool": "shell.exec"}, 60)
	p.srv.Drain()
	g := w.result(t, "the stream after the drain", 20*time.Second)
	if g.err != nil || g.out != nil || strings.Join(g.events, ",") != "status:pending,timeout:pending" {
		t.Fatalf("after drain: %+v %v %v", g.out, g.err, g.events)
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
	start := time.Now()
	if status, _, _ := httpGet(t, url+"/v1/tenants/acme/approvals/"+id+"/result?wait=1e12", key, nil); status != 200 {
		t.Fatalf("status %d", status)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("wait=1e12 returned after %v; want about MaxWait (1 s)", d)
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
		p.exec(t, `UPDATE serve_approvals SET done_at = 1 WHERE id = $1`, id)
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
