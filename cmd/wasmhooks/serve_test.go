package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// syncBuffer is testutil's, a bytes.Buffer safe for concurrent writes.
type syncBuffer = testutil.SyncBuffer

var listenRE = regexp.MustCompile(`addr=(127\.0\.0\.1:[0-9]+)`)

// serveOnce starts `wasmhooks serve` on dir, checks /healthz, stops it
// (as SIGINT would) and returns its stderr.
func serveOnce(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data", dir}, nil, &stdout, &stderr)
	}()
	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := listenRE.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("serve did not listen: %s %s", stdout.String(), stderr.String())
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stdout.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	return stderr.String()
}

// TestServe: the first start prints a one-time admin key, the second none;
// a stop exits 0.
func TestServe(t *testing.T) {
	t.Setenv("WASMHOOKS_ADMIN_KEY", "")
	dir := t.TempDir()
	first := serveOnce(t, dir)
	if !strings.Contains(first, "the admin key") || !strings.Contains(first, "whk_") {
		t.Fatalf("first start printed no admin key:\n%s", first)
	}
	if second := serveOnce(t, dir); strings.Contains(second, "whk_") {
		t.Fatalf("second start printed a key:\n%s", second)
	}
}
