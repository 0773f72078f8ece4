/* wasmhooks_regex.h: a small regular-expression engine for C hooks, with
 * the syntax and the leftmost-first semantics of Go's regexp (RE2) for the
 * subset hooks use. Include it after wasmhooks.h (it allocates with
 * wh_alloc, so a compiled pattern lives until the end of the invocation;
 * compile again, or keep your own copy, per invocation).
 *
 * Supported: literals; . ; [...] and [^...] with ranges and \d \w \s \D \W
 * \S inside, non-ASCII members and ranges included ([é-ë], [а-я],
 * [a-é]; a negated class matches any character not in it, one whole UTF-8
 * character at a time); \d \w \s \D \W \S \b \B \A \z ^ $; escapes \n \t
 * \r \f \v \a \xHH \x{H...} and escaped punctuation; groups (...), (?:...),
 * (?P<name>...), (?<name>...); flags (?i) (?s) (?m) (?U) and (?flags:...);
 * quantifiers * + ? {n} {n,} {n,m} (n, m <= 1000) and their lazy forms. A
 * group named "secret" is captured (wh_re_match's sub; of two, the leftmost,
 * as Go's SubexpIndex takes). Anything else (\p{..}, [[:alpha:]]) is
 * refused at compile time with a message, as is a class of more than
 * WH_RE_CLASS_RANGES (64) ranges of non-ASCII characters, or a pattern of
 * more than WH_RE_MAX_RANGES (512) in all.
 * Under (?i) a literal, a class's members and \w \W fold by Unicode simple
 * case folding, as Go's regexp: (?i)k matches U+212A KELVIN SIGN, (?i)\xc3\xa9
 * (e acute) its capital, (?i)[^a-z] not U+017F LONG S (wasmhooks_fold.h,
 * generated from Go's unicode package by sdk/internal/foldgen).
 *
 * Matching is byte-wise over UTF-8 with whole characters for ., classes and
 * their negations, by backtracking in priority order (so the first match
 * found is the leftmost-first match Go returns). The worst case is
 * polynomial in the text, bounded by the host's fuel like any hook's work;
 * a first-byte set and the bytes every match must contain skip most start
 * positions.
 */
#ifndef WASMHOOKS_REGEX_H
#define WASMHOOKS_REGEX_H

#include "wasmhooks.h"
#include "wasmhooks_fold.h"

enum { WH_RI_BYTE, WH_RI_CLASS, WH_RI_ANY, WH_RI_ANYNL, WH_RI_ASSERT, WH_RI_SPLIT, WH_RI_JMP, WH_RI_SAVE, WH_RI_CHECK, WH_RI_MATCH };
enum { WH_RA_BOT, WH_RA_EOT, WH_RA_BOL, WH_RA_EOL, WH_RA_WORD, WH_RA_NOWORD };

/* A class: the ASCII members in bits; a non-ASCII character r is a member
 * when nonascii differs from whether r lies in one of the nr ranges
 * r[2i]..r[2i+1] (sorted, disjoint, not adjacent). */
typedef struct { uint32_t bits[4]; uint8_t nonascii; uint16_t nr; uint32_t *r; } wh_re_class;
typedef struct { uint8_t op; uint8_t arg; uint16_t pad; int32_t x, y; } wh_re_inst;

/* AST */
enum { WH_RN_EMPTY, WH_RN_BYTE, WH_RN_CLASS, WH_RN_ANY, WH_RN_ASSERT, WH_RN_CAT, WH_RN_ALT, WH_RN_REP, WH_RN_GROUP };
typedef struct { uint8_t type, arg, greedy, cap; int32_t first, next, min, max, cls; } wh_re_node;

typedef struct {
	wh_re_inst *prog;
	int nprog, cprog;
	wh_re_class *cls;
	int ncls, ccls;
	wh_re_node *nodes;
	int nnodes, cnodes;
	int nslots;            /* 4 capture slots (0,1 whole; 2,3 secret) + loop slots */
	int has_secret;
	uint8_t first[256];    /* bytes a match can start with */
	int first_any;         /* 1: no first-byte filter */
	uint8_t firstb[2];     /* the first-byte set when it is one or two ASCII bytes */
	int nfirstb;           /* 0: use first[] */
	uint8_t required[16];  /* bytes every match contains */
	int nrequired;
	int nranges;           /* the classes' non-ASCII ranges, at most WH_RE_MAX_RANGES */
	const char *err;
} wh_re;

typedef struct { const char *s, *end; int flags; wh_re *re; } wh__rp;
WH_API int wh__isword(int c);
#define WH_RF_I 1
#define WH_RF_S 2
#define WH_RF_M 4
#define WH_RF_U 8
#define WH_RE_MAX_PROG 40000
#define WH_RE_MAX_NODES 4000
/* A class holds at most 64 ranges of non-ASCII characters (as it is read,
 * folds included), a pattern 512 in all: past either it is refused. */
#define WH_RE_CLASS_RANGES 64
#define WH_RE_MAX_RANGES 512

/* wh__grow makes room for one more item in an array of n items of size sz
 * at items with capacity *cap (first at the start, then doubled), holding at
 * most max: it returns the array, moved when it grew, or NULL with re->err
 * set. */
WH_API void *wh__grow(wh_re *re, void *items, int n, int *cap, size_t sz, int first, int max) {
	if (n >= max) { re->err = "expression too large"; return NULL; }
	if (n < *cap) return items;
	int c = *cap ? *cap * 2 : first;
	void *grown = wh_alloc(sz * (size_t)c);
	if (!grown) { re->err = "out of memory"; return NULL; }
	if (n) memcpy(grown, items, sz * (size_t)n);
	*cap = c;
	return grown;
}

WH_API int wh__rnode(wh__rp *p, int type) {
	wh_re *re = p->re;
	wh_re_node *nodes = (wh_re_node *)wh__grow(re, re->nodes, re->nnodes, &re->cnodes, sizeof *nodes, 32, WH_RE_MAX_NODES);
	if (!nodes) return -1;
	re->nodes = nodes;
	wh_re_node *n = &re->nodes[re->nnodes];
	memset(n, 0, sizeof *n);
	n->type = (uint8_t)type;
	n->first = n->next = -1;
	return re->nnodes++;
}
WH_API int wh__rclass(wh__rp *p) {
	wh_re *re = p->re;
	if (re->ncls == re->ccls) {
		int c = re->ccls ? re->ccls * 2 : 16;
		wh_re_class *n = (wh_re_class *)wh_alloc(sizeof *n * (size_t)c);
		if (!n) { re->err = "out of memory"; return -1; }
		if (re->ncls) memcpy(n, re->cls, sizeof *n * (size_t)re->ncls);
		re->cls = n;
		re->ccls = c;
	}
	memset(&re->cls[re->ncls], 0, sizeof(wh_re_class));
	return re->ncls++;
}
WH_API void wh__cset(wh_re_class *c, int b) { c->bits[b >> 5] |= 1u << (b & 31); }
WH_API int wh__ctest(const wh_re_class *c, int b) { return (c->bits[b >> 5] >> (b & 31)) & 1; }
/* wh__cin reports whether the non-ASCII character r lies in one of c's
 * ranges. */
WH_API int wh__cin(const wh_re_class *c, uint32_t r) {
	int i = 0, j = c->nr;
	while (i < j) {
		int h = (i + j) / 2;
		if (c->r[2 * h + 1] < r) i = h + 1; else j = h;
	}
	return i < c->nr && c->r[2 * i] <= r;
}
/* A class as it is read: its ranges in r (c.r points there), and, once a
 * \W \S \D was read, the non-ASCII characters every one of them leaves out
 * (ex: the folds \W leaves out under (?i)); the class is then every
 * non-ASCII character but those of ex in none of the ranges. */
typedef struct { wh_re_class c; uint32_t r[2 * WH_RE_CLASS_RANGES]; int perlneg, nex, over; uint32_t ex[4]; } wh__cb;
/* wh__cadd makes the characters lo..hi members of b. */
WH_API void wh__cadd(wh__cb *b, uint32_t lo, uint32_t hi) {
	for (; lo <= hi && lo < 0x80; lo++) wh__cset(&b->c, (int)lo);
	if (lo > hi) return;
	uint32_t *r = b->r;
	int n = b->c.nr, i = 0;
	while (i < n && r[2 * i + 1] + 1 < lo) i++; /* the first range not wholly before lo-1 */
	int j = i;
	while (j < n && r[2 * j] <= hi + 1) { /* the ranges lo..hi touches merge into it */
		if (r[2 * j] < lo) lo = r[2 * j];
		if (r[2 * j + 1] > hi) hi = r[2 * j + 1];
		j++;
	}
	if (i == j && n == WH_RE_CLASS_RANGES) { b->over = 1; return; }
	int d = 1 - (j - i); /* ranges i..j-1 become one */
	memmove(r + 2 * (j + d), r + 2 * j, sizeof *r * 2 * (size_t)(n - j));
	r[2 * i] = lo;
	r[2 * i + 1] = hi;
	b->c.nr = (uint16_t)(n + d);
}
/* wh__crange makes the characters lo..hi members of b, and under fold
 * their whole orbits of Unicode simple case folding, as Go's regexp does
 * ((?i)k matches U+212A KELVIN SIGN): the runes with an orbit are those of
 * the fold table's ranges. */
WH_API __attribute__((noinline)) void wh__crange(wh__cb *b, uint32_t lo, uint32_t hi, int fold) {
	wh__cadd(b, lo, hi);
	if (!fold) return;
	for (size_t i = 0; i < sizeof wh__fold_ranges / sizeof *wh__fold_ranges; i++) {
		uint32_t flo = wh__fold_ranges[i] >> 7, fhi = flo + (wh__fold_ranges[i] & 127);
		for (uint32_t r = flo < lo ? lo : flo; r <= fhi && r <= hi; r++)
			for (uint32_t f = wh__fold_next(r); f != r; f = wh__fold_next(f)) wh__cadd(b, f, f);
	}
}
/* wh__cperl adds \d \w \s (or their negations) to b, folded as Go folds
 * them under (?i) ((?i)\w holds U+212A, (?i)\W does not); 0 if e is not
 * one. */
WH_API int wh__cperl(wh__cb *b, char e, int fold) {
	wh__cb t;
	t.c = (wh_re_class){{0}, 0, 0, t.r};
	t.over = 0;
	int neg = e >= 'A' && e <= 'Z';
	switch (e | 32) {
	case 'd': wh__crange(&t, '0', '9', fold); break;
	case 'w': wh__crange(&t, '0', '9', fold); wh__crange(&t, 'a', 'z', fold); wh__crange(&t, 'A', 'Z', fold); wh__cset(&t.c, '_'); break;
	case 's': wh__cset(&t.c, '\t'); wh__cset(&t.c, '\n'); wh__cset(&t.c, '\f'); wh__cset(&t.c, '\r'); wh__cset(&t.c, ' '); break;
	default: return 0;
	}
	for (int i = 0; i < 4; i++) b->c.bits[i] |= neg ? ~t.c.bits[i] : t.c.bits[i];
	for (int i = 0; i < t.c.nr; i++) /* the non-ASCII folds of \w: U+017F and U+212A */
		if (!neg) wh__cadd(b, t.r[2 * i], t.r[2 * i + 1]);
	if (neg) { /* the characters left out: t's, and those of every earlier one */
		uint32_t ex[4];
		int n = 0;
		for (int i = 0; i < t.c.nr; i++) {
			uint32_t r = t.r[2 * i];
			int kept = !b->perlneg;
			for (int k = 0; k < b->nex; k++) kept |= b->ex[k] == r;
			if (kept && n < 4) ex[n++] = r;
		}
		memcpy(b->ex, ex, sizeof ex);
		b->nex = n;
		b->perlneg = 1;
	}
	return 1;
}
/* wh__cdone stores b (negated when neg) as the pattern's next class and
 * returns its node, or -1 with the error set. */
WH_API int wh__cdone(wh__rp *p, wh__cb *b, int neg) {
	wh_re *re = p->re;
	if (b->over) { re->err = "too many non-ASCII ranges in a character class"; return -1; }
	if (b->perlneg) { /* every non-ASCII character but ex's in no range */
		uint32_t out[8];
		int n = 0;
		for (int k = 0; k < b->nex; k++)
			if (!wh__cin(&b->c, b->ex[k])) out[2 * n] = out[2 * n + 1] = b->ex[k], n++;
		memcpy(b->r, out, sizeof *out * 2 * (size_t)n);
		b->c.nr = (uint16_t)n;
		b->c.nonascii = 1;
	}
	if (neg) { for (int i = 0; i < 4; i++) b->c.bits[i] = ~b->c.bits[i]; b->c.nonascii = !b->c.nonascii; }
	if (re->nranges + b->c.nr > WH_RE_MAX_RANGES) { re->err = "too many non-ASCII ranges in character classes"; return -1; }
	int k = wh__rclass(p);
	if (k < 0) return -1;
	wh_re_class *c = &re->cls[k];
	*c = b->c;
	c->r = NULL;
	if (c->nr) {
		if (!(c->r = (uint32_t *)wh_alloc(sizeof *c->r * 2 * c->nr))) { re->err = "out of memory"; return -1; }
		memcpy(c->r, b->r, sizeof *c->r * 2 * c->nr);
		re->nranges += c->nr;
	}
	int n = wh__rnode(p, WH_RN_CLASS);
	if (n >= 0) re->nodes[n].cls = k;
	return n;
}
WH_API void wh__cinit(wh__cb *b) {
	memset(b, 0, sizeof *b);
	b->c.r = b->r;
}
/* wh__rescape reads the escape at p->s (after the backslash) as a literal
 * byte; -1 on error, -2 if it is not a literal escape. */
WH_API int wh__rescape(wh__rp *p) {
	if (p->s >= p->end) { p->re->err = "trailing backslash at end of expression"; return -1; }
	char e = *p->s++;
	switch (e) {
	case 'n': return '\n';
	case 't': return '\t';
	case 'r': return '\r';
	case 'f': return '\f';
	case 'v': return '\v';
	case 'a': return 7;
	case 'x': { /* \xHH or \x{H...}: the character U+H... */
		int v = 0, braces = p->s < p->end && *p->s == '{', nd = 0;
		p->s += braces;
		while (p->s < p->end && wh__hex(*p->s) >= 0 && (braces || nd < 2) && v <= 0x10FFFF) v = v * 16 + wh__hex(*p->s++), nd++;
		if (braces && (p->s >= p->end || *p->s++ != '}')) nd = 0;
		if (nd && (braces || nd == 2) && v <= 0x10FFFF) return v;
		p->re->err = "invalid escape sequence";
		return -1;
	}
	}
	if ((unsigned char)e < 0x80 && !((e >= '0' && e <= '9') || (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))) return (unsigned char)e;
	p->s--;
	return -2;
}
/* wh__rclassch reads one member of a class at p->s: its character, or -1
 * with the error set, or -2 after a \d \w \s (added to b). */
WH_API int wh__rclassch(wh__rp *p, wh__cb *b) {
	unsigned char ch = (unsigned char)*p->s++;
	if (ch >= 0x80) {
		uint32_t r;
		size_t l = wh_utf8_len((const unsigned char *)p->s - 1, (size_t)(p->end - p->s + 1), &r);
		if (!l) { p->re->err = "invalid UTF-8"; return -1; }
		p->s += l - 1;
		return (int)r;
	}
	if (ch != '\\') return ch;
	if (b && p->s < p->end && wh__cperl(b, *p->s, p->flags & WH_RF_I)) { p->s++; return -2; }
	int lo = wh__rescape(p);
	if (lo == -2) p->re->err = "invalid escape sequence";
	return lo < 0 ? -1 : lo;
}
WH_API int wh__rparse_class(wh__rp *p) {
	wh__cb b;
	wh__cinit(&b);
	int neg = 0, fold = p->flags & WH_RF_I;
	if (p->s < p->end && *p->s == '^') { neg = 1; p->s++; }
	int firstch = 1;
	for (;;) {
		if (p->s >= p->end) { p->re->err = "missing closing ]"; return -1; }
		char ch = *p->s;
		if (ch == ']' && !firstch) { p->s++; break; }
		firstch = 0;
		if (ch == '[' && p->s + 1 < p->end && p->s[1] == ':') { p->re->err = "[:class:] is not supported"; return -1; }
		int lo = wh__rclassch(p, &b);
		if (lo == -2) continue;
		if (lo < 0) return -1;
		int hi = lo;
		if (p->s + 1 < p->end && *p->s == '-' && p->s[1] != ']') {
			p->s++;
			if ((hi = wh__rclassch(p, NULL)) < 0) return -1;
			if (hi < lo) { p->re->err = "invalid character class range"; return -1; }
		}
		wh__crange(&b, (uint32_t)lo, (uint32_t)hi, fold);
	}
	return wh__cdone(p, &b, neg);
}
/* wh__rliteral parses the literal byte b, or the character at p->s - 1 (b
 * its first byte), or the character b of an escape (esc), as one class:
 * under (?i) when it has a fold orbit, when it has several bytes and a
 * repetition follows (so é+ repeats é, not its last byte), and when it is
 * a non-ASCII escape (\x{e9}). */
WH_API int wh__rliteral(wh__rp *p, int b, int esc) {
	int fold = p->flags & WH_RF_I;
	uint32_t r = (uint32_t)b;
	size_t l = 1;
	if (b >= 0x80 && !esc) {
		l = wh_utf8_len((const unsigned char *)p->s - 1, (size_t)(p->end - p->s + 1), &r);
		if (!l) l = 1, r = (uint32_t)b;
	}
	int rep = l > 1 && p->s + l - 1 < p->end && memchr("*+?{", p->s[l - 1], 4);
	if (rep || (esc && b >= 0x80) || (fold && wh__fold_next(r) != r)) {
		p->s += l - 1;
		wh__cb c;
		wh__cinit(&c);
		wh__crange(&c, r, r, fold);
		return wh__cdone(p, &c, 0);
	}
	int n = wh__rnode(p, WH_RN_BYTE);
	if (n >= 0) p->re->nodes[n].arg = (uint8_t)b;
	return n;
}
static int wh__ralt(wh__rp *p, int depth);
WH_API int wh__ratom(wh__rp *p, int depth) {
	char ch = *p->s++;
	int n;
	switch (ch) {
	case '(': {
		int cap = 0, saved = p->flags;
		if (p->s < p->end && *p->s == '?') {
			p->s++;
			if (p->s < p->end && (*p->s == 'P' || *p->s == '<')) {
				if (*p->s == 'P') p->s++;
				if (p->s >= p->end || *p->s != '<') { p->re->err = "invalid named capture"; return -1; }
				const char *name = ++p->s;
				/* A name is word characters, as Go's. */
				while (p->s < p->end && wh__isword((unsigned char)*p->s)) p->s++;
				if (p->s >= p->end || *p->s != '>' || p->s == name) { p->re->err = "invalid named capture"; return -1; }
				if (p->s - name == 6 && !memcmp(name, "secret", 6)) {
					/* Go accepts a name twice and its SubexpIndex takes the
					 * leftmost: a later "secret" is a plain group. */
					if (!p->re->has_secret) p->re->has_secret = cap = 1;
				}
				p->s++;
			} else {
				int neg = 0, any = 0;
				for (;;) {
					if (p->s >= p->end) { p->re->err = "missing closing )"; return -1; }
					char f = *p->s++;
					if (f == '-') { if (neg) goto badflags; neg = 1; any = 0; continue; }
					int bit = f == 'i' ? WH_RF_I : f == 's' ? WH_RF_S : f == 'm' ? WH_RF_M : f == 'U' ? WH_RF_U : 0;
					if (bit) { any = 1; if (neg) p->flags &= ~bit; else p->flags |= bit; continue; }
					if ((f == ')' || f == ':') && (any || !neg)) {
						if (f == ')') return wh__rnode(p, WH_RN_EMPTY); /* flags stay until the group's end */
						break;
					}
				badflags:
					p->re->err = "invalid or unsupported Perl syntax";
					return -1;
				}
			}
		}
		int inner = wh__ralt(p, depth + 1);
		if (inner < 0) return -1;
		if (p->s >= p->end || *p->s != ')') { p->re->err = "missing closing )"; return -1; }
		p->s++;
		p->flags = saved;
		n = wh__rnode(p, WH_RN_GROUP);
		if (n < 0) return -1;
		p->re->nodes[n].first = inner;
		p->re->nodes[n].cap = (uint8_t)cap;
		return n;
	}
	case ')': p->re->err = "unexpected )"; return -1;
	case '[': return wh__rparse_class(p);
	case '.':
		n = wh__rnode(p, WH_RN_ANY);
		if (n >= 0) p->re->nodes[n].arg = (p->flags & WH_RF_S) ? 1 : 0;
		return n;
	case '^':
	case '$':
		n = wh__rnode(p, WH_RN_ASSERT);
		if (n >= 0) p->re->nodes[n].arg = ch == '^' ? ((p->flags & WH_RF_M) ? WH_RA_BOL : WH_RA_BOT) : ((p->flags & WH_RF_M) ? WH_RA_EOL : WH_RA_EOT);
		return n;
	case '*': case '+': case '?':
		p->re->err = "missing argument to repetition operator";
		return -1;
	case '\\': {
		if (p->s < p->end) {
			char e = *p->s;
			int a = e == 'b' ? WH_RA_WORD : e == 'B' ? WH_RA_NOWORD : e == 'A' ? WH_RA_BOT : e == 'z' ? WH_RA_EOT : -1;
			if (a >= 0) {
				p->s++;
				n = wh__rnode(p, WH_RN_ASSERT);
				if (n >= 0) p->re->nodes[n].arg = (uint8_t)a;
				return n;
			}
			if (strchr("dwsDWS", e)) {
				p->s++;
				wh__cb c;
				wh__cinit(&c);
				wh__cperl(&c, e, p->flags & WH_RF_I);
				return wh__cdone(p, &c, 0);
			}
		}
		int b = wh__rescape(p);
		if (b == -2) { p->re->err = "invalid or unsupported escape sequence"; return -1; }
		if (b < 0) return -1;
		return wh__rliteral(p, b, 1);
	}
	}
	return wh__rliteral(p, (unsigned char)ch, 0);
}
/* wh__rcount parses {n}, {n,} or {n,m} at p->s (after '{'); 0 if it is not
 * a repetition (then '{' is a literal), 1 if it is, -1 on error. */
WH_API int wh__rcount(wh__rp *p, int *min, int *max) {
	const char *s = p->s;
	int a = 0, b, digits = 0;
	while (s < p->end && *s >= '0' && *s <= '9') { if (a <= 100000) a = a * 10 + (*s - '0'); s++; digits++; }
	if (!digits) return 0;
	b = a;
	if (s < p->end && *s == ',') {
		s++;
		if (s < p->end && *s >= '0' && *s <= '9') {
			b = 0;
			while (s < p->end && *s >= '0' && *s <= '9') { if (b <= 100000) b = b * 10 + (*s - '0'); s++; }
		} else b = -1;
	}
	if (s >= p->end || *s != '}') return 0;
	p->s = s + 1;
	if (a > 1000 || b > 1000 || (b >= 0 && b < a)) { p->re->err = "invalid repeat count"; return -1; }
	*min = a;
	*max = b;
	return 1;
}
WH_API int wh__rrepeat(wh__rp *p, int depth) {
	int atom = wh__ratom(p, depth);
	if (atom < 0) return -1;
	int reps = 0;
	while (p->s < p->end) {
		int min, max;
		char q = *p->s;
		if (q == '*') { min = 0; max = -1; p->s++; }
		else if (q == '+') { min = 1; max = -1; p->s++; }
		else if (q == '?') { min = 0; max = 1; p->s++; }
		else if (q == '{') {
			p->s++;
			int r = wh__rcount(p, &min, &max);
			if (r < 0) return -1;
			if (r == 0) { p->s--; break; }
		} else break;
		if (reps++ || p->re->nodes[atom].type == WH_RN_EMPTY) { p->re->err = reps > 1 ? "invalid nested repetition operator" : "missing argument to repetition operator"; return -1; }
		int greedy = !(p->flags & WH_RF_U);
		if (p->s < p->end && *p->s == '?') { greedy = !greedy; p->s++; }
		int n = wh__rnode(p, WH_RN_REP);
		if (n < 0) return -1;
		p->re->nodes[n].first = atom;
		p->re->nodes[n].min = min;
		p->re->nodes[n].max = max;
		p->re->nodes[n].greedy = (uint8_t)greedy;
		atom = n;
	}
	return atom;
}
WH_API int wh__rcat(wh__rp *p, int depth) {
	int n = wh__rnode(p, WH_RN_CAT), last = -1;
	if (n < 0) return -1;
	while (p->s < p->end && *p->s != '|' && *p->s != ')') {
		int c = wh__rrepeat(p, depth);
		if (c < 0) return -1;
		if (last < 0) p->re->nodes[n].first = c; else p->re->nodes[last].next = c;
		last = c;
	}
	return n;
}
WH_API int wh__ralt(wh__rp *p, int depth) {
	if (depth > 100) { p->re->err = "expression nests too deeply"; return -1; }
	int first = wh__rcat(p, depth);
	if (first < 0 || p->s >= p->end || *p->s != '|') return first;
	int n = wh__rnode(p, WH_RN_ALT), last = first;
	if (n < 0) return -1;
	p->re->nodes[n].first = first;
	while (p->s < p->end && *p->s == '|') {
		p->s++;
		int c = wh__rcat(p, depth);
		if (c < 0) return -1;
		p->re->nodes[last].next = c;
		last = c;
	}
	return n;
}

WH_API int wh__remit(wh_re *re, int op, int arg, int x, int y) {
	wh_re_inst *prog = (wh_re_inst *)wh__grow(re, re->prog, re->nprog, &re->cprog, sizeof *prog, 64, WH_RE_MAX_PROG);
	if (!prog) return -1;
	re->prog = prog;
	wh_re_inst *i = &re->prog[re->nprog];
	i->op = (uint8_t)op;
	i->arg = (uint8_t)arg;
	i->x = x;
	i->y = y;
	return re->nprog++;
}
WH_API int wh__rnullable(const wh_re *re, int n) {
	const wh_re_node *d = &re->nodes[n];
	switch (d->type) {
	case WH_RN_EMPTY: case WH_RN_ASSERT: return 1;
	case WH_RN_BYTE: case WH_RN_CLASS: case WH_RN_ANY: return 0;
	case WH_RN_GROUP: return wh__rnullable(re, d->first);
	case WH_RN_REP: return d->min == 0 || wh__rnullable(re, d->first);
	case WH_RN_CAT:
		for (int c = d->first; c >= 0; c = re->nodes[c].next) if (!wh__rnullable(re, c)) return 0;
		return 1;
	case WH_RN_ALT:
		for (int c = d->first; c >= 0; c = re->nodes[c].next) if (wh__rnullable(re, c)) return 1;
		return 0;
	}
	return 1;
}
static int wh__rgen(wh_re *re, int n);
WH_API int wh__rgen_split(wh_re *re, int greedy) { return wh__remit(re, WH_RI_SPLIT, greedy, 0, 0); }
WH_API void wh__rpatch_split(wh_re *re, int at, int body, int out) {
	if (re->prog[at].arg) { re->prog[at].x = body; re->prog[at].y = out; }
	else { re->prog[at].x = out; re->prog[at].y = body; }
}
WH_API int wh__rgen(wh_re *re, int n) {
	const wh_re_node d = re->nodes[n];
	switch (d.type) {
	case WH_RN_EMPTY: return 0;
	case WH_RN_BYTE: return wh__remit(re, WH_RI_BYTE, d.arg, 0, 0) < 0 ? -1 : 0;
	case WH_RN_CLASS: return wh__remit(re, WH_RI_CLASS, 0, d.cls, 0) < 0 ? -1 : 0;
	case WH_RN_ANY: return wh__remit(re, d.arg ? WH_RI_ANYNL : WH_RI_ANY, 0, 0, 0) < 0 ? -1 : 0;
	case WH_RN_ASSERT: return wh__remit(re, WH_RI_ASSERT, d.arg, 0, 0) < 0 ? -1 : 0;
	case WH_RN_GROUP:
		if (d.cap && wh__remit(re, WH_RI_SAVE, 0, 2, 0) < 0) return -1;
		if (wh__rgen(re, d.first) < 0) return -1;
		if (d.cap && wh__remit(re, WH_RI_SAVE, 0, 3, 0) < 0) return -1;
		return 0;
	case WH_RN_CAT:
		for (int c = d.first; c >= 0; c = re->nodes[c].next)
			if (wh__rgen(re, c) < 0) return -1;
		return 0;
	case WH_RN_ALT: {
		int jumps[256], nj = 0;
		for (int c = d.first; c >= 0; c = re->nodes[c].next) {
			int split = -1;
			if (re->nodes[c].next >= 0) { if ((split = wh__rgen_split(re, 1)) < 0) return -1; }
			if (wh__rgen(re, c) < 0) return -1;
			if (re->nodes[c].next >= 0) {
				if (nj == 256) { re->err = "too many alternatives"; return -1; }
				if ((jumps[nj++] = wh__remit(re, WH_RI_JMP, 0, 0, 0)) < 0) return -1;
				wh__rpatch_split(re, split, split + 1, re->nprog);
			}
		}
		for (int i = 0; i < nj; i++) re->prog[jumps[i]].x = re->nprog;
		return 0;
	}
	case WH_RN_REP: {
		for (int i = 0; i < d.min; i++)
			if (wh__rgen(re, d.first) < 0) return -1;
		if (d.max < 0) {
			int nullable = wh__rnullable(re, d.first), slot = 0;
			int loop = wh__rgen_split(re, d.greedy);
			if (loop < 0) return -1;
			if (nullable) {
				slot = re->nslots++;
				if (wh__remit(re, WH_RI_SAVE, 0, slot, 0) < 0) return -1;
			}
			if (wh__rgen(re, d.first) < 0) return -1;
			if (nullable && wh__remit(re, WH_RI_CHECK, 0, slot, 0) < 0) return -1;
			if (wh__remit(re, WH_RI_JMP, 0, loop, 0) < 0) return -1;
			wh__rpatch_split(re, loop, loop + 1, re->nprog);
			return 0;
		}
		int splits[1001], ns = 0;
		for (int i = d.min; i < d.max; i++) {
			if ((splits[ns++] = wh__rgen_split(re, d.greedy)) < 0) return -1;
			if (wh__rgen(re, d.first) < 0) return -1;
		}
		for (int i = 0; i < ns; i++) wh__rpatch_split(re, splits[i], splits[i] + 1, re->nprog);
		return 0;
	}
	}
	return 0;
}
/* wh__lead returns the first byte of the non-ASCII character r's UTF-8: a
 * range's characters start with the bytes from its first's to its last's,
 * and every byte 0x80-0xFF when it holds U+FFFD (an invalid byte reads as
 * one, as in Go). */
WH_API int wh__lead(uint32_t r) { return r < 0x800 ? 0xC0 | r >> 6 : r < 0x10000 ? 0xE0 | r >> 12 : 0xF0 | r >> 18; }
WH_API void wh__rfirst(wh_re *re) {
	uint8_t *seen = (uint8_t *)wh_alloc((size_t)re->nprog);
	int *stack = (int *)wh_alloc(sizeof(int) * (size_t)re->nprog * 2 + 2);
	int sp = 0;
	if (!seen || !stack) { re->first_any = 1; return; }
	memset(seen, 0, (size_t)re->nprog);
	memset(re->first, 0, sizeof re->first);
	stack[sp++] = 0;
	while (sp) {
		int pc = stack[--sp];
		if (seen[pc]) continue;
		seen[pc] = 1;
		const wh_re_inst *i = &re->prog[pc];
		switch (i->op) {
		case WH_RI_BYTE: re->first[i->arg] = 1; break;
		case WH_RI_CLASS:
			for (int b = 0; b < 128; b++) if (wh__ctest(&re->cls[i->x], b)) re->first[b] = 1;
			for (int k = 0; k < re->cls[i->x].nr; k++) { /* the first bytes of the ranges' characters */
				uint32_t lo = re->cls[i->x].r[2 * k], hi = re->cls[i->x].r[2 * k + 1];
				int from = wh__lead(lo), to = wh__lead(hi);
				if (lo <= 0xFFFD && hi >= 0xFFFD) from = 0x80, to = 0xFF;
				memset(re->first + from, 1, (size_t)(to - from + 1));
			}
			if (re->cls[i->x].nonascii) memset(re->first + 0x80, 1, 0x80);
			break;
		case WH_RI_ANY: case WH_RI_ANYNL:
			for (int b = 0; b < 256; b++) if (b != '\n' || i->op == WH_RI_ANYNL) re->first[b] = 1;
			break;
		case WH_RI_MATCH: re->first_any = 1; return;
		case WH_RI_SPLIT: stack[sp++] = i->y; stack[sp++] = i->x; break;
		case WH_RI_JMP: stack[sp++] = i->x; break;
		default: stack[sp++] = pc + 1;
		}
	}
	int nb = 0;
	for (int b = 0; b < 256 && nb <= 2; b++)
		if (re->first[b]) { if (b >= 0x80) nb = 3; else if (nb < 2) re->firstb[nb++] = (uint8_t)b; else nb = 3; }
	if (nb >= 1 && nb <= 2) { re->nfirstb = nb; if (nb == 1) re->firstb[1] = re->firstb[0]; }
}

/* wh__find2 returns the index of the first byte of s[0..n) equal to a or
 * b, or n: eight bytes at a time (SWAR), as wasm has no vector memchr. */
WH_API size_t wh__find2(const char *s, size_t n, unsigned char a, unsigned char b) {
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	uint64_t ma = ones * a, mb = ones * b;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v;
		memcpy(&v, s + i, 8);
		uint64_t x = v ^ ma, y = v ^ mb;
		if ((((x - ones) & ~x) | ((y - ones) & ~y)) & highs) break;
	}
	for (; i < n; i++)
		if ((unsigned char)s[i] == a || (unsigned char)s[i] == b) break;
	return i;
}

/* wh_re_compile compiles pattern; NULL and *err set on a syntax error. */
WH_API wh_re *wh_re_compile(const char *pattern, size_t n, const char **err) {
	wh_re *re = (wh_re *)wh_alloc(sizeof *re);
	if (!re) { *err = "out of memory"; return NULL; }
	memset(re, 0, sizeof *re);
	re->nslots = 4;
	wh__rp p = {pattern, pattern + n, 0, re};
	int root = wh__ralt(&p, 0);
	if (root >= 0 && p.s < p.end) re->err = "unexpected )";
	if (root < 0 || re->err) { *err = re->err ? re->err : "invalid expression"; return NULL; }
	/* bytes every match contains: literal bytes of the top-level sequence */
	const wh_re_node *top = &re->nodes[root];
	if (top->type == WH_RN_CAT)
		for (int c = top->first; c >= 0 && re->nrequired < 16; c = re->nodes[c].next)
			if (re->nodes[c].type == WH_RN_BYTE) re->required[re->nrequired++] = re->nodes[c].arg;
	if (wh__remit(re, WH_RI_SAVE, 0, 0, 0) < 0 || wh__rgen(re, root) < 0 ||
	    wh__remit(re, WH_RI_SAVE, 0, 1, 0) < 0 || wh__remit(re, WH_RI_MATCH, 0, 0, 0) < 0) {
		*err = re->err;
		return NULL;
	}
	wh__rfirst(re);
	return re;
}

WH_API int wh__isword(int c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
WH_API size_t wh__runelen(const char *s, size_t n) {
	size_t l = wh_utf8_len((const unsigned char *)s, n, NULL);
	return l ? l : 1;
}

typedef struct { int32_t pc; int32_t pos; int32_t slot; } wh__rframe; /* slot >= 0: restore slots[slot] = pos */

/* wh__rrun tries a match at pos; 1 and slots set if there is one. */
WH_API int wh__rrun(const wh_re *re, const char *s, size_t n, size_t start, int32_t *slots, wh__rframe **stk, int *cap) {
	int sp = 0;
	for (int i = 0; i < re->nslots; i++) slots[i] = -1;
	(*stk)[sp++] = (wh__rframe){0, (int32_t)start, -1};
	while (sp) {
		wh__rframe f = (*stk)[--sp];
		if (f.slot >= 0) { slots[f.slot] = f.pos; continue; }
		int pc = f.pc;
		size_t pos = (size_t)f.pos;
		for (;;) {
			const wh_re_inst *in = &re->prog[pc];
			if (sp + 2 >= *cap) {
				int c = *cap * 2;
				wh__rframe *ns = (wh__rframe *)wh_alloc(sizeof *ns * (size_t)c);
				if (!ns) return -1;
				memcpy(ns, *stk, sizeof *ns * (size_t)sp);
				*stk = ns;
				*cap = c;
			}
			switch (in->op) {
			case WH_RI_BYTE:
				if (pos < n && (unsigned char)s[pos] == in->arg) { pos++; pc++; continue; }
				goto fail;
			case WH_RI_CLASS: {
				if (pos >= n) goto fail;
				unsigned char c = (unsigned char)s[pos];
				if (c < 0x80) { if (!wh__ctest(&re->cls[in->x], c)) goto fail; pos++; }
				else {
					const wh_re_class *k = &re->cls[in->x];
					uint32_t r = 0xFFFD; /* an invalid byte is one U+FFFD, as in Go */
					size_t l = k->nr ? wh_utf8_len((const unsigned char *)s + pos, n - pos, &r) : wh__runelen(s + pos, n - pos);
					if (!l) l = 1, r = 0xFFFD;
					if (k->nonascii == (k->nr && wh__cin(k, r))) goto fail;
					pos += l;
				}
				pc++;
				continue;
			}
			case WH_RI_ANY:
			case WH_RI_ANYNL:
				if (pos >= n || (in->op == WH_RI_ANY && s[pos] == '\n')) goto fail;
				pos += wh__runelen(s + pos, n - pos);
				pc++;
				continue;
			case WH_RI_ASSERT: {
				int ok = 0;
				switch (in->arg) {
				case WH_RA_BOT: ok = pos == 0; break;
				case WH_RA_EOT: ok = pos == n; break;
				case WH_RA_BOL: ok = pos == 0 || s[pos - 1] == '\n'; break;
				case WH_RA_EOL: ok = pos == n || s[pos] == '\n'; break;
				default: {
					int a = pos > 0 && wh__isword((unsigned char)s[pos - 1]), b = pos < n && wh__isword((unsigned char)s[pos]);
					ok = (a != b) == (in->arg == WH_RA_WORD);
				}
				}
				if (!ok) goto fail;
				pc++;
				continue;
			}
			case WH_RI_SPLIT:
				(*stk)[sp++] = (wh__rframe){in->y, (int32_t)pos, -1};
				pc = in->x;
				continue;
			case WH_RI_JMP: pc = in->x; continue;
			case WH_RI_SAVE:
				(*stk)[sp++] = (wh__rframe){0, slots[in->x], in->x};
				slots[in->x] = (int32_t)pos;
				pc++;
				continue;
			case WH_RI_CHECK:
				if (slots[in->x] == (int32_t)pos) goto fail;
				pc++;
				continue;
			case WH_RI_MATCH: return 1;
			}
		fail:
			break;
		}
	}
	return 0;
}

/* wh_byteset: the bytes a text holds, found in one pass; wh_re_may_match
 * then rules a pattern out without scanning the text for its required bytes
 * again (ten patterns over one text: one pass instead of one or two each). */
typedef struct { uint8_t has[256]; } wh_byteset;
WH_API void wh_byteset_of(wh_byteset *set, const char *s, size_t n) {
	memset(set->has, 0, sizeof set->has);
	for (size_t i = 0; i < n; i++) set->has[(unsigned char)s[i]] = 1;
}
/* wh_re_may_match reports whether a match can exist in a text holding the
 * bytes of set: 0 when a byte every match contains is absent, or every byte
 * a match can start with (for a first-byte set of one or two ASCII bytes). */
WH_API int wh_re_may_match(const wh_re *re, const wh_byteset *set) {
	for (int i = 0; i < re->nrequired; i++)
		if (!set->has[re->required[i]]) return 0;
	return !re->nfirstb || set->has[re->firstb[0]] || set->has[re->firstb[1]];
}

/* wh_re_match finds the leftmost-first match in s[from..n) and sets
 * m[0], m[1] to its span and sub[0], sub[1] to the "secret" group's
 * (-1 if the group did not take part). Returns 1 on a match, 0 if none,
 * -1 if out of memory. */
WH_API int wh_re_match(const wh_re *re, const char *s, size_t n, size_t from, long m[2], long sub[2]) {
	for (int i = 0; i < re->nrequired; i++)
		if (wh__find2(s + from, n - from, re->required[i], re->required[i]) == n - from) return 0;
	int32_t *slots = (int32_t *)wh_alloc(sizeof(int32_t) * (size_t)re->nslots);
	int cap = 256;
	wh__rframe *stk = (wh__rframe *)wh_alloc(sizeof *stk * (size_t)cap);
	if (!slots || !stk) return -1;
	for (size_t p = from; p <= n;) {
		/* ASCII bytes no match starts with, skipped in a tight loop: the
		 * step below would advance over each by one anyway. */
		if (re->nfirstb) {
			p += wh__find2(s + p, n - p, re->firstb[0], re->firstb[1]);
			if (p >= n) break;
		} else if (!re->first_any) {
			unsigned char c;
			while (p < n && (c = (unsigned char)s[p]) < 0x80 && !re->first[c]) p++;
		}
		if (re->first_any || (p < n && re->first[(unsigned char)s[p]])) {
			int r = wh__rrun(re, s, n, p, slots, &stk, &cap);
			if (r < 0) return -1;
			if (r) {
				m[0] = slots[0]; m[1] = slots[1];
				sub[0] = slots[2]; sub[1] = slots[3];
				return 1;
			}
		}
		if (p == n) break;
		p += wh__runelen(s + p, n - p);
	}
	return 0;
}

#endif /* WASMHOOKS_REGEX_H */
