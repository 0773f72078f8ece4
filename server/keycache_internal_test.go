package server

import (
	"testing"
	"time"
)

// TestKeyCache: a hit until the TTL, nothing after an invalidation, a read
// that began before an invalidation stores nothing, a TTL <= 0 caches
// nothing, and the size stays bounded.
func TestKeyCache(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := Principal{KeyID: "key_1", Role: RoleOperator, Tenant: "acme"}

	c := newKeyCache(time.Second)
	_, ok, gen := c.get("h", t0)
	if ok {
		t.Fatal("hit in an empty cache")
	}
	c.put("h", gen, p, t0)
	if got, ok, _ := c.get("h", t0.Add(999*time.Millisecond)); !ok || got != p {
		t.Fatalf("within the TTL: %+v %v", got, ok)
	}
	if _, ok, _ := c.get("h", t0.Add(time.Second)); ok {
		t.Fatal("a hit at the TTL")
	}

	c.put("h", c.gen, p, t0)
	c.invalidate()
	if _, ok, _ := c.get("h", t0); ok {
		t.Fatal("a hit after invalidate")
	}

	// A read that started before the invalidation (the key may be the one
	// retired) does not store what it read.
	_, _, stale := c.get("h", t0)
	c.invalidate()
	c.put("h", stale, p, t0)
	if _, ok, _ := c.get("h", t0); ok {
		t.Fatal("a stale read was cached")
	}

	off := newKeyCache(-1)
	off.put("h", off.gen, p, t0)
	if _, ok, _ := off.get("h", t0); ok {
		t.Fatal("cached with a negative TTL")
	}

	for i := range maxCachedKeys + 10 {
		c.put(string(rune(i)), c.gen, p, t0)
	}
	if len(c.m) > maxCachedKeys {
		t.Fatalf("%d keys cached, bound %d", len(c.m), maxCachedKeys)
	}
}
