package server_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// scrape reads /metrics over the platform's listener with key and parses
// the text exposition format.
func scrape(t *testing.T, base, key string) map[string]*dto.MetricFamily {
	t.Helper()
	status, body, hdr := httpGet(t, base+"/metrics", key, nil)
	if status != 200 {
		t.Fatalf("/metrics: %d %s", status, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("/metrics Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return fams
}

// sample returns the value of the family's series whose labels include
// want (a counter's or gauge's value, a histogram's count), and whether
// there is one.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// llmScript makes the scripted guest call llm.run once (a prompt, 3 output
// tokens): a host call that charges credit.
func llmScript() string {
	name, payload := "llm.run", `{"prompt":"say hi","max_tokens":3}`
	return fmt.Sprintf("@@W%08x%08x%sW%08x%08x%sC%08x%08x%08x%08x%08x%08x",
		0x30000, len(name), hex.EncodeToString([]byte(name)),
		0x32000, len(payload), hex.EncodeToString([]byte(payload)),
		0x30000, len(name), 0x32000, len(payload), 0x31000, 0x4000)
}

// obsChain is chainConfig with, at message.inbound, an observer that pays
// for an llm.run and a guard that traps (fail open; its breaker opens after
// two failures).
func obsChain(policyPin, scriptedPin string) []byte {
	return []byte(`{
  "modules": {"policy": "` + policyPin + `", "scripted": "` + scriptedPin + `"},
  "breaker": {"failures": 2, "backoff": "10m"},
  "bindings": [
    ` + noSecrets + `,
    ` + approveShell + `,
    {"name": "spend", "module": "scripted", "point": "message.inbound", "phase": "observer", "grants": ["llm.run"],
     "settings": {"script": "` + llmScript() + `"}},
    {"name": "crash", "module": "scripted", "point": "message.inbound", "phase": "guard", "fail": "open", "priority": 5,
     "settings": {"script": "@@U"}}
  ]
}`)
}

// obsPlatform is a platform with tenant acme bound to obsChain, credit
// granted, and its runtime and operator keys.
func obsPlatform(t *testing.T, tweak func(*server.Options)) (p *platform, rtk, op *client.Client, rtKey *server.KeyDoc) {
	t.Helper()
	p = newPlatformTweaked(t, tweak)
	a := newTenant(t, p, "acme", false)
	a.bind(t, obsChain(publishPolicy(t, a.pub), client.Pin(publishGuest(t, a.pub, "scripted", "scripted"))))
	a.grant(t, 10000, "g1")
	return p, a.rt, a.op, a.rtDoc
}

func traceOf(t *testing.T, out *client.Outcome) []chain.Step {
	t.Helper()
	var doc struct {
		Trace []chain.Step `json:"trace"`
	}
	if err := json.Unmarshal(out.Raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Trace
}

// TestMetrics runs traffic that allows, blocks, pends, fails a hook until
// its breaker opens, charges credit and is refused, resolves an approval,
// then scrapes /metrics over loopback HTTP with the admin key and checks
// each family's series and labels against the runs' own traces.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	p, rtk, op, _ := obsPlatform(t, nil)
	run := func(point string, c map[string]any) *client.Outcome {
		t.Helper()
		out, err := rtk.Run(ctx, "acme", point, c, "")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := run("message.outbound", map[string]any{"outgoing": "hello"}); out.Verdict != "allow" {
		t.Fatalf("%+v", out)
	}
	if out := run("message.outbound", map[string]any{"outgoing": "a SECRET"}); out.Verdict != "block" {
		t.Fatalf("%+v", out)
	}
	asked := run("tool.before", map[string]any{"tool": "shell.exec"})
	left := run("tool.before", map[string]any{"tool": "shell.exec"})
	if asked.Verdict != "pending" || left.Verdict != "pending" {
		t.Fatalf("%+v %+v", asked, left)
	}
	var credit float64
	failures := map[string]float64{}
	for i := 0; i < 3; i++ {
		out := run("message.inbound", map[string]any{"incoming": "hi"})
		if out.Verdict != "allow" {
			t.Fatalf("%+v", out)
		}
		for _, st := range traceOf(t, out) {
			credit += float64(st.CreditCharged)
			if st.Binding == "crash" && st.Failure != nil {
				failures[string(st.Failure.Code)]++
			}
		}
	}
	// The guard trapped twice, then its breaker skipped it.
	if failures["circuit_open"] != 1 || len(failures) != 2 {
		t.Fatalf("crash's failures %v", failures)
	}
	if credit <= 0 {
		t.Fatal("spend charged no credit: the test does not test credit")
	}
	if _, err := rtk.Run(ctx, "acme", "no.such.point", nil, ""); err == nil {
		t.Fatal("a run at an unknown point was not refused")
	}
	if out, err := op.Resolve(ctx, "acme", asked.Approval.ID, "approve", nil, "ok"); err != nil || out.Verdict != "allow" {
		t.Fatalf("%+v %v", out, err)
	}

	fams := scrape(t, p.hs.URL, adminKey)
	acme := func(kv ...string) map[string]string {
		m := map[string]string{"tenant": "acme"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"wasmhooks_runs_total", acme("point", "message.outbound", "outcome", "allow"), 1},
		{"wasmhooks_runs_total", acme("point", "message.outbound", "outcome", "block"), 1},
		{"wasmhooks_runs_total", acme("point", "tool.before", "outcome", "pending"), 2},
		{"wasmhooks_runs_total", acme("point", "message.inbound", "outcome", "allow"), 3},
		{"wasmhooks_runs_total", acme("point", "invalid", "outcome", "error"), 1},
		{"wasmhooks_resumed_runs_total", acme("point", "tool.before", "outcome", "allow"), 1},
		{"wasmhooks_run_duration_seconds", acme("point", "message.inbound"), 3},
		{"wasmhooks_hook_invocations_total", acme("point", "message.outbound", "binding", "no-secrets"), 2},
		{"wasmhooks_hook_invocations_total", acme("point", "tool.before", "binding", "approve-shell"), 2},
		{"wasmhooks_hook_invocations_total", acme("point", "message.inbound", "binding", "spend"), 3},
		{"wasmhooks_hook_invocations_total", acme("point", "message.inbound", "binding", "crash"), 2},
		{"wasmhooks_hook_duration_seconds", acme("point", "message.inbound", "binding", "spend"), 3},
		{"wasmhooks_hook_failures_total", acme("binding", "crash", "code", "circuit_open"), 1},
		{"wasmhooks_credit_charged_total", acme("binding", "spend"), credit},
		{"wasmhooks_breaker_state", acme("binding", "crash", "state", "open"), 1},
		{"wasmhooks_breaker_state", acme("binding", "crash", "state", "closed"), 0},
		{"wasmhooks_breaker_state", acme("binding", "spend", "state", "closed"), 1},
		{"wasmhooks_approvals_pending", acme(), 1},
		{"wasmhooks_http_requests_total", map[string]string{"route": "POST /v1/tenants/{tenant}/runs", "code": "200"}, 7},
	}
	for code, n := range failures {
		want = append(want, struct {
			name   string
			labels map[string]string
			value  float64
		}{"wasmhooks_hook_failures_total", acme("point", "message.inbound", "binding", "crash", "code", code), n})
	}
	for _, w := range want {
		got, ok := sample(fams, w.name, w.labels)
		if !ok || got != w.value {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
	if _, ok := sample(fams, "wasmhooks_hook_failures_total", acme("binding", "spend")); ok {
		t.Error("spend never failed, yet has failures")
	}
	if n, ok := sample(fams, "wasmhooks_warm_instances", nil); !ok || n < 1 {
		t.Errorf("wasmhooks_warm_instances = %v (present %v), want at least 1 after the runs", n, ok)
	}
	for _, name := range []string{"wasmhooks_instances", "go_goroutines", "wasmhooks_process_resident_memory_bytes"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("no %s", name)
		}
	}

	// A binding the tenant no longer has loses its series at the first run
	// on the new configuration.
	var cfg struct {
		Config json.RawMessage `json:"config"`
	}
	if err := op.Do(ctx, "GET", "/v1/tenants/acme/chain", "", nil, &cfg); err != nil {
		t.Fatal(err)
	}
	rebound := bytes.Replace(cfg.Config, []byte(`"name":"spend"`), []byte(`"name":"spend2"`), 1)
	if bytes.Equal(rebound, cfg.Config) {
		t.Fatalf("no spend binding in %s", cfg.Config)
	}
	if _, err := op.BindChain(ctx, "acme", rebound); err != nil {
		t.Fatal(err)
	}
	run("message.inbound", map[string]any{"incoming": "hi"})
	fams = scrape(t, p.hs.URL, adminKey)
	if _, ok := sample(fams, "wasmhooks_hook_invocations_total", acme("binding", "spend")); ok {
		t.Error("the unbound binding spend still has series")
	}
	if n, _ := sample(fams, "wasmhooks_hook_invocations_total", acme("binding", "spend2")); n != 1 {
		t.Errorf("spend2 invocations %v, want 1", n)
	}
	if n, _ := sample(fams, "wasmhooks_hook_invocations_total", acme("binding", "no-secrets")); n != 2 {
		t.Errorf("no-secrets invocations %v after the rebind, want 2 (kept)", n)
	}

	// A registry per server: a second server in this process counts only
	// its own.
	other := newPlatform(t)
	if _, ok := sample(scrape(t, other.hs.URL, adminKey), "wasmhooks_runs_total", nil); ok {
		t.Error("a second server reports the first one's runs")
	}
}

// TestMetricsAuthorization: /metrics is for admin keys: without a key 401,
// with a tenant's or a publisher's key 403, and MetricsHandler (a listener
// of its own) serves the same families without a key.
func TestMetricsAuthorization(t *testing.T) {
	p := newPlatform(t)
	p.createTenant(t, "acme", false)
	cases := []struct {
		name   string
		key    string
		status int
	}{
		{"no key", "", 401},
		{"unknown key", "whk_not-a-key", 401},
		{"operator", p.key(t, server.RoleOperator, "acme").Key, 403},
		{"runtime", p.key(t, server.RoleRuntime, "acme").Key, 403},
		{"publisher", p.key(t, server.RolePublisher, "pubco").Key, 403},
		{"admin", adminKey, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, hdr := httpGet(t, p.hs.URL+"/metrics", c.key, nil)
			if status != c.status {
				t.Fatalf("%d %s, want %d", status, body, c.status)
			}
			if status != 200 {
				if ct := hdr.Get("Content-Type"); ct != "application/problem+json" || bytes.Contains(body, []byte("wasmhooks_")) {
					t.Fatalf("refusal %q %s", ct, body)
				}
			}
		})
	}
	rec := &bytes.Buffer{}
	req, _ := http.NewRequest("GET", "/metrics", nil)
	w := &bufferWriter{h: http.Header{}, b: rec}
	p.srv.MetricsHandler().ServeHTTP(w, req)
	if !bytes.Contains(rec.Bytes(), []byte("wasmhooks_warm_instances")) {
		t.Fatalf("MetricsHandler: %s", rec)
	}
}

type bufferWriter struct {
	h      http.Header
	b      *bytes.Buffer
	status int
}

func (w *bufferWriter) Header() http.Header         { return w.h }
func (w *bufferWriter) Write(b []byte) (int, error) { return w.b.Write(b) }
func (w *bufferWriter) WriteHeader(s int)           { w.status = s }

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// postRun posts a run with its own request id and traceparent, and returns
// the response's status, body and headers.
func postRun(t *testing.T, base, key, requestID string) (int, []byte, http.Header) {
	t.Helper()
	return httpDo(t, "POST", base+"/v1/tenants/acme/runs", key, http.Header{"X-Request-Id": {requestID}, "Traceparent": {testTraceparent}},
		`{"point":"message.outbound","context":{"outgoing":"hello"}}`)
}

// TestAccessLog: one JSON line per request with method, route pattern,
// status, duration, bytes, the key's id (never the key), tenant, request id
// and trace id; a request without a key has none; a hostile request id is
// replaced.
func TestAccessLog(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	p, _, _, rtKey := obsPlatform(t, func(o *server.Options) {
		o.AccessLog = slog.New(slog.NewJSONHandler(logs, nil))
	})
	status, body, hdr := postRun(t, p.hs.URL, rtKey.Key, "req-123")
	if status != 200 || hdr.Get("X-Request-Id") != "req-123" {
		t.Fatalf("%d %s %v", status, body, hdr)
	}
	if st := hdr.Get("Server-Timing"); !strings.HasPrefix(st, "chain;dur=") {
		t.Fatalf("Server-Timing %q", st)
	}
	long := strings.Repeat("p", server.MaxLoggedPathBytes*4)
	if status, _, _ := httpGet(t, p.hs.URL+"/"+long, "", nil); status != 404 {
		t.Fatalf("a long unknown path: %d", status)
	}
	bad := strings.Repeat("x", server.MaxRequestIDBytes+1)
	_, _, hdr401 := postRun(t, p.hs.URL, "whk_wrong", bad)
	if id := hdr401.Get("X-Request-Id"); id == bad || id == "" {
		t.Fatalf("an overlong request id came back as %q", id)
	}

	type line struct {
		Msg       string  `json:"msg"`
		Method    string  `json:"method"`
		Route     string  `json:"route"`
		Status    int     `json:"status"`
		Duration  float64 `json:"duration"`
		Bytes     int     `json:"bytes"`
		KeyID     string  `json:"key_id"`
		Tenant    string  `json:"tenant"`
		RequestID string  `json:"request_id"`
		TraceID   string  `json:"trace_id"`
	}
	var ok, refused *line
	for _, s := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("not JSON: %s", s)
		}
		if l.Msg != "http request" || l.Route != "POST /v1/tenants/{tenant}/runs" {
			continue
		}
		switch l.RequestID {
		case "req-123":
			ok = &l
		case hdr401.Get("X-Request-Id"):
			refused = &l
		}
	}
	if ok == nil || refused == nil {
		t.Fatalf("no access lines for the runs:\n%s", logs)
	}
	want := line{Msg: "http request", Method: "POST", Route: "POST /v1/tenants/{tenant}/runs", Status: 200, Bytes: len(body),
		KeyID: rtKey.ID, Tenant: "acme", RequestID: "req-123", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Duration: ok.Duration}
	if *ok != want || ok.Duration <= 0 {
		t.Errorf("access line\n%+v\nwant\n%+v", *ok, want)
	}
	if refused.Status != 401 || refused.KeyID != "" || refused.Tenant != "acme" {
		t.Errorf("refused request's line %+v", *refused)
	}
	if strings.Contains(logs.String(), long[:server.MaxLoggedPathBytes+1]) || !strings.Contains(logs.String(), long[:server.MaxLoggedPathBytes-1]+"...") {
		t.Error("a long path is in the access log whole, or not at all")
	}
	if all := logs.String(); strings.Contains(all, rtKey.Key) || strings.Contains(all, adminKey) || strings.Contains(all, "whk_wrong") {
		t.Error("a key is in the access log")
	}
}

// TestSpans: a run's server span is the child of the client's traceparent,
// the chain's run span its child, and each hook's span the run's child;
// the server span names the route.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p, _, _, rtKey := obsPlatform(t, func(o *server.Options) { o.TracerProvider = tp })
	if status, body, _ := postRun(t, p.hs.URL, rtKey.Key, "spans-1"); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var srv, run sdktrace.ReadOnlySpan
	var hooks []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case s.Name() == "POST /v1/tenants/{tenant}/runs":
			srv = s
		case s.Name() == "chain.run":
			run = s
		case s.Name() == "chain.hook":
			hooks = append(hooks, s)
		}
	}
	if srv == nil || run == nil || len(hooks) != 1 {
		t.Fatalf("spans: server %v, run %v, hooks %d", srv != nil, run != nil, len(hooks))
	}
	remote, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	parent, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	if srv.SpanContext().TraceID() != remote || srv.Parent().SpanID() != parent || !srv.Parent().IsRemote() || srv.SpanKind() != trace.SpanKindServer {
		t.Errorf("server span: trace %s parent %s remote %v kind %v", srv.SpanContext().TraceID(), srv.Parent().SpanID(), srv.Parent().IsRemote(), srv.SpanKind())
	}
	if run.Parent().SpanID() != srv.SpanContext().SpanID() || run.SpanContext().TraceID() != remote {
		t.Errorf("chain.run's parent %s, want the server span %s", run.Parent().SpanID(), srv.SpanContext().SpanID())
	}
	if hooks[0].Parent().SpanID() != run.SpanContext().SpanID() {
		t.Errorf("chain.hook's parent %s, want chain.run %s", hooks[0].Parent().SpanID(), run.SpanContext().SpanID())
	}
	attrs := map[string]string{}
	for _, a := range srv.Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, v := range map[string]string{"http.route": "POST /v1/tenants/{tenant}/runs", "http.response.status_code": "200",
		"wasmhooks.key_id": rtKey.ID, "wasmhooks.tenant": "acme", "wasmhooks.request_id": "spans-1"} {
		if attrs[k] != v {
			t.Errorf("server span %s = %q, want %q", k, attrs[k], v)
		}
	}
}

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
