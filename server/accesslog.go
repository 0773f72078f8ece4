package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhooks/wasmhooks/internal/bodydeadline"
)

// observability is what the server adds around every request: a server span
// (OpenTelemetry; the chain's and the hooks' spans nest under it), one
// access log line, the request's Prometheus figures (metrics.go), and a
// request id.
type observability struct {
	metrics        *metrics
	metricsHandler http.Handler
	tracer         trace.Tracer
	accessLog      *slog.Logger
	handler        http.Handler // the mux, observed
}

// tracerName names the server's tracer (the chain's is .../chain).
const tracerName = "github.com/wasmhooks/wasmhooks/server"

// RequestIDHeader carries a request's id: the client's, when it sends a
// well-formed one (1 to MaxRequestIDBytes of [A-Za-z0-9._:-]), else one the
// server makes. It is in the response and in the access log line.
const RequestIDHeader = "X-Request-Id"

// MaxRequestIDBytes bounds a client's request id (128 bytes); a longer one
// is replaced.
const MaxRequestIDBytes = 128

// ServerTimingHeader carries, on a run's or a resolution's response, the
// chain's own time: "chain;dur=MILLISECONDS" (W3C Server Timing). What a
// client measures beyond it is the HTTP layer's: the load test subtracts.
const ServerTimingHeader = "Server-Timing"

// traceContext reads and writes W3C traceparent/tracestate, whatever the
// process's global propagator is.
var traceContext = propagation.TraceContext{}

func (s *Server) initObservability() {
	tp := s.opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer(tracerName)
	s.accessLog = s.opts.AccessLog
	if s.accessLog == nil {
		s.accessLog = s.log
	}
	s.metrics = newMetrics(s)
	s.metricsHandler = s.MetricsHandler()
}

// requestInfo is what the handlers learn that the access log reports: the
// key's id and tenant (set by guard once the key is known).
type requestInfo struct {
	keyID, tenant string
}

type requestInfoKey struct{}

// noteKey records the request's authenticated key for its access log line
// and span: its id, never the key.
func noteKey(r *http.Request, p *Principal) {
	if info, ok := r.Context().Value(requestInfoKey{}).(*requestInfo); ok {
		info.keyID, info.tenant = p.KeyID, p.Tenant
	}
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		span.SetAttributes(attribute.String("wasmhooks.key_id", p.KeyID), attribute.String("wasmhooks.role", string(p.Role)))
	}
}

// observe wraps the mux: a server span per request (a child of the
// client's W3C traceparent when it sends one), the request id, the
// response's status and size, then the access log line and the request's
// metrics.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		bodydeadline.Set(w, r, start.Add(s.opts.BodyTimeout)) // a body, sized or chunked: BodyTimeout
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
		info := &requestInfo{}
		ctx = context.WithValue(ctx, requestInfoKey{}, info)
		rec := &responseRecorder{ResponseWriter: w}
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r) // the mux sets r.Pattern
		took := time.Since(start)
		status := rec.status
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		route := r.Pattern
		// The path's tenant is read before any key is checked: anything
		// but a tenant's name is cut as the path is.
		tenant := r.PathValue("tenant")
		if !nameRE.MatchString(tenant) {
			tenant = loggedPath(tenant)
		}
		if tenant == "" {
			tenant = info.tenant
		}
		if span.IsRecording() {
			name := r.Method
			if route != "" {
				name = route // "METHOD /path/{param}"
			}
			span.SetName(name)
			span.SetAttributes(
				attribute.String("http.request.method", r.Method),
				attribute.String("http.route", route),
				attribute.String("url.path", loggedPath(r.URL.Path)),
				attribute.Int("http.response.status_code", status),
				attribute.String("wasmhooks.request_id", id),
			)
			if tenant != "" {
				span.SetAttributes(attribute.String("wasmhooks.tenant", tenant))
			}
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
		span.End()
		s.metrics.observeRequest(route, status, took)
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.String("path", loggedPath(r.URL.Path)),
			slog.Int("status", status),
			slog.Duration("duration", took),
			slog.Int64("bytes", rec.bytes),
			slog.String("key_id", info.keyID),
			slog.String("tenant", tenant),
			slog.String("request_id", id),
		}
		if sc := span.SpanContext(); sc.HasTraceID() {
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
		}
		s.accessLog.LogAttrs(context.Background(), slog.LevelInfo, "http request", attrs...)
	})
}

// MaxLoggedPathBytes bounds the path an access log line and a span carry
// (512 bytes; a longer one is cut, marked with "..."): a client without a
// key could otherwise write lines of up to the header limit (64 KiB) to the
// log at its request rate.
const MaxLoggedPathBytes = 512

func loggedPath(p string) string {
	if len(p) <= MaxLoggedPathBytes {
		return p
	}
	return p[:MaxLoggedPathBytes] + "..."
}

func validRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// setServerTiming puts the chain's own time on the response.
func setServerTiming(w http.ResponseWriter, took time.Duration) {
	w.Header().Set(ServerTimingHeader, fmt.Sprintf("chain;dur=%.3f", float64(took.Nanoseconds())/1e6))
}

// responseRecorder notes a response's status and size. It passes Flush on
// (Server-Sent Events) and unwraps for http.ResponseController.
type responseRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *responseRecorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *responseRecorder) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *responseRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
