package mcpsec

import (
	"strings"
	"testing"
)

// Windows' rolling fingerprint of each window is Print of that window, for
// every window length, and it stops when fn says so.
func TestWindowsRollPrint(t *testing.T) {
	s := "ghp_Zq81mPvT0aRkW2sYx9LbNc4\x00\xff é " + strings.Repeat("ab", 40)
	for n := 0; n <= len(s)+1; n++ {
		next := 0
		Windows(s, n, func(i int, p uint32) bool {
			if i != next {
				t.Fatalf("n=%d: window %d after %d", n, i, next-1)
			}
			next++
			if want := Print(s[i : i+n]); p != want {
				t.Fatalf("n=%d window %d: print %x, want %x", n, i, p, want)
			}
			return true
		})
		if want := max(0, len(s)-n+1); n > 0 && next != want {
			t.Fatalf("n=%d: %d windows, want %d", n, next, want)
		}
	}
	calls := 0
	Windows(s, 3, func(int, uint32) bool { calls++; return calls < 2 })
	if calls != 2 {
		t.Fatalf("Windows went on after fn returned false: %d calls", calls)
	}
}

// No name Bounded keeps is the digest Bounded made of another: a name that
// looks like one is hashed too.
func TestBoundedNamesDistinct(t *testing.T) {
	long := strings.Repeat("s", 200)
	for _, tt := range []struct{ a, b string }{
		{long, Bounded(long)},
		{"sha256:" + Digest(long), long},
		{"short", Bounded("short")},
	} {
		if tt.a != tt.b && Bounded(tt.a) == Bounded(tt.b) {
			t.Errorf("%.20q and %.20q are one name: %s", tt.a, tt.b, Bounded(tt.a))
		}
	}
	if got := Key("taint", "s1"); got != "taint/s1" {
		t.Errorf("Key of a short session: %s", got)
	}
}
