package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

var (
	listenRE      = regexp.MustCompile(`addr=(127\.0\.0\.1:[0-9]+)`)
	metricsAddrRE = regexp.MustCompile(`metrics=(http://127\.0\.0\.1:[0-9]+/metrics)`)
)

// served is a `wasmhooks serve` the test runs.
type served struct {
	addr           string // where it listens; "" if it stopped before listening
	stdout, stderr testutil.SyncBuffer
	cancel         context.CancelFunc
	exit           chan struct{} // closed when serve returned
	code           int           // its exit code, once exit is closed
}

// serve runs `wasmhooks serve --addr 127.0.0.1:0` with args until the test
// ends (or stop) and waits until it listens or stops.
func serve(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{cancel: cancel, exit: make(chan struct{})}
	go func() {
		s.code = run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), nil, &s.stdout, &s.stderr)
		close(s.exit)
	}()
	t.Cleanup(func() { s.stop(t) })
	s.addr = s.logged(t, listenRE)
	return s
}

// startServe is serve that fails t unless serve listens.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	s := serve(t, args...)
	if s.addr == "" {
		t.Fatalf("serve did not listen: exit %d: %s %s", s.code, s.stdout.String(), s.stderr.String())
	}
	return s
}

// logged waits for re in serve's log (its stderr) and returns re's first
// group, or "" if serve stopped first.
func (s *served) logged(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(s.stderr.String()); m != nil {
			return m[1]
		}
		select {
		case <-s.exit:
			return ""
		default:
		}
	}
	t.Fatalf("serve did not log %s: %s %s", re, s.stdout.String(), s.stderr.String())
	return ""
}

// stop stops serve, as SIGINT would, and returns its exit code.
func (s *served) stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	select {
	case <-s.exit:
		return s.code
	case <-time.After(30 * time.Second):
		t.Error("serve did not stop")
		return -1
	}
}

// httpGet gets url and returns the response's status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// serveOnce starts `wasmhooks serve` on dir (with args), checks /healthz,
// stops it (as SIGINT would) and returns its stderr.
func serveOnce(t *testing.T, dir string, args ...string) string {
	t.Helper()
	s := startServe(t, append(args, "--data", dir)...)
	if status, _ := httpGet(t, "http://"+s.addr+"/healthz"); status != 200 {
		t.Fatalf("healthz: %d", status)
	}
	if code := s.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, s.stdout.String())
	}
	return s.stderr.String()
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

// TestServeMetricsAddr: --metrics-addr serves /metrics without a key on a
// listener of its own (and nothing else there), while on --addr /metrics
// still asks for a key.
func TestServeMetricsAddr(t *testing.T) {
	t.Setenv("WASMHOOKS_ADMIN_KEY", "")
	s := startServe(t, "--metrics-addr", "127.0.0.1:0", "--data", t.TempDir())
	metrics := s.logged(t, metricsAddrRE)
	if metrics == "" {
		t.Fatalf("serve did not listen for metrics: %s %s", s.stdout.String(), s.stderr.String())
	}
	if status, body := httpGet(t, metrics); status != 200 || !strings.Contains(body, "wasmhooks_warm_instances") {
		t.Fatalf("--metrics-addr /metrics: %d %.200s", status, body)
	}
	if status, _ := httpGet(t, strings.TrimSuffix(metrics, "/metrics")+"/v1/tenants"); status != 404 {
		t.Fatalf("the metrics listener serves the API: %d", status)
	}
	if status, _ := httpGet(t, "http://"+s.addr+"/metrics"); status != 401 {
		t.Fatalf("--addr /metrics without a key: %d, want 401", status)
	}
	if code := s.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, s.stdout.String())
	}
}

// TestServeHTTPServerTimeouts: serve's http.Server bounds the header read
// and closes idle keep-alive connections (with a zero IdleTimeout and
// ReadTimeout net/http keeps an idle connection for ever, so unauthenticated
// clients could hold every file descriptor).
func TestServeHTTPServerTimeouts(t *testing.T) {
	hs := newHTTPServer(http.NotFoundHandler())
	if hs.ReadHeaderTimeout <= 0 || hs.IdleTimeout <= 0 || hs.MaxHeaderBytes <= 0 {
		t.Fatalf("ReadHeaderTimeout %v IdleTimeout %v MaxHeaderBytes %d: each must be set", hs.ReadHeaderTimeout, hs.IdleTimeout, hs.MaxHeaderBytes)
	}
}

// TestServeFirstSliceData: serve reads the first slice's data under --data:
// an approval there that cannot be imported refuses the start, naming it
// and the directory; once it is gone the start renames the directory and
// warns that audit.jsonl is no longer appended to.
func TestServeFirstSliceData(t *testing.T) {
	t.Setenv("WASMHOOKS_ADMIN_KEY", "")
	dir := t.TempDir()
	approvals := filepath.Join(dir, "approvals")
	corrupt := filepath.Join(approvals, "abc123.json")
	if err := os.MkdirAll(approvals, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{corrupt, filepath.Join(dir, "audit.jsonl")} {
		if err := os.WriteFile(f, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := serve(t, "--data", dir)
	if s.addr != "" || s.stop(t) != exitRefused || !strings.Contains(s.stdout.String(), approvals) || !strings.Contains(s.stdout.String(), "approval abc123") {
		t.Fatalf("serve on a corrupt approval: listening %q, exit %d: %s", s.addr, s.code, s.stdout.String())
	}
	if err := os.Remove(corrupt); err != nil {
		t.Fatal(err)
	}
	log := serveOnce(t, dir)
	if _, err := os.Stat(approvals); !os.IsNotExist(err) || !strings.Contains(log, "approvals.imported-") || !strings.Contains(log, "audit log is no longer appended to") {
		t.Fatalf("the approvals are not renamed (%v), or the log does not say so:\n%s", err, log)
	}
}

// TestServeRateLimitScope: --rate-limit-scope takes auto, cluster or node; another
// value is a usage error before anything is opened.
func TestServeRateLimitScope(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := cmdServe(context.Background(), []string{"--rate-limit-scope", "planet", "--data", dir}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("exit %d, want %d: %s", code, exitUsage, stderr.String())
	}
	if !strings.Contains(stderr.String(), "auto, cluster or node") {
		t.Fatalf("stderr: %s", stderr.String())
	}
	t.Setenv("WASMHOOKS_ADMIN_KEY", "")
	serveOnce(t, dir, "--rate-limit-scope", "node")
}
