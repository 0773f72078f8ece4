package main

import (
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// A pattern is a compiled regexp with the prefilter derived from it, so that
// the regexp runs only where a match could be (issue 15: Go's regexp scans
// the whole text once per unanchored pattern; with \b or (?i) in front it
// cannot even skip ahead to a literal prefix).
//
// Two facts are read off the pattern's syntax tree, for the default patterns
// and the operator's alike, so no list of literals is kept by hand:
//
//   - lits: strings one of which every match contains (the "AKIA" or "ASIA"
//     of the AWS pattern, the "@" of the e-mail one, "bearer" compared without
//     case). When none of them is in the text the pattern cannot match and is
//     skipped. Empty when no such literal is known.
//   - class: a set of bytes every match consists of, widened by the word
//     characters (so that \b and \B see the same thing at the edge of a run
//     as in the whole text). A match then lies inside one maximal run of such
//     bytes, and the regexp runs only on the runs holding a literal. Nil when
//     the pattern may match any byte (the PEM block's [\s\S]) or tests the
//     text's or a line's ends (^, $, \A, \z), which a run's edges would fake.
//   - need, for a pattern without a literal: a set of bytes one of which every
//     match holds (the digits of \d{5}), found with a table and used as a
//     literal would be.
//   - max, when every repetition of the pattern is bounded: the most bytes a
//     match can span ([a-z.]{1,64}@example\.com: 76). A match holding a
//     literal at i then lies within max bytes of i, so the regexp runs on a
//     window of the run around each literal rather than on the whole run
//     (regions says why a window finds what the run finds), and a long run
//     of class bytes with one literal costs a window, not the run. -1 when
//     a repetition is unbounded, as in every default pattern: their runs
//     are read whole (README, "Cost").
//
// The regexp still decides every match; the prefilter only chooses where it
// looks, and finds the same matches (TestPrefilterFindsWhatTheRegexpFinds).
type pattern struct {
	re      *regexp.Regexp
	lits    []literal
	anchors []anchor   // how lits are looked for
	need    *[256]bool // without lits: bytes one of which every match holds, or nil
	class   *[256]bool
	max     int // the most bytes a match spans, or -1 when unbounded
	// head, for a pattern C+L... (an ASCII class C repeated, then a literal
	// L whose first byte is not in C: the e-mail pattern's local part and
	// "@"): C. re is then the pattern with C+ cut to one C, and findAll
	// moves each match's start back over the run of C bytes before it (as
	// far as the previous match's end), which is where the whole pattern's
	// match starts: C+ cannot stop before L, whose first byte C lacks, and
	// the regexp takes the leftmost start. So the regexp reads a window
	// around the literal even when the run before it is long.
	head *[256]bool
	// For a bounded pattern, re is its relaxed form, every count made
	// unbounded (x{1,63} as x+), and runs on a stretch shorter than short;
	// bounded, the pattern itself, runs on longer ones, compiled on first
	// need. No repetition can pass its bound within so few bytes, so both
	// find the same matches there; the relaxed program is the smaller (the
	// e-mail pattern's: 14 instructions against 2,032), Go's regexp
	// backtracks on it instead of running its NFA, at half the fuel a
	// match, and compiling the large one costs 2.8 M fuel.
	bounded *lazyRegexp
	short   int
}

// A lazyRegexp is compiled on first use.
type lazyRegexp struct {
	once sync.Once
	expr string // which parses: it compiles
	re   *regexp.Regexp
}

func (l *lazyRegexp) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.expr) })
	return l.re
}

// parses reports whether expr parses with ncap groups: regexp.Compile
// then cannot fail, since what it adds to parsing does not.
func parses(expr string, ncap int) bool {
	t, err := syntax.Parse(expr, syntax.Perl)
	return err == nil && t.MaxCap() == ncap
}

// A literal is a string a match must contain; fold means compared with ASCII
// case folded (s is then lower case).
type literal struct {
	s    string
	fold bool
}

// maxLits bounds the alternatives a literal set may have; more and the
// prefilter costs more than it saves.
const maxLits = 16

// newPattern compiles expr and derives its prefilter. A pattern the
// analysis cannot read simply has none: it then runs as before, on the whole
// text. A pattern with a head run (pattern.head) has only its cut form
// compiled: its regexp is large (the e-mail pattern's counted domain), and
// compiling it costs the first invocation about 2.7 M fuel.
func newPattern(expr string) (pattern, error) {
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		re, err := regexp.Compile(expr) // its error, or no prefilter
		return pattern{re: re, max: -1}, err
	}
	p := pattern{max: -1}
	run := expr // the expression the regexp runs
	if h, rest := headRun(tree); h != nil {
		if cut := rest.String(); parses(cut, tree.MaxCap()) {
			p.head, tree, run = h, rest, cut
		}
	}
	p.max = maxLen(tree)
	if p.max > 0 {
		relaxed, short := relax(tree)
		if r := relaxed.String(); short > 0 && parses(r, tree.MaxCap()) {
			p.re, p.short = regexp.MustCompile(r), short // parses: compiles
			p.bounded = &lazyRegexp{expr: run}
		}
	}
	if p.re == nil {
		if p.re, err = regexp.Compile(run); err != nil {
			return pattern{}, err
		}
	}
	if i := analyze(tree); i.exact != nil {
		p.lits = i.exact
	} else {
		p.lits = i.required
	}
	for _, l := range p.lits {
		if l.s == "" {
			p.lits = nil
			break
		}
	}
	p.anchors = anchors(p.lits)
	if p.lits == nil {
		if n := needed(tree); n != nil && !all(n) {
			p.need = n
		}
	}
	var c [256]bool
	if bytesOf(tree, &c) && !all(&c) {
		for b := range 256 {
			if isWordByte(byte(b)) {
				c[b] = true
			}
		}
		p.class = &c
	}
	return p, nil
}

func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'A' <= b&^0x20 && b&^0x20 <= 'Z'
}

// info is what analyze knows of a subexpression: the set of strings it
// matches exactly (nil if unknown or too many), else a set of literals one of
// which every match contains (nil if none is known).
type info struct {
	exact    []literal
	required []literal
}

// lits returns the literals every match of the subexpression contains.
func (i info) lits() []literal {
	if i.exact != nil {
		return i.exact
	}
	return i.required
}

func analyze(re *syntax.Regexp) info {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return info{exact: []literal{{}}}
	case syntax.OpLiteral:
		fold := re.Flags&syntax.FoldCase != 0
		var b strings.Builder
		for _, r := range re.Rune {
			if r == utf8.RuneError {
				return info{} // the regexp reads every invalid byte as U+FFFD
			}
			if r >= utf8.RuneSelf {
				if fold {
					return info{}
				}
			} else if fold {
				// A fold whose orbit leaves ASCII ('k' and the Kelvin
				// sign, 's' and the long s) is beyond an ASCII compare.
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					if f >= utf8.RuneSelf {
						return info{}
					}
				}
				r = unicode.ToLower(r)
			}
			b.WriteRune(r)
		}
		return info{exact: []literal{{s: b.String(), fold: fold}}}
	case syntax.OpCharClass:
		// A small class is a set of one-character strings: gh[pousr]_.
		n := 0
		for i := 0; i < len(re.Rune); i += 2 {
			n += int(re.Rune[i+1]-re.Rune[i]) + 1
			if n > 8 {
				return info{}
			}
		}
		var out []literal
		for i := 0; i < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if r == utf8.RuneError {
					return info{}
				}
				out = append(out, literal{s: string(r)})
			}
		}
		return info{exact: out}
	case syntax.OpCapture:
		return analyze(re.Sub[0])
	case syntax.OpPlus:
		return info{required: analyze(re.Sub[0]).lits()}
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return info{required: analyze(re.Sub[0]).lits()}
		}
		return info{}
	case syntax.OpAlternate:
		var exact, required []literal
		allExact := true
		for _, sub := range re.Sub {
			i := analyze(sub)
			l := i.lits()
			if l == nil {
				return info{}
			}
			if i.exact == nil {
				allExact = false
			}
			for _, x := range l {
				if !slices.Contains(exact, x) { // sk- in two branches is one literal
					exact = append(exact, x)
				}
			}
			required = exact
		}
		if len(exact) > maxLits {
			return info{}
		}
		if allExact {
			return info{exact: exact}
		}
		return info{required: required}
	case syntax.OpConcat:
		cur := []literal{{}} // the exact set of the run of exact subexpressions so far
		var best []literal
		consider := func(l []literal) {
			if better(l, best) {
				best = l
			}
		}
		allExact := true
		for _, sub := range re.Sub {
			i := analyze(sub)
			if i.exact != nil && cur != nil {
				if next := cross(cur, i.exact); next != nil {
					cur = next
					continue
				}
			}
			allExact = false
			if cur != nil {
				consider(cur)
			}
			cur = i.exact
			consider(i.lits())
		}
		if allExact && cur != nil {
			return info{exact: cur}
		}
		if cur != nil {
			consider(cur)
		}
		return info{required: best}
	}
	return info{}
}

// cross is every a followed by every b, or nil when there would be too many.
func cross(a, b []literal) []literal {
	if len(a)*len(b) > maxLits {
		return nil
	}
	out := make([]literal, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			l := literal{s: x.s + y.s, fold: x.fold || y.fold}
			if l.fold {
				// A superset: the folded parts are ASCII (analyze checks),
				// and equalFoldASCII folds nothing else, so the rest keeps
				// its bytes (strings.ToLower made the "É" of É(?i:x) "é").
				l.s = lowerASCII(l.s)
			}
			out = append(out, l)
		}
	}
	return out
}

// lowerASCII returns s with its ASCII capitals made lower case, every
// other byte kept.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// better reports whether literal set a filters more than b: its shortest
// literal is longer, or as long with fewer alternatives.
func better(a, b []literal) bool {
	if a == nil {
		return false
	}
	if b == nil {
		return true
	}
	ma, mb := minLen(a), minLen(b)
	return ma > mb || ma == mb && len(a) < len(b)
}

func minLen(l []literal) int {
	m := -1
	for _, x := range l {
		if m < 0 || len(x.s) < m {
			m = len(x.s)
		}
	}
	return m
}

// bytesOf adds to c every byte a match of re can hold and reports false
// when re can match any byte or tests the ends of the text or of a line.
func bytesOf(re *syntax.Regexp, c *[256]bool) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpAnyChar, syntax.OpAnyCharNotNL, syntax.OpNoMatch:
		return false
	case syntax.OpEmptyMatch, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			addRune(c, r, re.Flags&syntax.FoldCase != 0)
		}
		return true
	case syntax.OpCharClass:
		for i := 0; i < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= utf8.RuneSelf {
				markNonASCII(c)
				hi = utf8.RuneSelf - 1
			}
			for r := lo; r <= hi; r++ {
				c[r] = true
			}
		}
		return true
	}
	for _, sub := range re.Sub {
		if !bytesOf(sub, c) {
			return false
		}
	}
	return true
}

func addRune(c *[256]bool, r rune, fold bool) {
	if r >= utf8.RuneSelf {
		markNonASCII(c)
		return
	}
	c[r] = true
	if fold {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f >= utf8.RuneSelf {
				markNonASCII(c)
			} else {
				c[f] = true
			}
		}
	}
}

// markNonASCII adds every byte of a multi-byte UTF-8 sequence (and so of
// any invalid byte, which the regexp reads as U+FFFD).
func markNonASCII(c *[256]bool) {
	for b := utf8.RuneSelf; b < 256; b++ {
		c[b] = true
	}
}

func all(c *[256]bool) bool {
	for _, ok := range c {
		if !ok {
			return false
		}
	}
	return true
}

// An anchor is how the pattern's literals are looked for: every literal
// whose rarest byte is b at offset off from its start is found by
// strings.IndexByte on b (an assembly loop even in wasm, reading a word at a
// time) and then compared in place. Looking for the rare byte rather than
// the first one (strings.Index's way) skips the hits of a common first
// letter: "sk-" is looked for at its '-', not at every 's' of the text.
type anchor struct {
	b    byte
	off  int
	lits []literal
}

// anchors groups lits by their rarest byte and its offset. A literal
// compared without case is looked for at both cases of its rarest letter.
func anchors(lits []literal) []anchor {
	var out []anchor
	add := func(b byte, off int, l literal) {
		for k := range out {
			if out[k].b == b && out[k].off == off {
				out[k].lits = append(out[k].lits, l)
				return
			}
		}
		out = append(out, anchor{b: b, off: off, lits: []literal{l}})
	}
	for _, l := range lits {
		off := 0
		for k := 1; k < len(l.s); k++ {
			if rarity(l.s[k]) < rarity(l.s[off]) {
				off = k
			}
		}
		b := l.s[off]
		add(b, off, l)
		if l.fold && 'a' <= b && b <= 'z' {
			add(b-'a'+'A', off, l)
		}
	}
	return out
}

// rarity ranks a byte by how often it appears in prose, code and logs:
// lower is rarer. A rough table is enough; it only chooses which byte
// strings.IndexByte stops at.
func rarity(b byte) int {
	switch {
	case b >= utf8.RuneSelf:
		return 5
	case b == ' ' || b == '\n':
		return 9
	case 'a' <= b && b <= 'z':
		if strings.IndexByte("jqxzkv", b) >= 0 {
			return 5
		}
		if strings.IndexByte("etaoinshr", b) >= 0 {
			return 8
		}
		return 7
	case 'A' <= b && b <= 'Z':
		if strings.IndexByte("AISTCOW", b) >= 0 {
			return 3
		}
		return 2
	case '0' <= b && b <= '9':
		return 3
	case b == '-':
		return 4
	case b == '.' || b == ',' || b == '\'' || b == '"':
		return 6
	}
	return 1
}

// scanner finds the pattern's literals in one text, each anchor's next
// occurrence remembered so that the text is read once per anchor.
type scanner struct {
	anchors []anchor
	need    *[256]bool // instead of anchors
	s       string
	next    []int // per anchor: the start of its next literal, -1 when none is left, -2 unknown
}

// index returns the first position at or after from where one of the
// pattern's literals begins, or -1.
func (sc *scanner) index(from int) int {
	if sc.need != nil {
		for i := from; i < len(sc.s); i++ {
			if sc.need[sc.s[i]] {
				return i
			}
		}
		return -1
	}
	best := -1
	for k := range sc.anchors {
		if sc.next[k] == -1 {
			continue
		}
		if sc.next[k] < from {
			sc.next[k] = sc.anchors[k].find(sc.s, from)
		}
		if i := sc.next[k]; i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// find returns the first start at or after from of one of a's literals in
// s, or -1.
func (a *anchor) find(s string, from int) int {
	for j := from + a.off; j < len(s); j++ {
		k := strings.IndexByte(s[j:], a.b)
		if k < 0 {
			return -1
		}
		j += k
		start := j - a.off
		for _, l := range a.lits {
			if start+len(l.s) > len(s) {
				continue
			}
			if t := s[start : start+len(l.s)]; t == l.s || l.fold && equalFoldASCII(t, l.s) {
				return start
			}
		}
	}
	return -1
}

// equalFoldASCII reports whether t equals lit, a lower-case literal, with
// ASCII letters compared without case (and nothing else folded: analyze
// keeps literals whose case has a non-ASCII form out of the prefilter).
func equalFoldASCII(t, lit string) bool {
	for i := 0; i < len(lit); i++ {
		c := t[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lit[i] {
			return false
		}
	}
	return true
}

// findAll calls fn with each of the pattern's matches in s, as
// FindAllStringSubmatchIndex would return them, offset by off. scratch is
// reused between calls.
func (p *pattern) findAll(s string, scratch *[]int, fn func(m []int, off int)) {
	if p.head == nil {
		p.regions(s, scratch, func(lo, hi int) { p.each(s[lo:hi], lo, fn) })
		return
	}
	prev := 0 // the end of the last match: the next starts there at the earliest
	p.regions(s, scratch, func(lo, hi int) {
		p.each(s[lo:hi], lo, func(m []int, off int) {
			for k, v := range m {
				if v >= 0 {
					m[k] = v + off
				}
			}
			for m[0] > prev && p.head[s[m[0]-1]] {
				m[0]--
			}
			prev = m[1]
			fn(m, 0)
		})
	})
}

// headRun returns, for a pattern C+L... (see pattern.head), C and the
// pattern with C+ cut to one C; else nil.
func headRun(re *syntax.Regexp) (*[256]bool, *syntax.Regexp) {
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 {
		return nil, nil
	}
	plus, lit := re.Sub[0], re.Sub[1]
	if plus.Op != syntax.OpPlus || plus.Sub[0].Op != syntax.OpCharClass || lit.Op != syntax.OpLiteral || len(lit.Rune) == 0 {
		return nil, nil
	}
	var c [256]bool
	class := plus.Sub[0]
	for i := 0; i < len(class.Rune); i += 2 {
		if class.Rune[i+1] >= utf8.RuneSelf {
			return nil, nil
		}
		for r := class.Rune[i]; r <= class.Rune[i+1]; r++ {
			c[r] = true
		}
	}
	var first [256]bool
	addRune(&first, lit.Rune[0], lit.Flags&syntax.FoldCase != 0)
	for b, ok := range first {
		if ok && c[b] {
			return nil, nil
		}
	}
	cut := *re
	cut.Sub = append([]*syntax.Regexp{class}, re.Sub[1:]...)
	return &c, &cut
}

// regions calls read with each stretch s[lo:hi] of s the regexp must read,
// in order, disjoint.
func (p *pattern) regions(s string, scratch *[]int, read func(lo, hi int)) {
	if p.lits == nil && p.need == nil {
		read(0, len(s))
		return
	}
	if cap(*scratch) < len(p.anchors) {
		*scratch = make([]int, len(p.anchors))
	}
	next := (*scratch)[:len(p.anchors)]
	for k := range next {
		next[k] = -2
	}
	sc := scanner{anchors: p.anchors, need: p.need, s: s, next: next}
	i := sc.index(0)
	if i < 0 {
		return
	}
	if p.class == nil {
		read(0, len(s))
		return
	}
	last := 0 // the end of the last run read
	for i >= 0 {
		if !p.class[s[i]] {
			// A literal compared without case may be found in a case
			// the pattern does not take ((?i:b)x against "BX"); a real
			// match's literal consists of class bytes.
			i = sc.index(i + 1)
			continue
		}
		// The run of class bytes around the literal.
		start, end := i, i
		for start > last && p.class[s[start-1]] {
			start--
		}
		for end < len(s) && p.class[s[end]] {
			end++
		}
		if p.max < 0 {
			read(start, end)
		} else {
			// A window per literal, merged where they overlap. A match
			// holding the literal at j (of length at least 1) lies in
			// [j+1-max, j+max): inside the window [j-max-1, j+max+1)
			// with a byte to spare on each side. So a match of the
			// window's text starts past its first byte and ends before
			// its last: what \b or \B reads at either of its ends is a
			// real byte of s, as in the whole run. And every match of the
			// run holds a literal of it, so lies in that literal's
			// window. The regexp therefore finds the same matches, in the
			// same order, at each start of a window as in the run; at a
			// window's edge that is the run's own edge, as the run did.
			lo, hi := max(start, i-p.max-1), min(end, i+p.max+1)
			for {
				j := sc.index(i + 1)
				if j < 0 || j >= end {
					break
				}
				if l := max(start, j-p.max-1); l > hi {
					read(lo, hi)
					lo = l
				}
				hi, i = min(end, j+p.max+1), j
			}
			read(lo, hi)
		}
		if end >= len(s) {
			return
		}
		last = end
		i = sc.index(end)
	}
}

// maxBounded is the largest match span maxLen reports; a pattern allowing
// more is treated as unbounded, its windows no smaller than its runs.
const maxBounded = 1 << 16

// maxLen returns the most bytes a match of re can span, or -1 when a
// repetition is unbounded or the bound passes maxBounded. A rune counts
// its longest UTF-8 form (of its case orbit when folded; an invalid byte,
// which the regexp reads as U+FFFD, is one byte, shorter than that form).
func maxLen(re *syntax.Regexp) int {
	n := 0
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			w := runeWidth(r)
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					w = max(w, runeWidth(f))
				}
			}
			n += w
		}
	case syntax.OpCharClass:
		if len(re.Rune) > 0 {
			n = runeWidth(re.Rune[len(re.Rune)-1]) // the ranges are sorted
		}
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		n = utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		n = maxLen(re.Sub[0])
	case syntax.OpRepeat:
		if re.Max < 0 {
			return -1
		}
		if n = maxLen(re.Sub[0]); n < 0 {
			return -1
		}
		n *= re.Max
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			m := maxLen(sub)
			if m < 0 {
				return -1
			}
			n += m
			if n > maxBounded {
				return -1
			}
		}
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			m := maxLen(sub)
			if m < 0 {
				return -1
			}
			n = max(n, m)
		}
	default: // star, plus, no match
		return -1
	}
	if n > maxBounded {
		return -1
	}
	return n
}

// runeWidth is the length of r's UTF-8 form (3 for U+FFFD, which also
// stands for a single invalid byte).
func runeWidth(r rune) int {
	if w := utf8.RuneLen(r); w > 0 {
		return w
	}
	return utf8.UTFMax
}

// relax returns re with every bounded count made unbounded, and the
// fewest bytes in which one of those counts could pass its bound (0 when
// one's body may match nothing, which a relaxed loop treats differently).
func relax(re *syntax.Regexp) (*syntax.Regexp, int) {
	out := *re
	short := math.MaxInt
	if re.Op == syntax.OpRepeat && re.Max >= 0 {
		short = (re.Max + 1) * minSpan(re.Sub[0])
		out.Max = -1
	}
	out.Sub = make([]*syntax.Regexp, len(re.Sub))
	for i, sub := range re.Sub {
		var n int
		out.Sub[i], n = relax(sub)
		short = min(short, n)
	}
	return &out, short
}

// minSpan returns the fewest bytes a match of re spans.
func minSpan(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune) // an invalid byte matches U+FFFD: one byte a rune at least
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minSpan(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minSpan(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, sub := range re.Sub {
			n += minSpan(sub)
		}
		return n
	case syntax.OpAlternate:
		n := math.MaxInt
		for _, sub := range re.Sub {
			n = min(n, minSpan(sub))
		}
		return n
	}
	return 0
}

func (p *pattern) each(s string, off int, fn func(m []int, off int)) {
	re := p.re
	if p.bounded != nil && len(s) >= p.short {
		re = p.bounded.get()
	}
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		fn(m, off)
	}
}

// needed returns a set of bytes one of which every match of re holds, or
// nil if none is known: a literal's first byte (both cases when folded), a
// class's members (every byte from 0x80 up for a member beyond ASCII, which
// covers invalid bytes read as U+FFFD), the smallest set of a
// concatenation, the union of an alternation's.
func needed(re *syntax.Regexp) *[256]bool {
	var c [256]bool
	switch re.Op {
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return nil
		}
		addRune(&c, re.Rune[0], re.Flags&syntax.FoldCase != 0)
		return &c
	case syntax.OpCharClass:
		for i := 0; i < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= utf8.RuneSelf {
				markNonASCII(&c)
				hi = utf8.RuneSelf - 1
			}
			for r := lo; r <= hi; r++ {
				c[r] = true
			}
		}
		return &c
	case syntax.OpCapture, syntax.OpPlus:
		return needed(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return needed(re.Sub[0])
		}
	case syntax.OpConcat:
		var best *[256]bool
		bestN := 0
		for _, sub := range re.Sub {
			if n := needed(sub); n != nil {
				if k := count(n); best == nil || k < bestN {
					best, bestN = n, k
				}
			}
		}
		return best
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			n := needed(sub)
			if n == nil {
				return nil
			}
			for b, ok := range n {
				c[b] = c[b] || ok
			}
		}
		return &c
	}
	return nil
}

func count(c *[256]bool) int {
	n := 0
	for _, ok := range c {
		if ok {
			n++
		}
	}
	return n
}
