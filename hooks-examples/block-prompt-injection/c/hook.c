/* block-prompt-injection in C: the same hook as ../main.go (same manifest,
 * settings, signals, weights and reasons; the shared corpus in
 * testdata/corpus checks it), written with the C SDK (sdk/c).
 *
 * Unicode: Go's version uses the unicode package's tables. This port knows
 * ASCII exactly and approximates the rest without tables: a non-ASCII
 * character is a letter in the Latin, Greek, Cyrillic, other alphabetic and
 * CJK blocks and not elsewhere (punctuation, symbols, emoji); lower-casing
 * covers ASCII, Latin-1, Greek and Cyrillic capitals. A phrase in another
 * script's capitals, or a letter outside those blocks, can score
 * differently from the Go hook. */
#include <stdio.h>
#include "wasmhooks.h"

#define MAX_GAP 3
#define DEFAULT_USER_MESSAGE "This message was blocked because it looks like an attempt to manipulate the assistant."

typedef struct { const char *text; double weight; } phrase;
static const phrase default_phrases[] = {
	{"ignore previous instructions", 1}, {"ignore prior instructions", 1}, {"ignore the above", 0.5},
	{"disregard all prior", 1}, {"disregard previous instructions", 1}, {"disregard the above", 0.5},
	{"forget your instructions", 1}, {"forget everything above", 1}, {"override your instructions", 1},
	{"new instructions", 0.5}, {"you are now", 0.5}, {"pretend you are", 0.5}, {"from now on you", 0.5},
	{"system prompt", 0.5}, {"reveal your instructions", 1}, {"reveal your prompt", 1},
	{"print your instructions", 1}, {"repeat the text above", 0.5}, {"developer mode", 0.7},
	{"do anything now", 1}, {"jailbreak", 0.7},
};
static const char *const template_tokens[] = {
	"<|im_start|>", "<|im_end|>", "<|system|>", "<|assistant|>", "<|user|>",
	"<|endoftext|>", "<|begin_of_text|>", "<|start_header_id|>", "<|eot_id|>",
	"[inst]", "[/inst]", "<<sys>>", "<</sys>>",
};
static const char *const role_labels[] = {"system:", "assistant:", "user:", "developer:", "### system",
	"### instruction", "### assistant", "<system>", "</system>"};
#define N(a) (int)(sizeof(a) / sizeof((a)[0]))

/* ---- text helpers ---- */
static uint32_t next_rune(const char *s, size_t n, size_t *i) {
	uint32_t r;
	size_t l = wh_utf8_len((const unsigned char *)s + *i, n - *i, &r);
	if (!l) { (*i)++; return 0xFFFD; }
	*i += l;
	return r;
}
static void put_rune(wh_buf *b, uint32_t v) {
	char o[4];
	size_t k = 0;
	if (v < 0x80) o[k++] = (char)v;
	else if (v < 0x800) { o[k++] = (char)(0xC0 | v >> 6); o[k++] = (char)(0x80 | (v & 63)); }
	else if (v < 0x10000) { o[k++] = (char)(0xE0 | v >> 12); o[k++] = (char)(0x80 | ((v >> 6) & 63)); o[k++] = (char)(0x80 | (v & 63)); }
	else { o[k++] = (char)(0xF0 | v >> 18); o[k++] = (char)(0x80 | ((v >> 12) & 63)); o[k++] = (char)(0x80 | ((v >> 6) & 63)); o[k++] = (char)(0x80 | (v & 63)); }
	wh_buf_put(b, o, k);
}
static uint32_t to_lower(uint32_t r) {
	if (r >= 'A' && r <= 'Z') return r + 32;
	if (r < 0x80) return r;
	if (r >= 0xC0 && r <= 0xDE && r != 0xD7) return r + 32;
	if (r >= 0x391 && r <= 0x3A9 && r != 0x3A2) return r + 32;
	if (r >= 0x410 && r <= 0x42F) return r + 32;
	if (r >= 0x400 && r <= 0x40F) return r + 80;
	return r;
}
static int is_word_rune(uint32_t r) {
	if (r < 0x80) return (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z');
	if (r == 0xAA || r == 0xB5 || r == 0xBA) return 1;
	if (r >= 0xC0 && r <= 0x24F) return r != 0xD7 && r != 0xF7;
	if (r >= 0x250 && r <= 0x2AF) return 1;
	if (r >= 0x370 && r <= 0x3FF) return r != 0x37E && r != 0x387;
	if (r >= 0x400 && r <= 0x52F) return r < 0x482 || r > 0x489;
	if (r >= 0x531 && r <= 0x1FFF) return !(r >= 0x300 && r <= 0x36F);
	if (r >= 0x3040 && r <= 0x9FFF) return r >= 0x3041 && !(r >= 0x30FB && r <= 0x30FC);
	if (r >= 0xAC00 && r <= 0xD7AF) return 1;
	if (r >= 0xF900 && r <= 0xFAFF) return 1;
	return 0;
}
/* ASCII lower-casing of s (the scans it feeds look for ASCII tokens only). */
static char *ascii_lower(const char *s, size_t n) {
	char *o = (char *)wh_alloc(n + 1);
	if (!o) return NULL;
	for (size_t i = 0; i < n; i++) o[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + 32) : s[i];
	o[n] = 0;
	return o;
}
static int is_invisible(uint32_t r) {
	return (r >= 0x200B && r <= 0x200F) || (r >= 0x202A && r <= 0x202E) || (r >= 0x2060 && r <= 0x2064) ||
	       (r >= 0x2066 && r <= 0x2069) || r == 0xFEFF || r == 0x00AD;
}
/* split_invisible: Go's splitInvisible. */
static void split_invisible(const char *s, size_t n, wh_buf *visible, int *invisible, wh_buf *hidden) {
	for (size_t i = 0; i < n;) {
		size_t at = i;
		uint32_t r = next_rune(s, n, &i);
		if (r >= 0xE0000 && r <= 0xE007F) {
			if (r >= 0xE0020 && r <= 0xE007E && hidden) put_rune(hidden, r - 0xE0000);
		} else if (r != 0x200D && is_invisible(r)) {
			if (invisible) (*invisible)++;
		} else {
			wh_buf_put(visible, s + at, i - at);
		}
	}
}
static size_t rune_count(const char *s, size_t n) {
	size_t c = 0;
	for (size_t i = 0; i < n; c++) next_rune(s, n, &i);
	return c;
}

/* words: Go's words(): the lower-cased runs of letters and digits. */
typedef struct { const char **w; size_t *l; int n, cap; } wordlist;
static int words(const char *s, size_t n, wordlist *out) {
	wh_buf vis = {0}, low = {0};
	split_invisible(s, n, &vis, NULL, NULL);
	for (size_t i = 0; i < vis.n;) put_rune(&low, to_lower(next_rune(vis.p, vis.n, &i)));
	if (vis.oom || low.oom) return -1;
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < low.n;) {
		size_t start = i;
		uint32_t r = next_rune(low.p, low.n, &i);
		if (!is_word_rune(r)) continue;
		size_t end = i;
		while (i < low.n) {
			size_t k = i;
			if (!is_word_rune(next_rune(low.p, low.n, &k))) break;
			i = end = k;
		}
		if (out->n == out->cap) {
			int c = out->cap ? out->cap * 2 : 32;
			const char **w = (const char **)wh_alloc(sizeof(char *) * (size_t)c);
			size_t *l = (size_t *)wh_alloc(sizeof(size_t) * (size_t)c);
			if (!w || !l) return -1;
			if (out->n) { memcpy(w, out->w, sizeof(char *) * (size_t)out->n); memcpy(l, out->l, sizeof(size_t) * (size_t)out->n); }
			out->w = w; out->l = l; out->cap = c;
		}
		out->w[out->n] = low.p + start;
		out->l[out->n++] = end - start;
	}
	return 0;
}
static int word_eq(const wordlist *a, int i, const wordlist *b, int j) {
	return a->l[i] == b->l[j] && !memcmp(a->w[i], b->w[j], a->l[i]);
}
static int match_from(const wordlist *text, int pos, const wordlist *ph, int k) {
	if (k == ph->n) return 1;
	for (int j = pos; j < text->n && j <= pos + MAX_GAP; j++)
		if (word_eq(text, j, ph, k) && match_from(text, j + 1, ph, k + 1)) return 1;
	return 0;
}
static int contains_phrase(const wordlist *text, const wordlist *ph) {
	if (ph->n == 0) return 0;
	for (int i = 0; i < text->n; i++)
		if (word_eq(text, i, ph, 0) && match_from(text, i + 1, ph, 1)) return 1;
	return 0;
}

/* ---- numbers and quoting as Go prints them ---- */
/* num: strconv.FormatFloat(f, 'f', -1, 64), the shortest decimal that reads
 * back as f. */
static const char *num(double f) {
	char tmp[400];
	for (int p = 0; p <= 340; p++) {
		snprintf(tmp, sizeof tmp, "%.*f", p, f);
		if (strtod(tmp, NULL) == f) break;
	}
	return wh_strndup(tmp, strlen(tmp));
}
/* quote: strconv.Quote for printable text. */
static void quote(wh_buf *b, const char *s) {
	static const char hex[] = "0123456789abcdef";
	wh_buf_byte(b, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		switch (c) {
		case '"': wh_buf_puts(b, "\\\""); break;
		case '\\': wh_buf_puts(b, "\\\\"); break;
		case '\a': wh_buf_puts(b, "\\a"); break;
		case '\b': wh_buf_puts(b, "\\b"); break;
		case '\f': wh_buf_puts(b, "\\f"); break;
		case '\n': wh_buf_puts(b, "\\n"); break;
		case '\r': wh_buf_puts(b, "\\r"); break;
		case '\t': wh_buf_puts(b, "\\t"); break;
		case '\v': wh_buf_puts(b, "\\v"); break;
		default:
			if (c < 0x20 || c == 0x7F) { char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]}; wh_buf_put(b, e, 4); }
			else wh_buf_byte(b, (char)c);
		}
	}
	wh_buf_byte(b, '"');
}

/* ---- scoring ---- */
typedef struct { wh_buf summary; double total; int n; } result;
static void add(result *r, const char *what, double weight) {
	if (r->n++) wh_buf_puts(&r->summary, ", ");
	wh_buf_puts(&r->summary, what);
	wh_buf_puts(&r->summary, " (+");
	wh_buf_puts(&r->summary, num(weight));
	wh_buf_byte(&r->summary, ')');
	r->total += weight;
}
static const char *counted(int n, const char *one, const char *many) {
	wh_buf b = {0};
	wh_buf_int(&b, n);
	wh_buf_byte(&b, ' ');
	wh_buf_puts(&b, n == 1 ? one : many);
	return b.p;
}
static size_t count_sub(const char *s, size_t n, const char *t) {
	size_t c = 0, tl = strlen(t);
	for (size_t i = 0; i + tl <= n;) {
		const char *p = (const char *)memchr(s + i, t[0], n - i);
		if (!p || (size_t)(p - s) + tl > n) break;
		i = (size_t)(p - s);
		if (!memcmp(p, t, tl)) { c++; i += tl; } else i++;
	}
	return c;
}
static int is_b64(unsigned char c) {
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '-' || c == '_';
}
static int b64val(unsigned char c, int url) {
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == (url ? '-' : '+')) return 62;
	if (c == (url ? '_' : '/')) return 63;
	return -1;
}
static int printable(uint32_t r) {
	if (r < 0x80) return (r >= 0x20 && r < 0x7F) || (r >= '\t' && r <= '\r');
	if (r < 0xA0) return r == 0x85;
	return !is_invisible(r) && r != 0xFFFD && !(r >= 0xE0000 && r <= 0xE007F) && !(r >= 0xD800 && r <= 0xDFFF);
}
/* decode_text: Go's decodeText: the blob decoded (unpadded standard, then
 * URL alphabet) if that is UTF-8 text at least 90% printable, else NULL. */
static const char *decode_text(const char *s, size_t n) {
	for (int url = 0; url < 2; url++) {
		if (n % 4 == 1) return NULL;
		char *out = (char *)wh_alloc(n + 1);
		if (!out) return NULL;
		size_t o = 0, i;
		uint32_t acc = 0;
		int bits = 0;
		for (i = 0; i < n; i++) {
			int v = b64val((unsigned char)s[i], url);
			if (v < 0) break;
			acc = (acc << 6) | (uint32_t)v;
			bits += 6;
			if (bits >= 8) { bits -= 8; out[o++] = (char)((acc >> bits) & 0xFF); }
		}
		if (i < n) continue;
		out[o] = 0;
		size_t total = 0, ok = 0;
		int valid = 1;
		for (size_t k = 0; k < o; total++) {
			uint32_t r;
			size_t l = wh_utf8_len((const unsigned char *)out + k, o - k, &r);
			if (!l) { valid = 0; break; }
			k += l;
			if (printable(r)) ok++;
		}
		if (!valid) continue;
		if (ok * 10 >= total * 9) return out;
	}
	return NULL;
}

static void score(const char *text, size_t n, const phrase *phrases, int np, result *r) {
	char *lower = ascii_lower(text, n);
	if (!lower) return;
	size_t c = 0;
	for (int i = 0; i < N(template_tokens); i++) c += count_sub(lower, n, template_tokens[i]);
	if (c > 0) add(r, counted((int)c, "chat-template token", "chat-template tokens"), 1.0);

	int roles = 0;
	for (size_t i = 0; i <= n;) {
		size_t e = i;
		while (e < n && lower[e] != '\n') e++;
		size_t a = i, b = e;
		while (a < b && (lower[a] == ' ' || lower[a] == '\t' || lower[a] == '\r' || lower[a] == '\v' || lower[a] == '\f')) a++;
		for (int k = 0; k < N(role_labels); k++) {
			size_t l = strlen(role_labels[k]);
			if (b - a >= l && !memcmp(lower + a, role_labels[k], l)) { roles++; break; }
		}
		i = e + 1;
	}
	if (roles >= 2) add(r, counted(roles, "role markers", "role markers"), 0.5);

	wh_buf visible = {0}, hidden = {0}, scan = {0};
	int invisible = 0;
	split_invisible(text, n, &visible, &invisible, &hidden);
	if (invisible > 0) add(r, counted(invisible, "invisible character", "invisible characters"), 0.5);
	wh_buf_put(&scan, visible.p ? visible.p : "", visible.n);
	if (rune_count(hidden.p, hidden.n) > 6) {
		add(r, "text hidden in Unicode tag characters", 1.0);
		wh_buf_byte(&scan, '\n');
		wh_buf_put(&scan, hidden.p, hidden.n);
	}

	const char *blobs[64];
	int nb = 0, found = 0;
	wh_buf extra = {0};
	for (size_t i = 0; i < visible.n;) {
		if (!is_b64((unsigned char)visible.p[i])) { i++; continue; }
		size_t j = i;
		int up = 0, lo = 0, dg = 0;
		for (; j < visible.n && is_b64((unsigned char)visible.p[j]); j++) {
			char ch = visible.p[j];
			up |= ch >= 'A' && ch <= 'Z';
			lo |= ch >= 'a' && ch <= 'z';
			dg |= ch >= '0' && ch <= '9';
		}
		if (j - i >= 40 && up && lo && dg) {
			const char *t = decode_text(visible.p + i, j - i);
			if (t && *t) {
				found++;
				if (nb < N(blobs)) blobs[nb++] = t;
				else { wh_buf_byte(&extra, '\n'); wh_buf_puts(&extra, t); }
			}
		}
		while (j < visible.n && visible.p[j] == '=') j++;
		i = j;
	}
	if (found > 0) {
		add(r, counted(found, "base64-encoded text", "base64-encoded texts"), 0.5);
		for (int k = 0; k < nb; k++) { wh_buf_byte(&scan, '\n'); wh_buf_puts(&scan, blobs[k]); }
		wh_buf_put(&scan, extra.p ? extra.p : "", extra.n);
	}

	wordlist tokens, pw;
	if (words(scan.p ? scan.p : "", scan.n, &tokens) < 0) return;
	for (int k = 0; k < np; k++) {
		if (words(phrases[k].text, strlen(phrases[k].text), &pw) < 0) return;
		if (contains_phrase(&tokens, &pw)) {
			wh_buf q = {0};
			quote(&q, phrases[k].text);
			add(r, q.p, phrases[k].weight);
		}
	}
}

/* collect appends every string in JSON value tok, each followed by "\n". */
static void collect(wh_buf *b, const wh_json *j, int tok) {
	if (tok < 0) return;
	size_t n;
	switch (j->t[tok].type) {
	case WH_JSTRING: {
		const char *s = wh_json_string(j, tok, &n);
		if (s) { wh_buf_put(b, s, n); wh_buf_byte(b, '\n'); }
		return;
	}
	case WH_JARRAY:
	case WH_JOBJECT:
		for (int c = wh_json_first(j, tok); c >= 0; c = wh_json_next(j, tok, c))
			collect(b, j, j->t[tok].type == WH_JOBJECT ? c + 1 : c);
	}
}

static const char *setting_err(const char *key, const char *what, int item) {
	wh_buf b = {0};
	wh_buf_puts(&b, "setting \"");
	wh_buf_puts(&b, key);
	wh_buf_puts(&b, "\": ");
	if (item >= 0) { wh_buf_puts(&b, "item "); wh_buf_int(&b, item); wh_buf_puts(&b, ": "); }
	wh_buf_puts(&b, what);
	return b.p;
}

/* parse_phrases appends the phrases of setting key to *ps; an error message
 * or NULL. */
static const char *parse_phrases(wh_invocation *inv, const char *key, phrase **ps, int *np) {
	const wh_json *j = &inv->doc;
	int t = wh_setting(inv, key);
	if (t < 0) return NULL;
	if (j->t[t].type != WH_JARRAY) return setting_err(key, "want an array of phrases", -1);
	phrase *out = (phrase *)wh_alloc(sizeof(phrase) * (size_t)(*np + (int)j->t[t].count + 1));
	if (!out) return "out of memory";
	if (*np) memcpy(out, *ps, sizeof(phrase) * (size_t)*np);
	int i = 0;
	for (int e = wh_json_first(j, t); e >= 0; e = wh_json_next(j, t, e), i++) {
		phrase p = {"", 1};
		if (j->t[e].type == WH_JSTRING) {
			p.text = wh_json_string(j, e, NULL);
		} else if (j->t[e].type == WH_JOBJECT) {
			const char *s = wh_json_string(j, wh_json_get(j, e, "phrase"), NULL);
			if (s) p.text = s;
			int w = wh_json_get(j, e, "weight");
			if (w >= 0 && (!wh_json_number(j, w, &p.weight) || !(p.weight > 0)))
				return setting_err(key, "\"weight\" must be a number greater than 0", i);
		} else {
			return setting_err(key, "want a string or {\"phrase\", \"weight\"}", i);
		}
		wordlist wl;
		if (!p.text || words(p.text, strlen(p.text), &wl) < 0 || wl.n == 0) return setting_err(key, "the phrase has no words", i);
		out[(*np)++] = p;
	}
	*ps = out;
	return NULL;
}

static wh_decision wh_handle(wh_invocation *inv) {
	double threshold = wh_setting_number(inv, "threshold", 1.0);
	const char *user_message = wh_setting_string(inv, "user_message", DEFAULT_USER_MESSAGE);
	if (inv->setting_error) return wh_fail(inv->setting_error);
	if (!(threshold > 0)) return wh_fail(setting_err("threshold", "must be greater than 0", -1));
	phrase *ps = (phrase *)default_phrases;
	int np = N(default_phrases);
	const char *err;
	if (wh_setting(inv, "phrases") >= 0) {
		np = 0;
		ps = NULL;
		if ((err = parse_phrases(inv, "phrases", &ps, &np))) return wh_fail(err);
	}
	if ((err = parse_phrases(inv, "extra_phrases", &ps, &np))) return wh_fail(err);

	wh_buf text = {0};
	collect(&text, &inv->doc, inv->primary);
	result r = {{0}, 0, 0};
	score(text.p ? text.p : "", text.n, ps, np, &r);
	if (text.oom || r.summary.oom) return wh_fail("out of memory");
	if (r.total == 0) return wh_continue();
	/* Below the threshold it continues, saying so; at or above, it blocks. */
	int below = r.total < threshold;
	wh_buf reason = {0};
	wh_buf_puts(&reason, below ? "prompt-injection score " : "prompt injection suspected (score ");
	wh_buf_puts(&reason, num(r.total));
	wh_buf_puts(&reason, below ? " is below the threshold " : ", threshold ");
	wh_buf_puts(&reason, num(threshold));
	wh_buf_puts(&reason, below ? ": " : "): ");
	wh_buf_puts(&reason, r.summary.p);
	if (below) {
		wh_decision d = wh_continue();
		d.reason = reason.p;
		return d;
	}
	wh_decision d = wh_block(reason.p);
	d.user_message = user_message;
	return d;
}
