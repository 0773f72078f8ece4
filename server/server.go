// Package server is the hook platform over HTTP (`wasmhooks serve`): JSON
// under /v1/, every request authenticated by an API key with a role and a
// tenant, every route checking the role and the tenant.
//
// Publishers upload modules (validated exactly as runtime.Runtime.Load
// validates, stored content-addressed by sha256), publish versions
// (publisher/name@semver, immutable) and sign them (ed25519, SigningMessage);
// a tenant's operator binds published versions, pinned to their digests, into
// the tenant's chain (the chain package's JSON configuration, a module named
// "publisher/name@version#sha256:HEX"), validated as chain.New validates, and
// resolves approvals; the tenant's runtime key posts runs and waits for the
// results of pending approvals (long poll); the operator reads the tenant's
// audit records and credit. Errors are RFC 9457 problem+json with a stable
// code (api.Problem); each key has a rate limit (RateLimit). The routes, with
// their roles and scopes, are the table in routes.go, and openapi.json (served
// at /openapi.json) describes them. The types clients share are in package
// server/api; server/client is the Go client.
//
// State is kept in one database (store.DB): the store's ledger for credit,
// the server's own tables (db.go) for tenants, keys, modules, versions,
// signatures, bindings, run results, the approvals index and the audit index;
// approvals in a chain.ApprovalStore, the audit chain in an audit.Sink. One
// process per database for now: several nodes on Postgres are to come.
package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/store"

	"go.opentelemetry.io/otel/trace"
)

// Limits with their defaults.
const (
	// DefaultMaxBodyBytes bounds a JSON request body (1 MiB): runs,
	// resolutions, keys. It defends the server's memory against one large
	// request; a run's context is bounded again by the chain.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxConfigBytes bounds a chain configuration (4 MiB).
	DefaultMaxConfigBytes = 4 << 20
	// DefaultMaxWait bounds a long poll (60 s); a client asks less with
	// ?wait=.
	DefaultMaxWait = 60 * time.Second
	// DefaultRunTimeout bounds a run or a resolution (30 s).
	DefaultRunTimeout = 30 * time.Second
	// DefaultMaxPollsPerKey bounds the long polls one API key has open at
	// once (32); one more is 429 rate_limited. The rate limit alone let a
	// key hold rate x MaxWait of them (12,000 at the defaults), each a
	// goroutine reading the database twice a second.
	DefaultMaxPollsPerKey = 32
)

// Options configures a Server.
type Options struct {
	// DB is the database: the store's tables and the server's. Required.
	DB *store.DB
	// Runtime runs the hooks. Required; the Server does not close it.
	Runtime *runtime.Runtime
	// HostKey (at least audit.MinKeyBytes) seals approvals (a key derived
	// from it) and keys the audit chain. Required.
	HostKey []byte
	// Approvals keeps pending approvals. Required.
	Approvals chain.ApprovalStore
	// Audit receives the audit records. Nil means an audit.MemorySink.
	Audit audit.Sink
	// AdminKey, if set, is an admin key (WASMHOOKS_ADMIN_KEY). Without it
	// the first start makes one (Server.BootstrapKey).
	AdminKey string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the server's span per request and the chains'
	// spans under it (accesslog.go). Nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// AccessLog receives one line per request (accesslog.go); nil means
	// Logger.
	AccessLog *slog.Logger
	// MaxBodyBytes bounds JSON bodies; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxWait bounds a long poll; zero means DefaultMaxWait.
	MaxWait time.Duration
	// RunTimeout bounds a run; zero means DefaultRunTimeout.
	RunTimeout time.Duration
	// ExpiryInterval is how often expired approvals are decided; zero
	// means DefaultExpiryInterval.
	ExpiryInterval time.Duration
	// RateLimit is each API key's request rate; the zero value means
	// DefaultRatePerSecond with DefaultRateBurst.
	RateLimit RateLimit
	// MaxPollsPerKey bounds each key's open long polls; zero means
	// DefaultMaxPollsPerKey.
	MaxPollsPerKey int
	// AuthFailLimit is each remote address's budget of failed
	// authentications; the zero value means DefaultAuthFailPerSecond with
	// DefaultAuthFailBurst (ratelimit.go).
	AuthFailLimit RateLimit
	// UploadQuota bounds what each publisher uploads; the zero value means
	// the defaults (publish.go).
	UploadQuota UploadQuota
	// Heartbeat is how often an approval's event stream sends a comment
	// while it waits; zero means DefaultHeartbeat.
	Heartbeat time.Duration
}

// Server serves the platform. Make one with New, serve Handler, and Close it
// after the http.Server's Shutdown (which lets runs in flight finish).
type Server struct {
	opts        Options
	sdb         *store.DB
	db          *sql.DB
	rt          *runtime.Runtime
	runner      *capability.Runner
	ledger      *store.Ledger
	approvalKey []byte
	log         *slog.Logger
	mux         *http.ServeMux
	bootKey     string
	limiter     *limiter
	authFails   *failLimiter // failed authentications by remote address

	mu     sync.Mutex // guards chains
	chains map[string]*chain.Chain
	bindMu sync.Mutex // one bind at a time

	runLocks keyedLocks // by (tenant, run): one run per id at a time

	waitMu  sync.Mutex
	waiters map[string]chan struct{} // approval id -> closed when it resolves
	polls   map[string]int           // key id -> its open long polls (guarded by waitMu)

	observability // spans, access log, metrics (accesslog.go, metrics.go)

	draining atomic.Bool
	done     chan struct{}
	keepStop context.CancelFunc
}

// New opens the server's tables in opts.DB, bootstraps the admin key and
// builds the chain of every tenant that has one.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.DB == nil || opts.Runtime == nil || opts.Approvals == nil {
		return nil, errors.New("server: DB, Runtime and Approvals are required")
	}
	if len(opts.HostKey) < audit.MinKeyBytes {
		return nil, fmt.Errorf("server: the host key must be at least %d bytes", audit.MinKeyBytes)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.RunTimeout <= 0 {
		opts.RunTimeout = DefaultRunTimeout
	}
	if opts.MaxPollsPerKey <= 0 {
		opts.MaxPollsPerKey = DefaultMaxPollsPerKey
	}
	if opts.ExpiryInterval <= 0 {
		opts.ExpiryInterval = DefaultExpiryInterval
	}
	if opts.Audit == nil {
		opts.Audit = audit.NewMemorySink()
	}
	s := &Server{opts: opts, sdb: opts.DB, db: opts.DB.SQL(), rt: opts.Runtime, log: opts.Logger,
		chains: map[string]*chain.Chain{}, waiters: map[string]chan struct{}{}, polls: map[string]int{}, done: make(chan struct{})}
	m := hmac.New(sha256.New, opts.HostKey)
	m.Write([]byte("wasmhooks approval key v1"))
	s.approvalKey = m.Sum(nil)
	s.limiter = newLimiter(opts.RateLimit)
	s.authFails = newFailLimiter(opts.AuthFailLimit)
	if err := migrate(ctx, s.db); err != nil {
		return nil, err
	}
	s.ledger = store.NewLedger(opts.DB, store.LedgerOptions{})
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Config{Ledger: s.ledger, KV: store.NewKV(opts.DB, store.KVOptions{}), Logger: opts.Logger}); err != nil {
		return nil, err
	}
	var err error
	if s.runner, err = capability.NewRunner(reg, capability.RunnerOptions{Logger: opts.Logger}); err != nil {
		return nil, err
	}
	if s.bootKey, err = s.bootstrap(ctx, opts.AdminKey); err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	s.keepStop = cancel
	go func() { _ = s.ledger.KeepAlive(kctx, 0) }()
	if err := s.loadChains(ctx); err != nil {
		cancel()
		return nil, err
	}
	s.initObservability()
	s.mux = s.routes()
	s.handler = s.observe(s.mux)
	go s.expireLoop(kctx, opts.ExpiryInterval)
	return s, nil
}

// DefaultExpiryInterval is how often the server applies the expiry policy
// of approvals nobody resolved in time (5 s): an approval is decided at most
// that long after its expiry.
const DefaultExpiryInterval = 5 * time.Second

func (s *Server) expireLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.expire(ctx)
		}
	}
}

// expireBatch is how many due approvals expire reads at a time.
const expireBatch = 100

// expire resolves, through the tenant's own chain, each approval of the
// tenant that passed its expiry: Resolve applies the binding's expiry policy
// to an expired approval whatever the resolution says. (Not ExpirePending:
// the approval store is shared by every tenant's chain, and a chain must
// only ever resume its own tenant's runs.) It pages through every due
// approval by (expires, id): one that cannot be resolved (a stale approval
// whose policy approves, an index row the store lost) stays pending, and
// must not keep the ones after it, any tenant's, from expiring.
func (s *Server) expire(ctx context.Context) {
	type due struct {
		id, tenant string
		expires    int64
	}
	cutoff := time.Now().UnixNano()
	after := due{expires: math.MinInt64}
	for {
		rows, err := s.db.QueryContext(ctx, `SELECT id, tenant, expires FROM serve_approvals
			WHERE status = 'pending' AND expires <= ? AND (expires > ? OR (expires = ? AND id > ?))
			ORDER BY expires, id LIMIT ?`, cutoff, after.expires, after.expires, after.id, expireBatch)
		if err != nil {
			s.log.Warn("server: expiring approvals", "err", err)
			return
		}
		var all []due
		for rows.Next() {
			var d due
			if err := rows.Scan(&d.id, &d.tenant, &d.expires); err != nil {
				break
			}
			all = append(all, d)
		}
		rows.Close()
		for _, d := range all {
			if ctx.Err() != nil {
				return
			}
			c := s.chainFor(d.tenant)
			if c == nil {
				continue
			}
			out, err := c.Resolve(ctx, d.id, chain.Resolution{Decision: chain.Deny, Actor: "expiry", Reason: "expired"})
			if err != nil {
				s.log.Warn("server: expiring an approval", "tenant", d.tenant, "id", d.id, "err", err)
				continue
			}
			if err := s.finishResolution(ctx, d.tenant, d.id, out); err != nil {
				s.log.Error("server: recording an expired approval", "tenant", d.tenant, "id", d.id, "err", err)
			}
		}
		if len(all) < expireBatch {
			return
		}
		after = all[len(all)-1]
	}
}

// BootstrapKey is the admin key this start made (the database had none and
// no AdminKey was given), to print once; "" otherwise. It is stored only
// hashed.
func (s *Server) BootstrapKey() string { return s.bootKey }

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Drain makes /readyz fail and ends long polls, before the http.Server's
// Shutdown waits for the requests in flight (runs among them) to finish.
func (s *Server) Drain() {
	if s.draining.CompareAndSwap(false, true) {
		close(s.done)
	}
}

// Close closes the tenants' chains (runs in flight finish first) and stops
// the ledger's lease renewal. It does not close the DB, the Runtime, the
// approval store or the audit sink.
func (s *Server) Close(ctx context.Context) error {
	s.Drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, c := range s.chains {
		errs = append(errs, c.Close(ctx))
	}
	s.chains = map[string]*chain.Chain{}
	s.keepStop()
	return errors.Join(errs...)
}

func (s *Server) internal(err error) *Problem {
	s.log.Error("server: internal error", "err", err)
	return problem(http.StatusInternalServerError, CodeInternal, "internal error; see the server's log")
}

// keyedLocks is one mutex per key, there while someone holds or waits for
// it. (Striped locks let one tenant's slow runs, one per stripe, hold up
// every other tenant's runs whose ids hashed to the same stripes.)
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int // holders and waiters; the entry goes when it drops to 0
}

// lock locks key and returns the unlock.
func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// runLock locks the run id of tenant and returns the unlock.
func (s *Server) runLock(tenant, run string) func() {
	return s.runLocks.lock(tenant + "\x00" + run)
}

// waiter returns the channel closed when approval id resolves.
func (s *Server) waiter(id string) chan struct{} {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	ch, ok := s.waiters[id]
	if !ok {
		ch = make(chan struct{})
		s.waiters[id] = ch
	}
	return ch
}

// startPoll counts a long poll of key, and returns its end, or false when
// the key has MaxPollsPerKey open already.
func (s *Server) startPoll(key string) (func(), bool) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if s.polls[key] >= s.opts.MaxPollsPerKey {
		return nil, false
	}
	s.polls[key]++
	return func() {
		s.waitMu.Lock()
		defer s.waitMu.Unlock()
		if s.polls[key]--; s.polls[key] <= 0 {
			delete(s.polls, key)
		}
	}, true
}

func (s *Server) wake(id string) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if ch, ok := s.waiters[id]; ok {
		close(ch)
		delete(s.waiters, id)
	}
}

func (s *Server) chainOptions() chain.Options {
	return chain.Options{Runtime: s.rt, HostCaller: s.runner, Audit: s.opts.Audit, Approvals: s.opts.Approvals,
		ApprovalKey: s.approvalKey, Logger: s.log, TracerProvider: s.opts.TracerProvider}
}

// loadChains builds every bound tenant's chain from its stored
// configuration, checking pins and signatures again: a configuration that no
// longer passes (a tenant that now requires signatures) is logged, and the
// tenant has no chain until it binds again.
func (s *Server) loadChains(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT tenant, config FROM serve_bindings`)
	if err != nil {
		return err
	}
	type bound struct{ tenant, config string }
	var all []bound
	for rows.Next() {
		var b bound
		if err := rows.Scan(&b.tenant, &b.config); err != nil {
			rows.Close()
			return err
		}
		all = append(all, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, b := range all {
		cfg, p := s.parseBinding(ctx, b.tenant, []byte(b.config))
		if p != nil {
			s.log.Error("server: a tenant's stored chain is refused at load", "tenant", b.tenant, "code", p.Code, "detail", p.Detail)
			continue
		}
		c, err := chain.New(ctx, cfg, s.chainOptions())
		if err != nil {
			s.log.Error("server: a tenant's stored chain is refused at load", "tenant", b.tenant, "err", err)
			continue
		}
		s.chains[b.tenant] = c
	}
	return nil
}

func (s *Server) chainFor(tenant string) *chain.Chain {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chains[tenant]
}
