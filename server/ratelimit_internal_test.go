package server

import (
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
