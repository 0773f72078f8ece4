//go:build !wasip1

package main

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestPrefilterOfDefaults: every default pattern but the PEM one gets a
// literal and a byte class, so its regexp runs only near a literal (the PEM
// block may hold any byte: a literal only).
func TestPrefilterOfDefaults(t *testing.T) {
	want := []string{
		"PRIVATE KEY-----", "AKIA ASIA", "sk-", "gho_ ghp_ ghr_ ghs_ ghu_", "github_pat_",
		"xoxa- xoxb- xoxo- xoxp- xoxr- xoxs-", "AIza", ".eyJ", "bearer", "@",
	}
	res, err := compile(DefaultPatterns)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range res {
		var got []string
		for _, l := range p.lits {
			got = append(got, l.s)
		}
		if strings.Join(got, " ") != want[i] {
			t.Errorf("pattern %d: literals %q, want %q", i, got, want[i])
		}
		if (p.class == nil) != (i == 0) {
			t.Errorf("pattern %d: class %v", i, p.class != nil)
		}
	}
}

// TestPrefilterFindsWhatTheRegexpFinds: for the default patterns and
// patterns written to trip the analysis (assertions, case folding,
// alternations, classes, non-ASCII), the prefiltered search returns exactly
// the matches of FindAllStringSubmatchIndex on the whole text, over texts
// made of the patterns' own pieces.
func TestPrefilterFindsWhatTheRegexpFinds(t *testing.T) {
	exprs := append([]string{
		`^AKIA[0-9A-Z]{4}`, `(?m)^key=\w+$`, `\Bsk-\w+`, `(?i)token[:=]\s*\w{4,}`, `(?i)skip\w*`,
		`(?:abc|de)+f`, `x[^ ]y`, `é+\w`, `(a|b)c`, `ab?c`, `\d{3}-\d{4}`, `(?s)BEGIN.*?END`,
		`[ab]{2}@`, `(?:foo)?bar`, `\bq\b`, `(?i)K+`, `(?i:b)x`, `\x{fffd}+a`, `[\x{fffd}z]b`,
	}, DefaultPatterns...)
	pieces := []string{
		"AKIA", "ASIA", "IOSFODNN7EXAMPLE", "sk-", "abcdefghijklmnopqrstuvwx", "ghp_", "github_pat_",
		"xoxb-", "AIza", "eyJ", "hbGciOiJ", ".", "Bearer ", "bEaReR\t", "@", "mail.example", ".io",
		"-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "\n", " ", "x", "_", "-",
		"key=", "token:", "TOKEN= ", "é", "\xff", "abc", "de", "f", "ab", "c", "555-1234", "BEGIN",
		"END", "bar", "foo", "q", "K", "k", "\u212a", "ſkip", "Skip", "0123456789", "bx", "BX", "Bx", "\ufffd", "za", "zb",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, expr := range exprs {
		re := regexp.MustCompile(expr)
		p := newPattern(re, expr)
		for range 400 {
			var b strings.Builder
			for range rng.IntN(40) {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			}
			s := b.String()
			want := re.FindAllStringSubmatchIndex(s, -1)
			var got [][]int
			p.findAll(s, new([]int), func(m []int, off int) {
				c := make([]int, len(m))
				for i, v := range m {
					c[i] = v
					if v >= 0 {
						c[i] = v + off
					}
				}
				got = append(got, c)
			})
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s on %q:\n got %v\nwant %v", expr, s, got, want)
			}
		}
	}
}

// FuzzPrefilter holds the prefiltered search to the regexp's over any
// pattern and text: go test -fuzz FuzzPrefilter ./hooks-examples/redact-secrets/
func FuzzPrefilter(f *testing.F) {
	for _, p := range DefaultPatterns {
		f.Add(p, "key AKIAIOSFODNN7EXAMPLE, a@b.io; Bearer abcdefgh123 sk-abcdefghijklmnopqrstuvwx")
	}
	f.Add(`(?i)x\bk`, "x K \u212a")
	f.Add(`(?m)^a$`, "b\na\n")
	f.Add(`(?i:b)x\x{fffd}`, "BX\xff bx\ufffd")
	f.Fuzz(func(t *testing.T, expr, s string) {
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		p := newPattern(re, expr)
		want := re.FindAllStringSubmatchIndex(s, -1)
		var got [][]int
		p.findAll(s, new([]int), func(m []int, off int) {
			c := make([]int, len(m))
			for i, v := range m {
				c[i] = v
				if v >= 0 {
					c[i] = v + off
				}
			}
			got = append(got, c)
		})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q on %q:\n got %v\nwant %v", expr, s, got, want)
		}
	})
}
