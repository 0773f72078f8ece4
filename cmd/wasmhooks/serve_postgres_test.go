package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// startServe starts `wasmhooks serve` with args until ctx ends and returns
// its address, or "" and its exit code if it stopped before listening.
func startServe(t *testing.T, ctx context.Context, args ...string) (addr string, code int, stdout, stderr *syncBuffer) {
	t.Helper()
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), nil, stdout, stderr)
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := listenRE.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], 0, stdout, stderr
		}
		select {
		case code := <-done:
			done <- code // for the cleanup
			return "", code, stdout, stderr
		default:
		}
	}
	t.Fatalf("serve did not listen: %s %s", stdout, stderr)
	return
}

// TestServePostgres: `serve --db` keeps the platform in Postgres; a second
// node on the database starts with the first's host key (copied), without
// a new admin key, and a node with another host key is refused.
func TestServePostgres(t *testing.T) {
	url := storetest.PostgresURL(t)
	t.Setenv("WASMHOOKS_ADMIN_KEY", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir1, dir2, dir3 := t.TempDir(), t.TempDir(), t.TempDir()
	addr1, _, _, stderr1 := startServe(t, ctx, "--data", dir1, "--db", url)
	if !strings.Contains(stderr1.String(), "whk_") || !strings.Contains(stderr1.String(), "db=postgres") {
		t.Fatalf("the first node printed no admin key, or is not on postgres:\n%s", stderr1)
	}
	if _, err := os.Stat(filepath.Join(dir1, "state.db")); !os.IsNotExist(err) {
		t.Fatalf("a node on Postgres made a SQLite file: %v", err)
	}
	// Another host key: refused.
	if addr, code, stdout, _ := startServe(t, ctx, "--data", dir2, "--db", url); addr != "" || code != exitRefused || !strings.Contains(stdout.String(), "host key") {
		t.Fatalf("a node with another host key: addr %q exit %d: %s", addr, code, stdout)
	}
	// The same host key: a second node of the platform.
	key, err := os.ReadFile(filepath.Join(dir1, "host.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir3, "host.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	addr3, _, _, stderr3 := startServe(t, ctx, "--data", dir3, "--db", url)
	if strings.Contains(stderr3.String(), "whk_") {
		t.Fatalf("the second node printed another admin key:\n%s", stderr3)
	}
	for _, a := range []string{addr1, addr3} {
		resp, err := http.Get("http://" + a + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("readyz of %s: %d", a, resp.StatusCode)
		}
	}
}
