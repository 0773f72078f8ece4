package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wasmhooks/wasmhooks/chain"
)

// The Prometheus metrics (GET /metrics, admin keys; or Server.MetricsHandler
// on a listener of its own). Every name starts wasmhooks_. The per-hook
// figures come from what a run's Outcome already says (its trace steps: the
// binding, its failure code, its latency, the credit charged, its breaker),
// and the instance figures from runtime.Stats at scrape time, so the chain
// carries no metrics code of its own. Each Server has its own registry:
// several servers in one process (tests, the load test's two nodes) do not
// collide, and nothing is registered in the global default registry.
//
// Labels: tenant, point, binding, outcome, code, route, state. Each is
// bounded: tenants are made by an admin; a point label is a registered
// point (a run refused before the chain knew its point is counted under
// point "invalid"); bindings are those of the tenant's configuration (at
// most chain's limits), and the series of bindings a tenant's configuration
// no longer has are dropped when a run shows the configuration changed
// (pruneBindings), so rebinding under fresh names cannot grow them without
// bound; codes are abi's closed list of failure codes; routes are the route
// table's patterns.
type metrics struct {
	reg *prometheus.Registry

	runs       *prometheus.CounterVec   // tenant, point, outcome
	resumes    *prometheus.CounterVec   // tenant, point, outcome
	runSeconds *prometheus.HistogramVec // tenant, point: the chain's own time
	hooks      *prometheus.CounterVec   // tenant, point, binding
	failures   *prometheus.CounterVec   // tenant, point, binding, code
	hookSecs   *prometheus.HistogramVec // tenant, point, binding
	credit     *prometheus.CounterVec   // tenant, point, binding
	requests   *prometheus.CounterVec   // route, code
	reqSeconds *prometheus.HistogramVec // route
	pending    *prometheus.GaugeVec     // tenant

	mu       sync.RWMutex
	bindings map[bindingKey]*bindingSeries
	configs  map[string]string // tenant -> the configuration digest its runs last showed

	scrapeMu sync.Mutex // one refresh-and-gather at a time
}

type bindingKey struct{ tenant, point, binding string }

// bindingSeries holds one binding's series, looked up once: a step then
// costs a map read and atomic adds, not a label hash per metric.
type bindingSeries struct {
	hooks   prometheus.Counter
	seconds prometheus.Observer
	credit  prometheus.Counter
	breaker string // the breaker's state as the binding's last step saw it (guarded by metrics.mu)
}

// latencyBuckets spans a hook step (tens of microseconds) to a run that
// waits on host calls (seconds).
var latencyBuckets = []float64{
	.00001, .000025, .00005, .0001, .00025, .0005,
	.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10,
}

// Run outcomes beside the chain's verdicts (allow, block, pending).
const (
	outcomeError = "error" // Run returned an error: no verdict
	// pointInvalid labels a run the chain refused as invalid input: its
	// point is whatever the client sent, and must not become a label.
	pointInvalid = "invalid"
)

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg:      prometheus.NewRegistry(),
		bindings: map[bindingKey]*bindingSeries{},
		configs:  map[string]string{},
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmhooks_runs_total",
			Help: "Runs posted (POST .../runs that reached the chain), by tenant, point and outcome (allow, block, pending, error)."},
			[]string{"tenant", "point", "outcome"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmhooks_resumed_runs_total",
			Help: "Runs resumed by an approval's resolution or expiry, by tenant, point and outcome."},
			[]string{"tenant", "point", "outcome"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wasmhooks_run_duration_seconds",
			Help: "The chain's own time for a run (what Server-Timing: chain reports), by tenant and point.", Buckets: latencyBuckets},
			[]string{"tenant", "point"}),
		hooks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmhooks_hook_invocations_total",
			Help: "Hook invocations (steps whose hook ran), by tenant, point and binding."},
			[]string{"tenant", "point", "binding"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmhooks_hook_failures_total",
			Help: "Steps that reached no decision, by tenant, point, binding and failure code (circuit_open: the breaker skipped the hook)."},
			[]string{"tenant", "point", "binding", "code"}),
		hookSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wasmhooks_hook_duration_seconds",
			Help: "A hook step's latency (the trace's latency_us), by tenant, point and binding.", Buckets: latencyBuckets},
			[]string{"tenant", "point", "binding"}),
		credit: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmhooks_credit_charged_total",
			Help: "Credit charged for hooks' host calls, by tenant, point and binding."},
			[]string{"tenant", "point", "binding"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmhooks_http_requests_total",
			Help: "HTTP requests, by route pattern and status code."},
			[]string{"route", "code"}),
		reqSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wasmhooks_http_request_duration_seconds",
			Help: "HTTP request latency, by route pattern.", Buckets: latencyBuckets},
			[]string{"route"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wasmhooks_approvals_pending",
			Help: "Approvals waiting for a human, by tenant (read from the database at scrape: the platform's, the same on every node)."},
			[]string{"tenant"}),
	}
	m.reg.MustRegister(m.runs, m.resumes, m.runSeconds, m.hooks, m.failures, m.hookSecs, m.credit,
		m.requests, m.reqSeconds, m.pending, &breakerCollector{m}, &runtimeCollector{s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "wasmhooks"}))
	return m
}

// observeRun records a posted run: its outcome, its time in the chain (also
// on the response, as Server-Timing), and its hooks' steps.
func (s *Server) observeRun(w http.ResponseWriter, tenant, point string, took time.Duration, out *chain.Outcome, err error) {
	setServerTiming(w, took)
	m := s.metrics
	if err != nil {
		if errors.Is(err, chain.ErrInvalidInput) {
			point = pointInvalid
		}
		m.runs.WithLabelValues(tenant, point, outcomeError).Inc()
		return
	}
	m.runs.WithLabelValues(tenant, out.Point, string(out.Verdict)).Inc()
	m.runSeconds.WithLabelValues(tenant, out.Point).Observe(took.Seconds())
	s.observeSteps(out)
}

// observeResumed records a run resumed by a resolution or an expiry.
func (s *Server) observeResumed(out *chain.Outcome) {
	s.metrics.resumes.WithLabelValues(out.Tenant, out.Point, string(out.Verdict)).Inc()
	s.observeSteps(out)
}

// observeSteps counts the steps this call of the chain ran: a resumed run's
// trace starts with the steps before its pause, counted when they ran, and
// its resolution's step (Resolution set); only the steps after the last
// resolution are new.
func (s *Server) observeSteps(out *chain.Outcome) {
	m := s.metrics
	steps := out.Trace
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].Resolution != "" {
			steps = steps[i+1:]
			break
		}
	}
	m.noteConfig(s, out.Tenant, out.Config)
	for i := range steps {
		st := &steps[i]
		if st.By == chain.ByShortCircuit || (st.Invocation == "" && st.Failure == nil) {
			continue // no hook ran nor failed: skipped, or a ToolApproval's rule
		}
		b := m.series(bindingKey{out.Tenant, out.Point, st.Binding})
		if st.Invocation != "" {
			b.hooks.Inc()
			b.seconds.Observe(float64(st.LatencyUS) / 1e6)
		}
		if st.CreditCharged > 0 {
			b.credit.Add(float64(st.CreditCharged))
		}
		if st.Failure != nil {
			m.failures.WithLabelValues(out.Tenant, out.Point, st.Binding, string(st.Failure.Code)).Inc()
		}
		state := chain.BreakerClosed
		switch {
		case st.BreakerNow != "":
			state = st.BreakerNow
		case st.Breaker != "":
			state = st.Breaker
		}
		m.mu.RLock()
		same := b.breaker == state
		m.mu.RUnlock()
		if !same {
			m.mu.Lock()
			b.breaker = state
			m.mu.Unlock()
		}
	}
}

// series returns the binding's series, made on its first step.
func (m *metrics) series(k bindingKey) *bindingSeries {
	m.mu.RLock()
	b := m.bindings[k]
	m.mu.RUnlock()
	if b != nil {
		return b
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b = m.bindings[k]; b == nil {
		b = &bindingSeries{
			hooks:   m.hooks.WithLabelValues(k.tenant, k.point, k.binding),
			seconds: m.hookSecs.WithLabelValues(k.tenant, k.point, k.binding),
			credit:  m.credit.WithLabelValues(k.tenant, k.point, k.binding),
			breaker: chain.BreakerClosed,
		}
		m.bindings[k] = b
	}
	return b
}

// noteConfig prunes the tenant's binding series when its runs show a
// configuration other than the one they showed last.
func (m *metrics) noteConfig(s *Server, tenant, digest string) {
	m.mu.RLock()
	same := m.configs[tenant] == digest
	m.mu.RUnlock()
	if same {
		return
	}
	m.mu.Lock()
	m.configs[tenant] = digest
	m.mu.Unlock()
	live := map[bindingKey]bool{}
	if c := s.chainFor(tenant); c != nil {
		if info, ok := c.Info(); ok {
			for point, list := range info.Points {
				for _, b := range list {
					live[bindingKey{tenant, point, b.Name}] = true
				}
			}
		}
	}
	m.pruneBindings(tenant, live)
}

// pruneBindings drops the series of tenant's bindings not in live.
func (m *metrics) pruneBindings(tenant string, live map[bindingKey]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.bindings {
		if k.tenant != tenant || live[k] {
			continue
		}
		delete(m.bindings, k)
		l := prometheus.Labels{"tenant": k.tenant, "point": k.point, "binding": k.binding}
		m.hooks.Delete(l)
		m.hookSecs.Delete(l)
		m.credit.Delete(l)
		m.failures.DeletePartialMatch(l)
	}
}

// breakerCollector reports each binding's breaker as its last step saw it:
// wasmhooks_breaker_state{tenant,point,binding,state} is 1 for that state
// and 0 for the other two.
type breakerCollector struct{ m *metrics }

var breakerDesc = prometheus.NewDesc("wasmhooks_breaker_state",
	"A binding's circuit breaker for a tenant, as its last step saw it: 1 for the state it is in (closed, half_open, open), 0 for the others.",
	[]string{"tenant", "point", "binding", "state"}, nil)

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- breakerDesc }

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.RLock()
	defer c.m.mu.RUnlock()
	for k, b := range c.m.bindings {
		for _, st := range []string{chain.BreakerClosed, chain.BreakerHalfOpen, chain.BreakerOpen} {
			v := 0.0
			if b.breaker == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, v, k.tenant, k.point, k.binding, st)
		}
	}
}

// runtimeCollector reports runtime.Stats at scrape time.
type runtimeCollector struct{ s *Server }

var (
	warmDesc      = prometheus.NewDesc("wasmhooks_warm_instances", "Warm hook instances waiting in the runtime's pools.", nil, nil)
	instancesDesc = prometheus.NewDesc("wasmhooks_instances", "Live hook instances, idle or serving an invocation.", nil, nil)
	poolsDesc     = prometheus.NewDesc("wasmhooks_instance_pools", "Instance pools (one per module, tenant, hook and memory limit).", nil, nil)
	modulesDesc   = prometheus.NewDesc("wasmhooks_compiled_modules", "Compiled modules in the runtime's in-memory cache.", nil, nil)
	idleBytesDesc = prometheus.NewDesc("wasmhooks_warm_instance_bytes", "What the warm instances count against the runtime's MaxIdleBytes.", nil, nil)
)

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- warmDesc
	ch <- instancesDesc
	ch <- poolsDesc
	ch <- modulesDesc
	ch <- idleBytesDesc
}

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.rt.Stats()
	ch <- prometheus.MustNewConstMetric(warmDesc, prometheus.GaugeValue, float64(st.Idle))
	ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, float64(st.Instances))
	ch <- prometheus.MustNewConstMetric(poolsDesc, prometheus.GaugeValue, float64(st.Pools))
	ch <- prometheus.MustNewConstMetric(modulesDesc, prometheus.GaugeValue, float64(st.Modules))
	ch <- prometheus.MustNewConstMetric(idleBytesDesc, prometheus.GaugeValue, float64(st.IdleBytes))
}

// observeRequest records a served request under its route pattern (the
// route table's, "" for none: a 404 or 405 of the mux).
func (m *metrics) observeRequest(route string, status int, took time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.reqSeconds.WithLabelValues(route).Observe(took.Seconds())
}

// refreshPending reads the pending approvals per tenant into the gauge.
func (s *Server) refreshPending(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT tenant, COUNT(*) FROM serve_approvals WHERE status = 'pending' GROUP BY tenant`)
	if err != nil {
		return err
	}
	defer rows.Close()
	s.metrics.pending.Reset()
	for rows.Next() {
		var tenant string
		var n int64
		if err := rows.Scan(&tenant, &n); err != nil {
			return err
		}
		s.metrics.pending.WithLabelValues(tenant).Set(float64(n))
	}
	return rows.Err()
}

// MetricsHandler serves the Prometheus metrics without asking for a key: for
// a listener of its own (serve --metrics-addr) that only the scraper
// reaches. On the API's listener they are GET /metrics, for admin keys.
func (s *Server) MetricsHandler() http.Handler {
	h := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.metrics.scrapeMu.Lock()
		defer s.metrics.scrapeMu.Unlock()
		if err := s.refreshPending(r.Context()); err != nil {
			// The other figures are still worth having; the gauge
			// keeps its last values.
			s.log.Warn("server: metrics: reading the pending approvals", "err", err)
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ *Principal) {
	s.metricsHandler.ServeHTTP(w, r)
}
