package server

import (
	"sync"
	"time"
)

// DefaultKeyCacheTTL is how long a node answers for an API key from memory
// before it reads the key's row again (1 s). Without the cache every request
// paid a database read before anything else (on Postgres, a round trip: the
// largest part of the HTTP layer's overhead, BENCHMARKS.md "Issue 14").
//
// Revocation and rotation stay prompt: the node that retires a key forgets
// every cached key at once, and tells the other nodes (chanKeys), which
// forget theirs when the notification arrives; the TTL bounds the rest (a
// lost notification, processes sharing a SQLite file, which have none).
const DefaultKeyCacheTTL = time.Second

// maxCachedKeys bounds the cache (10,000 keys): past it, the cache is
// emptied and refills from the requests that follow. Only keys that
// authenticated are cached, so the bound is on real keys, not on guesses.
const maxCachedKeys = 10_000

// keyCache maps a key's hash to the principal it authenticated as, for ttl.
// gen counts the invalidations: a read that started before one may not
// store what it read (it could be the key just retired).
type keyCache struct {
	ttl time.Duration // <= 0: nothing is cached

	mu  sync.Mutex
	gen uint64
	m   map[string]cachedKey
}

type cachedKey struct {
	p     Principal
	until time.Time
}

func newKeyCache(ttl time.Duration) *keyCache {
	return &keyCache{ttl: ttl, m: map[string]cachedKey{}}
}

// get returns the principal cached for hash and the generation to pass to
// put after reading the database on a miss.
func (c *keyCache) get(hash string, now time.Time) (Principal, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	if ok && now.Before(e.until) {
		return e.p, true, c.gen
	}
	if ok {
		delete(c.m, hash)
	}
	return Principal{}, false, c.gen
}

// put caches p under hash unless the cache was invalidated since gen.
func (c *keyCache) put(hash string, gen uint64, p Principal, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.m) >= maxCachedKeys {
		clear(c.m)
	}
	c.m[hash] = cachedKey{p: p, until: now.Add(c.ttl)}
}

// invalidate forgets every cached key: a key was retired (here or, told by
// a notification, on another node).
func (c *keyCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
}
