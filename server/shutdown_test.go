package server_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestGracefulShutdown: Drain fails /readyz and ends long polls at once;
// Shutdown waits for a run in flight, whose client gets its outcome.
func TestGracefulShutdown(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newTenant(t, p, "acme", false)
	// A guard that loops until its timeout (the default, 2 s): a slow run.
	cfg := `{"modules": {"policy": "` + publishPolicy(t, a.pub) + `", "slow": "` + client.Pin(publishGuest(t, a.pub, "scripted", "scripted")) + `"},
  "bindings": [
    {"name": "slow", "module": "slow", "point": "message.inbound", "phase": "guard", "settings": {"script": "@@L"},
     "limits": {"fuel": 1000000000000}},
    ` + approveShell + `
  ]}`
	a.bind(t, []byte(cfg))

	// The platform on its own http.Server, to shut it down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: p.srv.Handler()}
	go hs.Serve(ln)
	base := "http://" + ln.Addr().String()
	rtk := a.rt
	rtk.Base = base
	id := a.pending(t, "", map[string]any{"tool": "shell.exec"})

	slow := make(chan waited, 1)
	go func() {
		o, err := rtk.Run(ctx, "acme", "message.inbound", map[string]any{"incoming": "hi"}, "")
		slow <- waited{out: o, err: err}
	}()
	poll := waitPoll(ctx, rtk, id, 60)
	time.Sleep(300 * time.Millisecond) // both requests in flight (correct without it too)

	p.srv.Drain()
	if status, _, _ := httpGet(t, base+"/readyz", "", nil); status != http.StatusServiceUnavailable {
		t.Fatalf("readyz while draining: %d", status)
	}
	if g := poll.result(t, "the long poll on Drain", 10*time.Second); g.err != nil {
		t.Fatal(g.err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-slow:
		if r.err != nil || r.out == nil || r.out.Verdict != "block" || r.out.By != "fail_policy" || !strings.Contains(string(r.out.Raw), `"timeout"`) {
			t.Fatalf("the run in flight: %+v %v", r.out, r.err)
		}
	default:
		t.Fatal("Shutdown returned before the run in flight answered")
	}
}

// TestHealth: /healthz and /readyz need no key.
func TestHealth(t *testing.T) {
	p := newPlatform(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, _, _ := httpGet(t, p.hs.URL+path, "", nil); status != 200 {
			t.Fatalf("%s: %d", path, status)
		}
	}
}

// TestCloseWaitsForBackgroundWork: Close returns only once the background
// work has ended (a reload of another node's bind, the expiry pass), or
// says, when its context ends first, that some is still running; the
// caller then closes the Runtime. It did not wait: a reload still compiling
// a module when the caller closed the Runtime made wazero panic (seen in
// CI, a node closed right after another node's bind).
func TestCloseWaitsForBackgroundWork(t *testing.T) {
	p := newPlatform(t)
	release, ended := make(chan struct{}), make(chan struct{})
	server.Background(p.srv, func() {
		<-release
		close(ended)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := p.srv.Close(ctx); err == nil || !strings.Contains(err.Error(), "background work still running") {
		t.Fatalf("Close with work running: %v", err)
	}
	close(release)
	if err := p.srv.Close(context.Background()); err != nil {
		t.Fatalf("Close once it ended: %v", err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Close returned before the background work ended")
	}
}
