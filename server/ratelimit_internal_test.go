package server

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// An IPv6 client is counted by its /64 (it holds the whole prefix); an
// IPv4 one, and a v4-mapped v6 one, by its address.
func TestClientAddr(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:4242":             "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":      "192.0.2.7",
		"not an address":             "not an address",
	} {
		if got := clientAddr(&http.Request{RemoteAddr: remote}); got != want {
			t.Errorf("%s: %s, want %s", remote, got, want)
		}
	}
}

// The failure buckets are bounded: past MaxAuthFailAddresses, whole
// buckets are forgotten, and a failure that finds no room is not counted
// (the map does not grow).
func TestFailLimiterBounded(t *testing.T) {
	f := newFailLimiter(RateLimit{PerSecond: 1, Burst: 2})
	t0 := time.Now()
	for i := 0; i < MaxAuthFailAddresses; i++ {
		f.fail("addr"+strconv.Itoa(i), t0)
	}
	f.fail("one more", t0)
	if n := len(f.l.buckets); n != MaxAuthFailAddresses {
		t.Fatalf("%d buckets", n)
	}
	if blocked, _ := f.blocked("one more", t0); blocked {
		t.Fatal("an uncounted address is blocked")
	}
	// Two seconds on, every bucket is whole again: swept for the new one.
	f.fail("later", t0.Add(2*time.Second))
	if n := len(f.l.buckets); n != 1 {
		t.Fatalf("%d buckets after the sweep", n)
	}
	f.fail("later", t0.Add(2*time.Second))
	if blocked, wait := f.blocked("later", t0.Add(2*time.Second)); !blocked || wait <= 0 {
		t.Fatalf("blocked %v after two failures (burst 2), wait %s", blocked, wait)
	}
}

// A full table of failure buckets is swept at most once per
// authFailSweepEvery: a sweep reads every bucket under the lock that every
// authentication takes, so sweeping at each failure let a client with many
// addresses (one IPv6 /48 holds 65,536 /64s) fill the table and then make
// each wrong key cost a 65,536-entry scan, serializing every other
// request's authentication behind it.
func TestFailLimiterSweepsSeldom(t *testing.T) {
	f := newFailLimiter(RateLimit{PerSecond: 1, Burst: 2})
	t0 := time.Now()
	for i := 0; i < MaxAuthFailAddresses; i++ {
		f.fail("addr"+strconv.Itoa(i), t0)
	}
	before := f.l.sweeps
	for i := 0; i < 1000; i++ {
		f.fail("new"+strconv.Itoa(i), t0.Add(time.Duration(i)*time.Microsecond))
	}
	if n := f.l.sweeps - before; n > 1 {
		t.Fatalf("%d sweeps of a full table for 1000 failures within a millisecond, want at most 1", n)
	}
	if n := len(f.l.buckets); n != MaxAuthFailAddresses {
		t.Fatalf("%d buckets", n)
	}
}

// TestLimiterForgetsFullBuckets: allow sweeps the per-key buckets in
// memory once it has been called as many times as there are buckets: a
// bucket full again is forgotten (a key idle, revoked or deleted: each
// stayed for the process's life), one not full is kept, and no decision
// changes: the same calls, with settles that come after a sweep, answer
// the same, waits included, as through a limiter that never sweeps. A
// table of N buckets not full is swept at most once in N calls (never a
// scan of every bucket each request).
func TestLimiterForgetsFullBuckets(t *testing.T) {
	rl := RateLimit{PerSecond: 1, Burst: 3}
	swept, kept := newLimiter(rl), newLimiter(rl)
	kept.calls = math.MinInt // the reference: never sweeps
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Now()
	// A token taken, its bucket full again a second later and swept (the
	// database answered slowly), then refused by the shared bucket: the
	// settle sets the bucket down all the same.
	both := func(key string, at time.Time) (oks [2]bool) {
		oks[0], _ = swept.allow(key, at)
		oks[1], _ = kept.allow(key, at)
		return oks
	}
	both("slow", at)
	for range 3 { // 3 calls, 2 buckets: one sweep
		both("other", at.Add(time.Second))
	}
	if swept.buckets["slow"] != nil {
		t.Fatal("a bucket full again was not swept")
	}
	swept.settle("slow", 0.5, at)
	kept.settle("slow", 0.5, at)
	at = at.Add(time.Second)
	if oks := both("slow", at); oks != [2]bool{true, true} {
		t.Fatalf("the first request after the settle: %v (with sweeps, without)", oks)
	}
	if oks := both("slow", at); oks != [2]bool{false, false} {
		t.Fatalf("the second request after the settle (1.5 tokens): %v (with sweeps, without)", oks)
	}
	type took struct {
		key string
		at  time.Time
	}
	var pending []took // tokens taken, settled later (the database answering)
	var passed, refused int
	for i := range 20000 {
		at = at.Add(time.Duration(rng.IntN(int(100 * time.Millisecond))))
		if i%1000 == 999 {
			at = at.Add(10 * time.Second) // every bucket full again
		}
		key := "k" + strconv.Itoa(rng.IntN(20))
		ok, wait := swept.allow(key, at)
		if okRef, waitRef := kept.allow(key, at); ok != okRef || wait != waitRef {
			t.Fatalf("call %d (%s): %v %s with sweeps, %v %s without", i, key, ok, wait, okRef, waitRef)
		}
		if ok {
			passed++
			if rng.IntN(4) == 0 {
				pending = append(pending, took{key, at})
			}
		} else {
			refused++
		}
		if len(pending) > 0 && rng.IntN(3) == 0 {
			p := pending[0]
			pending = pending[1:]
			shared := rng.Float64() // refused by the shared bucket, holding that much
			if rng.IntN(5) == 0 {
				shared = math.Inf(1) // the database failed: refund
			}
			swept.settle(p.key, shared, p.at)
			kept.settle(p.key, shared, p.at)
		}
	}
	if passed == 0 || refused == 0 || swept.sweeps == 0 {
		t.Fatalf("%d passed, %d refused, %d sweeps: the calls tried too little", passed, refused, swept.sweeps)
	}
	// An hour on, every bucket but the one spent now is forgotten within
	// as many calls as there are buckets.
	later, before, n := at.Add(time.Hour), swept.sweeps, len(swept.buckets)
	for i := 0; swept.sweeps == before; i++ {
		if i > n {
			t.Fatalf("no sweep in %d calls with %d buckets", i, n)
		}
		swept.allow("busy", later)
	}
	if len(swept.buckets) != 1 || swept.buckets["busy"] == nil {
		t.Fatalf("buckets after a sweep an hour on: %d (busy kept: %v), want busy's only", len(swept.buckets), swept.buckets["busy"] != nil)
	}
	if len(kept.buckets) != 22 { // k0..k19, slow, other
		t.Fatalf("the reference holds %d buckets, want 22", len(kept.buckets))
	}
	// N buckets not full, N calls: one sweep at most.
	l := newLimiter(rl)
	for i := range 1000 {
		l.allow("k"+strconv.Itoa(i), later)
	}
	before = l.sweeps
	for i := range 1000 {
		l.allow("k"+strconv.Itoa(i), later)
	}
	if d := l.sweeps - before; d > 1 || len(l.buckets) != 1000 {
		t.Fatalf("%d sweeps in 1000 calls over 1000 buckets not full, %d buckets kept; want at most 1 and 1000", d, len(l.buckets))
	}
}
