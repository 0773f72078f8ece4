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
		"PRIVATE KEY-----", "AKIA ASIA", "sk-", "sk-", "gho_ ghp_ ghr_ ghs_ ghu_", "github_pat_",
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
		`\b\d{5}\b`, `[0-9]+`, `(?i)[a-c]{3}`, `[^a-z ]{2}`, `\w+`, `(?:\d|x)\.`, `(?i:k)\d`,
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
			matchesLikeRegexp(t, re, &p, b.String())
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
		matchesLikeRegexp(t, re, &p, s)
	})
}

// matchesLikeRegexp fails t unless p, the prefiltered search for re, finds
// in s the submatches re finds, at the same offsets.
func matchesLikeRegexp(t *testing.T, re *regexp.Regexp, p *pattern, s string) {
	t.Helper()
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
		t.Fatalf("%q on %q:\n got %v\nwant %v", re, s, got, want)
	}
}

// TestPrefilterWithoutLiteral: a pattern with no literal is looked for by a
// byte it must hold, so a text without one skips its regexp.
func TestPrefilterWithoutLiteral(t *testing.T) {
	expr := `\b\d{5}\b`
	p := newPattern(regexp.MustCompile(expr), expr)
	if p.lits != nil || p.need == nil || p.class == nil {
		t.Fatalf("lits %v, need %v, class %v", p.lits, p.need != nil, p.class != nil)
	}
	for b := range 256 {
		if p.need[b] != ('0' <= b && b <= '9') {
			t.Fatalf("need[%q] = %v", byte(b), p.need[b])
		}
	}
	calls := 0
	p.findAll(strings.Repeat("no digits here ", 100), new([]int), func([]int, int) { calls++ })
	p.findAll("order 12345, ref 7", new([]int), func(m []int, off int) {
		if got := "order 12345, ref 7"[off+m[0] : off+m[1]]; got != "12345" {
			t.Errorf("match %q", got)
		}
		calls++
	})
	if calls != 1 {
		t.Errorf("%d matches, want 1", calls)
	}
}
