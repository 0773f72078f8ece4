package server

import (
	"math"
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
}

func newLimiter(rl RateLimit) *limiter {
	if rl.PerSecond < 0 {
		return nil
	}
	if rl.PerSecond == 0 {
		rl.PerSecond = DefaultRatePerSecond
	}
	if rl.Burst <= 0 {
		rl.Burst = DefaultRateBurst
	}
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
