package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

var metricsAddrRE = regexp.MustCompile(`metrics=(http://127\.0\.0\.1:[0-9]+/metrics)`)

// TestServeMetricsAddr: --metrics-addr serves /metrics without a key on a
// listener of its own (and nothing else there), while on --addr /metrics
// still asks for a key.
func TestServeMetricsAddr(t *testing.T) {
	t.Setenv("WASMHOOKS_ADMIN_KEY", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--data", t.TempDir()}, nil, &stdout, &stderr)
	}()
	var addr, metrics string
	for deadline := time.Now().Add(20 * time.Second); (addr == "" || metrics == "") && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := listenRE.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
		if m := metricsAddrRE.FindStringSubmatch(stderr.String()); m != nil {
			metrics = m[1]
		}
	}
	if addr == "" || metrics == "" {
		t.Fatalf("serve did not listen: %s %s", stdout.String(), stderr.String())
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := get(metrics); status != 200 || !strings.Contains(body, "wasmhooks_warm_instances") {
		t.Fatalf("--metrics-addr /metrics: %d %.200s", status, body)
	}
	if status, _ := get(strings.TrimSuffix(metrics, "/metrics") + "/v1/tenants"); status != 404 {
		t.Fatalf("the metrics listener serves the API: %d", status)
	}
	if status, _ := get("http://" + addr + "/metrics"); status != 401 {
		t.Fatalf("--addr /metrics without a key: %d, want 401", status)
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
}
