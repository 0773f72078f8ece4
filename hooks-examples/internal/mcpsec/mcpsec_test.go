package mcpsec

import (
	"regexp"
	"strings"
	"testing"
)

// Search finds every window of every length in the set (its rolling
// fingerprint is Print of the window), and no other.
func TestPrintSetSearch(t *testing.T) {
	s := "ghp_Zq81mPvT0aRkW2sYx9LbNc4\x00\xff é " + strings.Repeat("ab", 40)
	for n := 1; n <= len(s); n++ {
		for _, at := range []int{0, (len(s) - n) / 3, len(s) - n} {
			var p PrintSet
			p.Add(n, Print(s[at:at+n]))
			found := false
			p.Search(s, func(i, m int, print uint32) {
				if m != n || print != Print(s[i:i+m]) {
					t.Fatalf("n=%d: window %d (%d bytes) print %x, want %x", n, i, m, print, Print(s[i:i+m]))
				}
				found = found || s[i:i+m] == s[at:at+n]
			})
			if !found {
				t.Fatalf("n=%d: the window at %d was not found", n, at)
			}
		}
	}
	var p PrintSet
	p.Add(len(s)+1, 7)
	p.Search(s, func(int, int, uint32) { t.Fatal("a window longer than the string") })
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

// Every default pattern has a needle, which each of its matches holds: a
// string without it would have no match anyway.
func TestDefaultNeedles(t *testing.T) {
	samples := "sk_live_4eC39HqLyjWDarjtT1zdp7dc pk_live_TYooMQauvdEDq54NiTphI7jx " +
		"ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345 gho_16C7e42F292c6912E7710c838347Ae178B4a " +
		"AKIAIOSFODNN7EXAMPLE xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy xoxr-1-2-3-4-5-6-7-8"
	for _, p := range DefaultPatterns {
		needle := defaultNeedles[p]
		if needle == "" {
			t.Errorf("%s: no needle", p)
			continue
		}
		re := regexp.MustCompile(p)
		ms := re.FindAllString(samples, -1)
		if len(ms) == 0 {
			t.Errorf("%s: no sample", p)
		}
		for _, m := range ms {
			if !strings.Contains(m, needle) {
				t.Errorf("%s: match %q lacks the needle %q", p, m, needle)
			}
		}
	}
}
