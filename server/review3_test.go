package server_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wasmhooks/wasmhooks/server"
)

// TestAccessLogTenantBounded: the access line's and the span's tenant come
// from the path before any key is checked, and were not cut as the path
// is: a client without a key wrote a 60 KiB tenant (the header limit) into
// every line and span, past MaxLoggedPathBytes. A tenant that is not a
// tenant's name (1 to 64 of [a-z0-9._-]) is cut like the path.
func TestAccessLogTenantBounded(t *testing.T) {
	logs := &syncBuffer{}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	p := newPlatformWith(t, t.TempDir(), key, func(o *server.Options) {
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
