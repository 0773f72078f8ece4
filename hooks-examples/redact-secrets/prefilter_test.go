//go:build !wasip1

package main

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"regexp/syntax"
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
		// The e-mail pattern, the last, is read from its "@" in a window
		// (its local part without the regexp); the others' runs whole.
		if email := i == len(res)-1; (p.head != nil) != email || (p.max > 0) != email {
			t.Errorf("pattern %d: head %v, max %d", i, p.head != nil, p.max)
		}
		// Its address shorter than 15 dots and a dot (30 bytes), no count
		// can bind: the relaxed program runs.
		if i == len(res)-1 && (p.short != 30 || p.bounded == nil || len(p.re.String()) > 80) {
			t.Errorf("e-mail: short %d, relaxed %v", p.short, p.re)
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
		// Bounded: windows around each literal instead of whole runs.
		`[a-z]{1,6}@[a-z]{1,4}`, `\b[a-c]{2,5}@`, `@[a-z0-9]{2,5}\b`, `\B[ab]{1,3}@x?`, `(?i)k{1,3}q`,
		`x[ab]{0,4}@`, `é{1,2}@\w{0,3}`, `[^@ ]{1,5}@`, `\bsk-[a-z]{3,8}\b`, `(?:ab|c){1,3}\d`, `\b\d{5}`,
		`[A-Za-z0-9_.%+-]{1,8}@[A-Za-z0-9-]{1,4}(?:\.[A-Za-z0-9-]{1,4}){0,2}\.[A-Za-z]{2,3}`,
		// A run of a class before a literal: the regexp reads from its end.
		`[a-z]+@[a-z]{1,3}`, `[a-c.]+@x?\b`, `[0-9a-z]+?@(b)`, `[ab]+(?i:K)\d`, `[a-z@]+@b`, `[é]+@`, `[a-z]+@\w+`,
		`[A-Za-z0-9_.%+-]+@(?P<secret>[a-z]{1,4})\.io`, `[a-z]+é@b`,
	}, DefaultPatterns...)
	pieces := []string{
		"AKIA", "ASIA", "IOSFODNN7EXAMPLE", "sk-", "abcdefghijklmnopqrstuvwx", "ghp_", "github_pat_",
		"xoxb-", "AIza", "eyJ", "hbGciOiJ", ".", "Bearer ", "bEaReR\t", "@", "mail.example", ".io",
		"-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "\n", " ", "x", "_", "-",
		"key=", "token:", "TOKEN= ", "é", "\xff", "abc", "de", "f", "ab", "c", "555-1234", "BEGIN",
		"END", "bar", "foo", "q", "K", "k", "\u212a", "ſkip", "Skip", "0123456789", "bx", "BX", "Bx", "\ufffd", "za", "zb",
		// Runs longer than a bounded pattern's window, so that windows
		// end inside them, next to a literal or a word byte.
		strings.Repeat("a", 23), strings.Repeat("b", 9), strings.Repeat("0", 11), "kkkq", "éé", "abcab",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, expr := range exprs {
		re := regexp.MustCompile(expr)
		p := mustPattern(t, expr)
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
	// Glued OpenRouter keys (one a digit short) beside a slug, and e-mail
	// domains whose first label is 63, then 64 characters long, a run of
	// 900 letters on.
	hex, label := strings.Repeat("0123456789abcdef", 4), strings.Repeat("a", 63)
	edges := "keysk-or-v1-" + hex + "X task-or-v2-rollout-checklist-for-the-whole-platform-team xsk-or-v1-" + hex[1:] +
		" jane@" + label + ".com jane@" + label + "a.com jane@mail." + label + "a.com " + strings.Repeat("b", 900) + "@" + label + "a.io"
	for _, p := range DefaultPatterns {
		f.Add(p, "key AKIAIOSFODNN7EXAMPLE, a@b.io; Bearer abcdefgh123 sk-abcdefghijklmnopqrstuvwx")
		f.Add(p, edges)
	}
	f.Add(`(?i)x\bk`, "x K \u212a")
	f.Add(`(?m)^a$`, "b\na\n")
	f.Add(`(?i:b)x\x{fffd}`, "BX\xff bx\ufffd")
	// Bounded patterns: a literal at each distance from a window's edge in
	// a long run, word boundaries at the edges.
	long := strings.Repeat("a", 40)
	f.Add(`[a-z]{1,6}@[a-z]{1,4}`, long+"@"+long+"@b@"+long)
	f.Add(`\b[a-c]{2,5}@\w{0,2}\b`, long+"@ab ab@"+long[:7]+"@a")
	f.Add(`\B[ab]{1,3}@x?`, long+"@x"+long[:5]+"@"+"xa@")
	f.Add(`@[a-z0-9]{2,5}\b`, long+"@"+long[:5]+" @abc@"+long)
	f.Add(`[A-Za-z0-9_.%+-]{1,64}@[A-Za-z0-9-]{1,63}\.[A-Za-z]{2,6}`, strings.Repeat("x.", 100)+"@b.io "+long+"@"+long+".com")
	f.Add(`[a-z.]+@[a-z]{1,3}\b`, long+"@bc@"+long+"@b.c@@x@abcd "+long[:3]+"@a")
	// A capital beyond ASCII crossed with a folded literal; a window's edge
	// inside a four-byte rune before a literal; the cut head run after a
	// match ending inside it; the e-mail pattern at 29, 30 and 31 bytes.
	f.Add(`Ä(?i:ab)\w{0,3}`, "ÄAB1 äab ÄaBxyz")
	f.Add(`[ÉÈ]x(?i:key)|Ω(?i:z)`, "ÉxKEY ÈXkey Ωz ΩZ ωZ")
	f.Add(`[a-z]+(?i:x)Ä{1,2}`, "abXÄÄ abxÄ abxä")
	f.Add(`[^a]{1,3}@\b`, "\U0001F600\U0001F600@x \xf0\x9f@a")
	f.Add(`[a-z]+@[a-z@]{1,4}`, "ab@cd@ef@gh@@x@y")
	f.Add(DefaultPatterns[len(DefaultPatterns)-1], "a@b.c.d.e.f.g.h.i.j.k.l.m.n.o.io a@"+strings.Repeat("b.", 14)+"io")
	f.Fuzz(func(t *testing.T, expr, s string) {
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		p, err := newPattern(expr)
		if err != nil {
			t.Fatalf("%q: %v, which regexp.Compile accepts", expr, err)
		}
		matchesLikeRegexp(t, re, &p, s)
	})
}

func mustPattern(t *testing.T, expr string) pattern {
	t.Helper()
	p, err := newPattern(expr)
	if err != nil {
		t.Fatal(err)
	}
	return p
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
	p := mustPattern(t, expr)
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

// TestMaxLen: the longest match read off the syntax tree, in bytes, or -1
// when a repetition is unbounded; the windows of findAll rest on it.
func TestMaxLen(t *testing.T) {
	for expr, want := range map[string]int{
		`abc`: 3, `a{2,5}`: 5, `[a-z]{1,64}@x`: 66, `é{3}`: 6, `(?i)k`: 3, `(?i)s`: 2, `.`: 4, `[^a]`: 4,
		`\b(?:ab|cde)\b`: 3, `x?y`: 2, `\x{fffd}`: 3, `(?:a{2}){3}`: 6, `^a$`: 1, `a+`: -1, `a*b`: -1,
		`a{3,}`: -1, `[^@]{1,64}`: 256, strings.Repeat(`.{1000}`, 16): 64000, strings.Repeat(`.{1000}`, 17): -1,
		DefaultPatterns[len(DefaultPatterns)-1]: -1,
	} {
		tree, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		if got := maxLen(tree); got != want {
			t.Errorf("maxLen(%q) = %d, want %d", expr, got, want)
		}
	}
}

// TestPrefilterWindows: a bounded pattern's regexp reads a window around
// each literal, not the whole run holding it, and still finds what the
// regexp finds on the whole text.
func TestPrefilterWindows(t *testing.T) {
	expr := `[a-z]{1,8}@[a-z]{1,4}\b`
	re := regexp.MustCompile(expr)
	p := mustPattern(t, expr)
	if p.max != 13 {
		t.Fatalf("max %d, want 13", p.max)
	}
	run := strings.Repeat("a", 1000)
	s := run + "@bc " + run + "@" + run + "@abcd" + run[:20] + "@x"
	matchesLikeRegexp(t, re, &p, s)
	read := 0
	p.regions(s, new([]int), func(lo, hi int) { read += hi - lo })
	// Each literal's window is at most 2*max+2 bytes; four literals.
	if limit := 4 * (2*p.max + 2); read > limit {
		t.Errorf("the regexp read %d bytes of %d, want at most %d", read, len(s), limit)
	}
}

// TestPrefilterHeadRun: a pattern opening with a class's run before a
// literal (the e-mail pattern's local part) has its regexp read a window
// at the literal, and the match still starts where the run does.
func TestPrefilterHeadRun(t *testing.T) {
	for _, tt := range []struct {
		expr string
		head bool
	}{
		{`[a-z.]+@[a-z]{1,3}\.io`, true},
		{`[a-z]+(?i:k)`, false}, // K's fold is in the class
		{`[a-z@]+@b`, false},
		{`[é]+@b`, false},
		{`[a-z]+@b+`, true}, // a head, but no bound: the run is read whole
	} {
		re := regexp.MustCompile(tt.expr)
		p := mustPattern(t, tt.expr)
		if (p.head != nil) != tt.head {
			t.Errorf("%q: head %v, want %v", tt.expr, p.head != nil, tt.head)
			continue
		}
		run := strings.Repeat("a", 5000)
		s := run + "@b.io " + run + "@bb.io@c.io x@d.io" + run + "@"
		matchesLikeRegexp(t, re, &p, s)
		read := 0
		p.regions(s, new([]int), func(lo, hi int) { read += hi - lo })
		if tt.head && p.max > 0 && read > 5*(2*p.max+2) {
			t.Errorf("%q: the regexp read %d bytes of %d", tt.expr, read, len(s))
		}
	}
}

// TestPrefilterAdversarialCases: texts written to make the prefilter find
// less than the regexp (a secret let through): each pair is a pattern and a
// text, held to FindAllStringSubmatchIndex on the whole text.
func TestPrefilterAdversarialCases(t *testing.T) {
	for _, c := range []struct{ expr, s string }{
		// A literal glued to a (?i) one is compared without case: its
		// non-ASCII capitals must keep their bytes (strings.ToLower made
		// "Éx" "éx", which "Éx" in the text never equals).
		{`É(?i:x)`, "Éx"},
		{`É(?i:key)=\w+`, "ÉKEY=abc"},
		{`İ(?i:x)`, "İx"},
		{`Ω(?i:pass)[:=]\S{1,8}`, "Ω PASS=a ΩPass:secret"},
		// \b and \B one byte inside a window's edge, in a long run.
		{`\b[a-c]{2,5}@`, strings.Repeat("a", 30) + "ab@ ab@ " + strings.Repeat("b", 6) + "@"},
		{`\B[a-c]{1,3}@\B`, strings.Repeat("c", 20) + "@x ca@_ a@"},
		// A window's edge inside a four-byte rune, the match before the
		// literal made of runes that an edge would cut into invalid bytes.
		{`[^a ]{1,3}@`, strings.Repeat("\U0001F600", 6) + "@ \xf0\x9f\x98@ é\U0001F600@"},
		{`\x{fffd}{1,2}@\w`, "\U0001F600\U0001F600@a \xff\xfe@b \ufffd@c"},
		// Overlapping and adjacent literals, alternations of different
		// literals where the leftmost match is the second one's.
		{`(?:sk-|k-a)[a-z]{2,4}`, "sk-ab k-abc sk-k-abcd"},
		{`x{1,4}AB|Bc{1,4}`, strings.Repeat("x", 12) + "ABcccc Bcc xAB"},
		{`a{1,3}@|@b{1,5}`, "aaaa@bbbbbb @bb a@@b"},
		// The cut head run: a match ending inside the next run of C, the
		// walk back stopping there.
		{`[a-z]+@[a-z]{0,3}`, "ab@cdef@gh@@x@"},
		{`[a-z]+@[a-z@]{1,4}`, "ab@cd@ef@gh@@x@y"},
		{`[a-z0-9]+-(?i:k)[0-9]{1,2}`, "ab-K12-k3-kk a-K1b-k22"},
		// ^ and $ with a bounded pattern, in lines.
		{`(?m)^sk-\w{4}$`, "sk-abcd\nx sk-abcd\nsk-abcde\nsk-abcd"},
		// The e-mail pattern on stretches of 29, 30 and 31 bytes, and
		// past 16 labels and 63 characters.
		{DefaultPatterns[len(DefaultPatterns)-1], "a@b.c.d.e.f.g.h.i.j.k.l.m.io a@b.c.d.e.f.g.h.i.j.k.l.m.n.io ab@b.c.d.e.f.g.h.i.j.k.l.m.n.io"},
		{DefaultPatterns[len(DefaultPatterns)-1], "x@" + strings.Repeat("b.", 16) + "io y@" + strings.Repeat("c", 64) + ".io " + strings.Repeat("d", 40) + "@" + strings.Repeat("e", 63) + ".io"},
	} {
		p := mustPattern(t, c.expr)
		matchesLikeRegexp(t, regexp.MustCompile(c.expr), &p, c.s)
	}
}
