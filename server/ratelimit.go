package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Per-key rate limits, with their defaults: each API key has a token bucket
// of DefaultRateBurst requests, refilled at DefaultRatePerSecond. They
// defend the platform (and its other tenants) against one key's flood; a
// request over the limit is 429 rate_limited with Retry-After, and does
// nothing. Where the buckets are kept is Options.RateLimitScope: by default,
// on Postgres, in the database, one bucket per key for every node that
// shares it; on SQLite in the process's memory.
const (
	DefaultRatePerSecond = 100
	DefaultRateBurst     = 200
)

// RateLimit configures the per-key rate limit. The zero value means the
// defaults; a negative PerSecond disables it; New refuses one that is not a
// finite number.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// RateLimitScope is where the per-key rate limit's buckets are kept
// (Options.RateLimitScope).
type RateLimitScope string

const (
	// RateLimitCluster keeps each key's bucket in the database
	// (serve_rate_buckets), taken by one conditional statement per
	// request: the nodes sharing the database together allow the rate,
	// and a restart refills nothing. An in-memory bucket of the same size
	// is a first check, set down to the shared one's tokens when that
	// refuses: a key's flood, at one node or spread over all, is refused
	// in memory until the shared bucket may have a token again (a
	// statement or two a node per token, not one a request). When the
	// database fails to answer, the request is 503 unavailable: refused,
	// not let through. The default on Postgres. See
	// RATIONALE.md#why-a-shared-rate-limit.
	RateLimitCluster RateLimitScope = "cluster"
	// RateLimitNode keeps the buckets in the process's memory: each node
	// allows the rate (N nodes, N times the rate) and a restart refills
	// them; no database write per request. The default on SQLite.
	RateLimitNode RateLimitScope = "node"
)

type bucket struct {
	tokens float64
	last   time.Time
}

type limiter struct {
	rate, burst float64
	mu          sync.Mutex         // guards the fields below
	buckets     map[string]*bucket // by key id (or address): none full again as of the last sweep, and those made since
	calls       int                // allow's calls since its last sweep
	sweeps      int                // sweeps run (tests)
	lastSweep   time.Time          // the last sweep of a full table (failLimiter)
}

// check refuses a rate that is not a number or infinite (which made every
// bucket refuse every request, with a Retry-After of nonsense): what names
// the option.
func (rl RateLimit) check(what string) error {
	if math.IsNaN(rl.PerSecond) || math.IsInf(rl.PerSecond, 0) {
		return fmt.Errorf("server: %s.PerSecond is %v: a finite number (negative: no limit)", what, rl.PerSecond)
	}
	return nil
}

func newLimiter(rl RateLimit) *limiter {
	return rl.limiter(DefaultRatePerSecond, DefaultRateBurst)
}

// limiter is rl's token buckets, its zero fields given the defaults
// perSecond and burst; nil (no limit) when rl.PerSecond is negative.
func (rl RateLimit) limiter(perSecond float64, burst int) *limiter {
	if rl.PerSecond < 0 {
		return nil
	}
	zeroDefault(&rl.PerSecond, perSecond)
	orDefault(&rl.Burst, burst)
	return &limiter{rate: rl.PerSecond, burst: float64(rl.Burst), buckets: map[string]*bucket{}}
}

// allow takes a token of key's bucket; if there is none it returns how long
// until there is. Once it has been called as many times as there are
// buckets since it last swept, it sweeps (forgets the buckets full again:
// an idle key's, a revoked or deleted key's), so a sweep costs O(1) a call,
// amortised, and no bucket outlives its refill by more than that many
// calls. A bucket full again holds what a new one would, so forgetting it
// changes no decision.
func (l *limiter) allow(key string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls++; l.calls > len(l.buckets) {
		l.calls = 0
		l.sweep(now)
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// refund gives back the token allow took for key at at: the database
// failed to take the shared bucket's, so the request counts against
// neither.
func (l *limiter) refund(key string, at time.Time) {
	l.settle(key, math.Inf(1), at)
}

// settle gives back the token allow took for key, whose request the shared
// bucket refused, and lowers the bucket to the shared one's tokens if it
// holds more. It never raises the bucket: this one counts only this node's
// requests, so it holds at least what the shared one does, and never
// refuses what the shared one would pass. With several nodes a key's flood
// spread over them found tokens here at every node (each counts its own
// share of what passed), so every request of the flood cost the database a
// write; now, at each node, it is refused in memory until the shared bucket
// may have a token again. at is when allow took the token: a bucket swept
// since (it refilled while the database answered) is made again, full as
// it was, at at, so the sweep changes nothing here either.
func (l *limiter) settle(key string, shared float64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{tokens: l.burst, last: at}
		l.buckets[key] = b
	}
	b.tokens = math.Min(math.Min(l.burst, b.tokens+1), shared)
}

// sharedLimiter is the per-key rate limit of RateLimitCluster: GCRA over
// serve_rate_buckets, which keeps each key's theoretical arrival time (tat,
// Unix ns): the time its bucket would be full again had it taken every
// request it let through. A request at now is allowed when
// max(tat, now) - now <= tolerance (the burst less one, in intervals), and
// then moves tat to max(tat, now) + interval. Both are one upsert, so
// requests on any number of nodes take their turn at the row: two nodes
// never together pass the burst. On Postgres now is the database's clock
// (so nodes' clocks may differ); processes sharing a SQLite file share a
// machine's.
type sharedLimiter struct {
	db        *sqlDB
	interval  int64        // ns between two tokens: 1/rate
	tolerance int64        // (burst-1) * interval
	spent     int64        // tolerance + interval: how far past now a bucket just spent has its tat
	local     *limiter     // the same bucket in memory: the first check
	take      string       // the upsert; ? placeholders: key, [now], interval, tolerance
	wait      string       // tat - now of a key, for Retry-After
	stepped   string       // sets a tat past now + spent down to it; ? placeholders: [now], spent, key, [now], spent
	takes     atomic.Int64 // statements take ran (tests)
}

// newSharedLimiter is rl's buckets kept in db; nil (no limit) when
// rl.PerSecond is negative.
func newSharedLimiter(db *sqlDB, rl RateLimit) *sharedLimiter {
	local := newLimiter(rl)
	if local == nil {
		return nil
	}
	// An interval of at most an hour and a tolerance of at most a year
	// keep every sum of the statement far from int64's end.
	interval := int64(math.Min(float64(time.Hour), math.Max(1, float64(time.Second)/local.rate)))
	tolerance := int64(math.Min(float64(365*24*time.Hour), (local.burst-1)*float64(interval)))
	now := db.nowSQL()
	// The proposed row's tat is now + interval, so excluded.tat - interval
	// is now in the update without reading the clock twice.
	return &sharedLimiter{db: db, interval: interval, tolerance: tolerance, spent: tolerance + interval, local: local,
		take: `INSERT INTO serve_rate_buckets AS b (key_id, tat) VALUES (?, ` + now + ` + ?)
			ON CONFLICT (key_id) DO UPDATE SET tat = CASE WHEN b.tat > excluded.tat - ? THEN b.tat ELSE excluded.tat - ? END + ?
			WHERE b.tat - (excluded.tat - ?) <= ?
			RETURNING tat`,
		wait:    `SELECT tat - ` + now + ` FROM serve_rate_buckets WHERE key_id = ?`,
		stepped: `UPDATE serve_rate_buckets SET tat = ` + now + ` + ? WHERE key_id = ? AND tat > ` + now + ` + ?`}
}

// allow takes a token of key's bucket, in memory first, then in the
// database; if there is none it returns how long until there is. err is
// the database's failure: the caller refuses the request.
func (l *sharedLimiter) allow(ctx context.Context, key string, at time.Time) (bool, time.Duration, error) {
	if l == nil {
		return true, 0, nil
	}
	if ok, wait := l.local.allow(key, at); !ok {
		return false, wait, nil
	}
	ok, until, err := l.takeShared(ctx, key, at)
	switch {
	case err != nil:
		l.local.refund(key, at)
		return false, 0, err
	case !ok:
		l.local.settle(key, 1-float64(until)/float64(l.interval), at)
		return false, max(until, time.Millisecond), nil
	}
	return true, 0, nil
}

// takeShared is allow's database part: the one statement. When it
// refuses, until is how long until the shared bucket has a token again.
func (l *sharedLimiter) takeShared(ctx context.Context, key string, at time.Time) (ok bool, until time.Duration, err error) {
	l.takes.Add(1)
	args := append([]any{key}, l.db.nowArgs(at)...)
	args = append(args, l.interval, l.interval, l.interval, l.interval, l.interval, l.tolerance)
	var tat int64
	err = l.db.QueryRowContext(ctx, l.take, args...).Scan(&tat)
	if err == nil {
		return true, 0, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, 0, err
	}
	// Refused (the update's condition held no row). How long until the
	// next token is for Retry-After and the bucket in memory: read apart,
	// it needs no lock (a row swept since reads as a full bucket).
	var ahead int64
	if err := l.db.QueryRowContext(ctx, l.wait, append(l.db.nowArgs(at), key)...).Scan(&ahead); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, 0, err
	}
	if ahead > l.spent {
		// No request leaves tat further ahead than a bucket just spent
		// has it: the clock (the database's, on Postgres) stepped back
		// since tat was written. Set down to a spent bucket's, the step
		// costs the key at most a burst; kept, it refused every request
		// for the step's length, since a refusal writes nothing. (Bounding
		// tat where take reads it would change no decision: the bound
		// refuses too, and is not written.) Rare: a statement more only
		// then. See RATIONALE.md#why-a-shared-rate-limit.
		now := l.db.nowArgs(at)
		args := append(append(append(append([]any{}, now...), l.spent, key), now...), l.spent)
		if _, err := l.db.ExecContext(ctx, l.stepped, args...); err != nil {
			return false, 0, err
		}
		ahead = l.spent
	}
	return false, time.Duration(ahead - l.tolerance), nil
}

// unavailable answers 503 unavailable (Retry-After 1) for a limit, what,
// that the database failed to check: the request is refused, not let
// through unbounded.
func (s *Server) unavailable(w http.ResponseWriter, what string, err error) {
	s.log.Error("server: a shared limit could not be checked", "limit", what, "err", err)
	w.Header().Set("Retry-After", "1")
	writeProblem(w, problem(http.StatusServiceUnavailable, CodeUnavailable, "%s could not be checked: the database did not answer; retry", what))
}

// rateLimit takes a token of p's key (Options.RateLimitScope's bucket). A
// key with none left is 429 rate_limited with Retry-After; a database that
// fails to answer is 503 unavailable (the limit cannot be told, and letting
// every request through would leave a flood unbounded exactly when the
// database is struggling; the request needed the database anyway). It
// reports whether the request may go on; if not, it has answered.
func (s *Server) rateLimit(w http.ResponseWriter, r *http.Request, p *Principal) bool {
	at := s.clock()
	var ok bool
	var wait time.Duration
	if s.shared != nil {
		var err error
		if ok, wait, err = s.shared.allow(r.Context(), p.KeyID, at); err != nil {
			s.unavailable(w, "the rate limit", err)
			return false
		}
	} else {
		ok, wait = s.limiter.allow(p.KeyID, at)
	}
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		writeProblem(w, problem(http.StatusTooManyRequests, CodeRateLimited, "this key's rate limit is reached; retry in %s", wait.Round(time.Millisecond)))
	}
	return ok
}

// Failed authentications per remote address, with their defaults: each
// address (an IPv6 address by its /64, which one client usually holds
// whole) has a budget of DefaultAuthFailBurst failed authentications (an
// unknown, revoked or malformed key; a request without any key is not
// counted), refilled at DefaultAuthFailPerSecond. Once it is spent, every
// request from the address that needs a key is 429 auth_rate_limited with
// Retry-After, before its key is looked up, a valid key's too: otherwise the
// answer (429 for a wrong key, 200 for a right one) would still tell a
// guesser which is which. Behind a proxy every client shares the proxy's
// address (the server does not trust X-Forwarded-For). At most
// MaxAuthFailAddresses addresses are tracked; past that, addresses whose
// budget is whole again are forgotten (a sweep of the whole table, at most
// once every AuthFailSweepEvery), and a failure that finds no room is not
// counted.
const (
	DefaultAuthFailPerSecond = 0.2 // one more failure every 5 s
	DefaultAuthFailBurst     = 20
	MaxAuthFailAddresses     = 65536
	// AuthFailSweepEvery bounds how often a full table is swept (1 s): a
	// sweep reads every bucket under the lock every authentication
	// takes, so one at each failure let a client holding many addresses
	// fill the table, then make each wrong key cost a 65,536-bucket scan
	// that every other request's authentication waited behind.
	AuthFailSweepEvery = time.Second
)

type failLimiter struct {
	l *limiter
}

func newFailLimiter(rl RateLimit) *failLimiter {
	l := rl.limiter(DefaultAuthFailPerSecond, DefaultAuthFailBurst)
	if l == nil {
		return nil
	}
	return &failLimiter{l: l}
}

// blocked reports whether addr has spent its budget, and how long until
// one more attempt is allowed.
func (f *failLimiter) blocked(addr string, now time.Time) (bool, time.Duration) {
	if f == nil {
		return false, 0
	}
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[addr]
	if !ok {
		return false, 0
	}
	tokens := math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	if tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - tokens) / l.rate * float64(time.Second))
}

// fail counts one failed authentication of addr.
func (f *failLimiter) fail(addr string, now time.Time) {
	if f == nil {
		return
	}
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[addr]
	if !ok {
		if len(l.buckets) >= MaxAuthFailAddresses {
			if d := now.Sub(l.lastSweep); d >= AuthFailSweepEvery || d < 0 {
				l.lastSweep = now
				l.sweep(now)
			}
			if len(l.buckets) >= MaxAuthFailAddresses {
				return
			}
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[addr] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate) - 1
	if b.tokens < 0 {
		b.tokens = 0
	}
	b.last = now
}

// sweep forgets the buckets that are full again: they hold nothing a new
// bucket would not. allow runs it every so many calls, failLimiter when
// its table is full. The caller holds l.mu.
func (l *limiter) sweep(now time.Time) {
	l.sweeps++
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// clientAddr is the request's remote address as failLimiter counts it: the
// IP, an IPv6 one cut to its /64.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
