package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
)

// TestApprovalEvents: the Server-Sent Events stream of an approval gives
// "status" then, once an operator resolves it, "resolved" with the resumed
// outcome, and ends; an approval resolved already gives "resolved" at once.
func TestApprovalEvents(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	id := a.pending(t, "r-sse", map[string]any{"tool": "shell.exec"})

	w := waitStream(ctx, a.rt, id, 30)
	w.begun(t, 20*time.Second)
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		o, err := a.rt.Result(context.Background(), "acme", id, 1)
		if err == nil && o == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the stream: %+v %v", o, err)
		}
	}
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
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	id := a.pending(t, "r-drain", map[string]any{"tool": "shell.exec"})
	w := waitStream(ctx, a.rt, id, 60)
	w.begun(t, 20*time.Second)
	p.srv.Drain()
	g := w.result(t, "the stream after the drain", 20*time.Second)
	if g.err != nil || g.out != nil || strings.Join(g.events, ",") != "status:pending,timeout:pending" {
		t.Fatalf("after drain: %+v %v %v", g.out, g.err, g.events)
	}
}
