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
// State is kept in one database (store.DB), SQLite or Postgres: the store's
// ledger for credit, its approvals (store.Approvals) and its audit chains,
// one per tenant (store.TenantAudit), and the server's own tables (db.go)
// for tenants, keys, modules, versions, signatures, bindings, run results and
// run claims, and the approvals index. Nothing a request depends on is kept
// only in a process, so several servers on one database (Postgres; or
// processes sharing one SQLite file) are one platform: a bind raises the
// binding's version and notifies the others (store.DB.Notify: Postgres's
// NOTIFY), which rebuild that tenant's chain at once, and every SyncInterval
// compare the versions anyway; credit is the ledger's transactions; an
// approval is resumed by whichever node's resolution claims it first, and
// its long polls on every node wake by notification (or read the index
// again); a run id is claimed in the database, so one node runs it and the
// others answer with its outcome; each tenant's audit chain is appended
// under a row lock, so it never forks; each key's rate limit, its open
// waits and a publisher's uploads in flight and upload quota are counted in
// the database, for the platform. Every node needs the same host key:
// a node with another is refused at start (serve_host_key).
package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/wasmhooks/wasmhooks/internal/keyedlock"
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
	// DefaultBodyTimeout bounds the time a request's body takes to arrive
	// (2 min, from the request's start): a body that stops coming is
	// given up and its connection closed, whether the handler reads it or
	// the server discards it after answering (a 401, a 404). Without it,
	// anyone, without a key, held connections by sending a byte now and
	// then.
	DefaultBodyTimeout = 2 * time.Minute
	// DefaultMaxPollsPerKey bounds the long polls and event streams one
	// API key has open at once on all the nodes sharing the database (32;
	// each a lease in serve_leases); one more is 429 rate_limited. The
	// rate limit alone let a key hold rate x MaxWait of them (12,000 at
	// the defaults), each a goroutine reading the database twice a second.
	DefaultMaxPollsPerKey = 32
)

// Options configures a Server.
type Options struct {
	// DB is the database: the store's tables and the server's. Required.
	DB *store.DB
	// Runtime runs the hooks. Required; the Server does not close it.
	Runtime *runtime.Runtime
	// HostKey (at least audit.MinKeyBytes) seals approvals (a key derived
	// from it) and keys the audit chains. Required, and the same on every
	// node of a platform.
	HostKey []byte
	// Approvals keeps pending approvals. Nil means the database's
	// (store.NewApprovals), which every node shares.
	Approvals chain.ApprovalStore
	// DataDir is serve's data directory (--data), if it has one. New
	// imports the pending approvals the first slice of serve kept in its
	// approvals/ into Approvals, and renames it (firstslice.go); a start
	// that cannot is refused. Empty means none.
	DataDir string
	// LLMProvider completes llm.run's prompts. Nil means the offline
	// provider (builtin.OfflineProvider).
	LLMProvider builtin.Provider
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
	// BodyTimeout bounds a request body's arrival; zero means
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// ExpiryInterval is how often expired approvals are decided; zero
	// means DefaultExpiryInterval.
	ExpiryInterval time.Duration
	// RateLimit is each API key's request rate; the zero value means
	// DefaultRatePerSecond with DefaultRateBurst.
	RateLimit RateLimit
	// RateLimitScope is where RateLimit's buckets are kept:
	// RateLimitCluster in the database (one bucket per key for every node;
	// about one database write per request), RateLimitNode in each
	// process's memory. "" means RateLimitCluster on Postgres, the
	// database of several nodes, and RateLimitNode on SQLite, usually one
	// node's (processes sharing a SQLite file set RateLimitCluster).
	// Another value is refused by New.
	RateLimitScope RateLimitScope
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
	// KeyCacheTTL is how long a node answers for an API key from memory
	// (keycache.go); zero means DefaultKeyCacheTTL, negative caches
	// nothing (every request reads its key's row).
	KeyCacheTTL time.Duration
	// SyncInterval is how often the server reads the bindings' versions
	// to pick up binds made by other nodes that it was not notified of;
	// zero means DefaultSyncInterval.
	SyncInterval time.Duration
}

// DefaultSyncInterval is how often a server compares the versions of the
// bindings it runs with the database's (2 s): the backstop for a missed
// notification, and the only way binds travel between processes sharing a
// SQLite file.
const DefaultSyncInterval = 2 * time.Second

// Server serves the platform. Make one with New, serve Handler, and Close it
// after the http.Server's Shutdown (which lets runs in flight finish).
type Server struct {
	opts        Options
	sdb         *store.DB
	db          *sqlDB
	audit       *audit.TenantLogs
	rt          *runtime.Runtime
	runner      *capability.Runner
	ledger      *store.Ledger
	approvalKey []byte
	log         *slog.Logger
	mux         *http.ServeMux
	bootKey     string
	limiter     *limiter       // the per-key buckets of RateLimitNode
	shared      *sharedLimiter // the per-key buckets of RateLimitCluster
	authFails   *failLimiter   // failed authentications by remote address
	keys        *keyCache      // authenticated keys, for KeyCacheTTL

	mu        sync.Mutex // guards chains and versions
	chains    map[string]*chain.Chain
	versions  map[string]int64 // tenant -> the version of the binding its chain runs
	closed    bool             // Close ran: a reload in flight closes what it built
	bindLocks keyedlock.Locks  // by tenant: one bind (or reload of another node's) of a tenant at a time
	owner     string           // this node's name in run claims

	runLocks keyedlock.Locks // by (tenant, run): one run per id at a time in this process
	// verifyStore, when set (tests), wraps the store a verification reads.
	verifyStore atomic.Pointer[func(audit.Store) audit.Store]

	waitMu  sync.Mutex
	waiters map[string]chan struct{} // approval id, or runWaitKey -> closed when it resolves

	observability // spans, access log, metrics (accesslog.go, metrics.go)

	draining atomic.Bool
	done     chan struct{}
	keepStop context.CancelFunc
	bgCtx    context.Context // the background work's; keepStop ends it
	// bg counts the background work New starts (the ledger's lease, the
	// expiry, sync and sweep passes, the listener) and what that work
	// starts in turn (reloads of other nodes' binds, closes of the chains
	// they replace): Close waits for it, so that none of it uses the
	// Runtime after the caller closes it.
	bg sync.WaitGroup
	// testHookFn, if set (by a test, before any request), is called at the
	// named points of a request, so a test can order two nodes' steps.
	testHookFn func(point string)
	// testClock, if set (by a test, before any request), is the node's
	// clock where the shared limits read it (clock).
	testClock func() time.Time
}

// testHook calls s.testHookFn, if a test set one, at point.
func (s *Server) testHook(point string) {
	if s.testHookFn != nil {
		s.testHookFn(point)
	}
}

// clock is the node's clock as the shared limits read it: time.Now, or a
// test's.
func (s *Server) clock() time.Time {
	if s.testClock != nil {
		return s.testClock()
	}
	return time.Now()
}

// background runs f in a goroutine that Close waits for. It is called by
// New, and by work already counted (so never while Close waits for none).
func (s *Server) background(f func()) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f()
	}()
}

// New opens the server's tables in opts.DB, bootstraps the admin key and
// builds the chain of every tenant that has one.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.DB == nil || opts.Runtime == nil {
		return nil, errors.New("server: DB and Runtime are required")
	}
	if len(opts.HostKey) < audit.MinKeyBytes {
		return nil, fmt.Errorf("server: the host key must be at least %d bytes", audit.MinKeyBytes)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	orDefault(&opts.MaxBodyBytes, DefaultMaxBodyBytes)
	orDefault(&opts.MaxWait, DefaultMaxWait)
	orDefault(&opts.RunTimeout, DefaultRunTimeout)
	orDefault(&opts.BodyTimeout, DefaultBodyTimeout)
	orDefault(&opts.MaxPollsPerKey, DefaultMaxPollsPerKey)
	orDefault(&opts.ExpiryInterval, DefaultExpiryInterval)
	orDefault(&opts.SyncInterval, DefaultSyncInterval)
	if opts.Approvals == nil {
		opts.Approvals = store.NewApprovals(opts.DB, store.ApprovalOptions{})
	}
	s := &Server{opts: opts, sdb: opts.DB, db: newSQLDB(opts.DB), rt: opts.Runtime, log: opts.Logger,
		chains: map[string]*chain.Chain{}, versions: map[string]int64{}, waiters: map[string]chan struct{}{}, done: make(chan struct{})}
	var name [12]byte
	_, _ = rand.Read(name[:])
	s.owner = "node-" + hex.EncodeToString(name[:])
	s.approvalKey = derive(opts.HostKey, "wasmhooks approval key v1")
	scope := opts.RateLimitScope
	if scope == "" {
		scope = RateLimitNode
		if s.db.pg {
			scope = RateLimitCluster
		}
	}
	for what, rl := range map[string]RateLimit{"RateLimit": opts.RateLimit, "AuthFailLimit": opts.AuthFailLimit} {
		if err := rl.check(what); err != nil {
			return nil, err
		}
	}
	switch scope {
	case RateLimitCluster:
		s.shared = newSharedLimiter(s.db, opts.RateLimit)
	case RateLimitNode:
		s.limiter = newLimiter(opts.RateLimit)
	default:
		return nil, fmt.Errorf("server: RateLimitScope %q is neither %q nor %q", opts.RateLimitScope, RateLimitCluster, RateLimitNode)
	}
	s.authFails = newFailLimiter(opts.AuthFailLimit)
	zeroDefault(&opts.KeyCacheTTL, DefaultKeyCacheTTL)
	s.keys = newKeyCache(opts.KeyCacheTTL)
	if err := migrate(ctx, opts.DB); err != nil {
		return nil, err
	}
	if err := s.checkHostKey(ctx); err != nil {
		return nil, err
	}
	if err := s.importFirstSlice(ctx, opts.DataDir); err != nil {
		return nil, err
	}
	var err error
	if s.audit, err = store.TenantAudit(opts.DB, opts.HostKey); err != nil {
		return nil, err
	}
	s.ledger = store.NewLedger(opts.DB, store.LedgerOptions{})
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Config{Provider: opts.LLMProvider, Ledger: s.ledger, KV: store.NewKV(opts.DB, store.KVOptions{}), Logger: opts.Logger}); err != nil {
		return nil, err
	}
	if s.runner, err = capability.NewRunner(reg, capability.RunnerOptions{Logger: opts.Logger}); err != nil {
		return nil, err
	}
	if s.bootKey, err = s.bootstrap(ctx, opts.AdminKey); err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	s.keepStop = cancel
	s.background(func() { _ = s.ledger.KeepAlive(kctx, 0) })
	if err := s.syncBindings(ctx); err != nil {
		cancel()
		return nil, err
	}
	s.initObservability()
	s.mux = s.routes()
	s.handler = s.observe(s.mux)
	s.bgCtx = kctx
	s.background(func() { every(kctx, opts.ExpiryInterval, s.expire) })
	s.background(func() { every(kctx, opts.SyncInterval, s.syncOnce) })
	s.background(func() { s.listenLoop(kctx) })
	s.background(func() { every(kctx, store.DefaultLease/3, s.sweepOnce) })
	return s, nil
}

// orDefault sets an option that is zero or negative to its default.
func orDefault[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// zeroDefault sets an option that is zero to its default (a negative one
// disables what it bounds).
func zeroDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// derive is the HMAC-SHA256 of label under the host key: a key (or a
// fingerprint) for one purpose.
func derive(hostKey []byte, label string) []byte {
	m := hmac.New(sha256.New, hostKey)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// checkHostKey records the host key's fingerprint on the first start and
// refuses a node whose key has another: its approvals would not unseal on
// the other nodes, nor its audit records verify.
func (s *Server) checkHostKey(ctx context.Context) error {
	fp := hex.EncodeToString(derive(s.opts.HostKey, "wasmhooks host key fingerprint v1")[:16])
	if _, err := s.db.ExecContext(ctx, `INSERT INTO serve_host_key (id, fingerprint) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`, fp); err != nil {
		return fmt.Errorf("server: recording the host key's fingerprint: %w", err)
	}
	var have string
	if err := s.db.QueryRowContext(ctx, `SELECT fingerprint FROM serve_host_key WHERE id = 1`).Scan(&have); err != nil {
		return fmt.Errorf("server: reading the host key's fingerprint: %w", err)
	}
	if have != fp {
		return fmt.Errorf("server: this node's host key (fingerprint %s) is not the platform's (%s): every node of a platform needs the same host key", fp, have)
	}
	return nil
}

// DefaultExpiryInterval is how often the server applies the expiry policy
// of approvals nobody resolved in time (5 s): an approval is decided at most
// that long after its expiry.
const DefaultExpiryInterval = 5 * time.Second

// every calls f every interval until ctx is done: the server's background
// passes (expire, syncOnce, sweepOnce).
func every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
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
	s.markUnrecorded(ctx)
	s.indexStranded(ctx, time.Now().Add(-s.deadAfter()))
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
				// Another node's expiry (or a resolution) took it first:
				// that node records it.
				var ae *chain.ApprovalError
				level := slog.LevelWarn
				if errors.As(err, &ae) && (ae.Code == chain.ApprovalClaimed || ae.Code == chain.ApprovalResolved) {
					level = slog.LevelDebug
				}
				if ae != nil && ae.Code == chain.ApprovalResolved {
					// The store resolved it, the index still says pending:
					// being recorded now, or its Done was never noted (that
					// update failed, then its node died). Noted from now,
					// markUnrecorded gives it up if no outcome comes.
					if _, err := s.db.ExecContext(ctx, `UPDATE serve_approvals SET done_at = ? WHERE id = ? AND status = 'pending' AND done_at IS NULL`,
						time.Now().UnixNano(), d.id); err != nil {
						s.log.Warn("server: noting a resolved approval's time", "id", d.id, "err", err)
					}
				}
				s.log.Log(ctx, level, "server: expiring an approval", "tenant", d.tenant, "id", d.id, "err", err)
				continue
			}
			if _, err := s.finishResolution(ctx, d.tenant, d.id, out); err != nil {
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

// Close stops the ledger's lease renewal, the background passes and the
// notifications, and waits for them (and the reloads they started) to end,
// or for ctx; then it closes the tenants' chains (runs in flight finish
// first). It does not close the DB, the Runtime or the approval store:
// once it returned, the caller may.
func (s *Server) Close(ctx context.Context) error {
	s.Drain()
	s.keepStop()
	var errs []error
	ended := make(chan struct{})
	go func() {
		s.bg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("server: background work still running at close: %w", ctx.Err()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.chains {
		errs = append(errs, c.Close(ctx))
	}
	s.chains = map[string]*chain.Chain{}
	s.closed = true
	return errors.Join(errs...)
}

func (s *Server) internal(err error) *Problem {
	s.log.Error("server: internal error", "err", err)
	return problem(http.StatusInternalServerError, CodeInternal, "internal error; see the server's log")
}

// runLock locks the run id of tenant and returns the unlock.
func (s *Server) runLock(tenant, run string) func() {
	return s.runLocks.Lock(tenant + "\x00" + run)
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

// startWait counts one more open wait (a long poll, an event stream; what
// names them) of p's key, on every node sharing the database (a lease,
// startLease), and returns its end. When the key has MaxPollsPerKey open
// already, ok is false and it has answered 429 (503 when the database
// could not tell).
func (s *Server) startWait(w http.ResponseWriter, r *http.Request, p *Principal, what string) (end func(), ok bool) {
	end, ok, err := s.startLease(r.Context(), "wait:"+p.KeyID, s.opts.MaxPollsPerKey)
	switch {
	case err != nil:
		s.unavailable(w, "the key's open "+what, err)
		return nil, false
	case !ok:
		w.Header().Set("Retry-After", "1")
		writeProblem(w, problem(http.StatusTooManyRequests, CodeRateLimited, "this key has %d %s open already", s.opts.MaxPollsPerKey, what))
		return nil, false
	}
	s.testHook("wait started")
	return end, true
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
	return chain.Options{Runtime: s.rt, HostCaller: s.runner, Audit: s.audit, Approvals: indexedApprovals{s.opts.Approvals, s},
		ApprovalKey: s.approvalKey, Logger: s.log, TracerProvider: s.opts.TracerProvider}
}

func (s *Server) chainFor(tenant string) *chain.Chain {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chains[tenant]
}
