package server

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Per-key rate limits, with their defaults: each API key has a token bucket
// of DefaultRateBurst requests, refilled at DefaultRatePerSecond. They
// defend the platform (and its other tenants) against one key's flood; a
// request over the limit is 429 rate_limited with Retry-After, and does
// nothing. The buckets are per process (several nodes would each allow the
// rate).
const (
	DefaultRatePerSecond = 100
	DefaultRateBurst     = 200
)

// RateLimit configures the per-key rate limit. The zero value means the
// defaults; a negative PerSecond disables it.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

type bucket struct {
	tokens float64
	last   time.Time
}

type limiter struct {
	rate, burst float64
	mu          sync.Mutex
	buckets     map[string]*bucket // by key id: as many as there are keys
	sweeps      int                // sweeps of a full table (tests)
	lastSweep   time.Time          // the last sweep of a full table (failLimiter)
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
// until there is.
func (l *limiter) allow(key string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
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
// bucket would not. The caller holds l.mu.
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
