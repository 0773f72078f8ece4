/* redact-secrets in C: the same hook as ../main.go (same manifest, same
 * settings, same decisions; the shared corpus in testdata/corpus checks it),
 * written with the C SDK (sdk/c). Build: make hooks. */
#include "wasmhooks.h"
#include "wasmhooks_regex.h"

static const char *const default_patterns[] = {
	"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\\s\\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
	"(?:AKIA|ASIA)[0-9A-Z]{16,}",
	"\\bsk-[A-Za-z0-9_-]{20,}",
	"sk-(?:[A-Za-z0-9]{32,}[A-Za-z0-9_-]*|(?:proj|svcacct|admin|ant-[a-z]+[0-9]+)-[A-Za-z0-9_-]{40,}|or-v[0-9]+-[0-9a-f]{64}[A-Za-z0-9_-]*)",
	"gh[pousr]_[A-Za-z0-9]{36}[A-Za-z0-9_]*",
	"github_pat_[A-Za-z0-9_]{22,}",
	"xox[abposr]-[A-Za-z0-9-]{10,}",
	"AIza[0-9A-Za-z_-]{35,}",
	"eyJ[A-Za-z0-9_-]{5,}\\.eyJ[A-Za-z0-9_-]{5,}\\.[A-Za-z0-9_-]+(?:\\.[A-Za-z0-9_-]+)*",
	"(?i)\\bbearer\\s+(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)",
	"[A-Za-z0-9_.%+-]+@[A-Za-z0-9-]{1,63}(?:\\.[A-Za-z0-9-]{1,63}){0,14}\\.[A-Za-z]{2,63}",
};
#define NDEFAULT (int)(sizeof default_patterns / sizeof default_patterns[0])

/* The last compiled pattern list, kept across invocations: an instance
 * serves one hook with one set of settings, so this almost always hits. */
static struct { char *key; size_t keylen; wh_re **res; int n; } cache;

static const char *compile(const char **pats, const size_t *lens, int n, wh_re ***out) {
	wh_buf key = {0};
	for (int i = 0; i < n; i++) { wh_buf_put(&key, pats[i], lens[i]); wh_buf_byte(&key, 0); }
	if (key.oom) return "out of memory";
	if (cache.res && cache.keylen == key.n && (key.n == 0 || !memcmp(cache.key, key.p, key.n))) { *out = cache.res; return NULL; }
	wh_persistent = 1;
	wh_re **res = (wh_re **)wh_alloc(sizeof(wh_re *) * (size_t)(n + 1));
	const char *err = NULL;
	int i;
	for (i = 0; i < n && res; i++) {
		if (!(res[i] = wh_re_compile(pats[i], lens[i], &err))) break;
	}
	wh_persistent = 0;
	if (!res) return "out of memory";
	if (i < n) {
		wh_buf b = {0};
		wh_buf_puts(&b, "setting patterns: pattern ");
		wh_buf_int(&b, i);
		wh_buf_puts(&b, " (");
		wh_buf_json_string(&b, pats[i], lens[i]);
		wh_buf_puts(&b, ") is not a valid regular expression: ");
		wh_buf_puts(&b, err ? err : "invalid");
		return b.p;
	}
	wh_persistent = 1;
	cache.key = (char *)wh_alloc(key.n);
	wh_persistent = 0;
	if (cache.key) { if (key.n) memcpy(cache.key, key.p, key.n); cache.keylen = key.n; cache.res = res; cache.n = n; }
	*out = res;
	return NULL;
}

typedef struct { long start, end; } span;
static int nres;
static wh_re **res;
static const char *replacement;
static size_t replacement_len;
static int count;
static int oom;
static const wh_invocation *cur;

static int cmp_span(const void *a, const void *b) {
	long d = ((const span *)a)->start - ((const span *)b)->start;
	return d < 0 ? -1 : d > 0;
}

/* redact_text appends s with every match replaced, as a JSON string, to
 * out. Spans are found in the original text and merged where they overlap,
 * so each secret counts once whatever the order of the patterns. */
static void redact_text(wh_buf *out, const char *s, size_t n) {
	span *spans = NULL;
	size_t ns = 0, cs = 0;
	/* One pass finds the bytes the text holds; a pattern whose required
	 * bytes are not all there is not run. */
	wh_byteset set;
	wh_byteset_of(&set, s, n);
	for (int r = 0; r < nres; r++) {
		if (!wh_re_may_match(res[r], &set)) continue;
		size_t from = 0;
		while (from <= n) {
			long m[2], sub[2];
			int k = wh_re_match(res[r], s, n, from, m, sub);
			if (k < 0) { oom = 1; return; }
			if (k == 0) break;
			span sp = {m[0], m[1]};
			if (res[r]->has_secret && sub[0] >= 0) { sp.start = sub[0]; sp.end = sub[1]; }
			if (sp.end > sp.start) {
				if (ns == cs) {
					cs = cs ? cs * 2 : 16;
					span *nsp = (span *)wh_alloc(sizeof(span) * cs);
					if (!nsp) { oom = 1; return; }
					if (ns) memcpy(nsp, spans, sizeof(span) * ns);
					spans = nsp;
				}
				spans[ns++] = sp;
			}
			if (m[1] > m[0]) from = (size_t)m[1];
			else if ((size_t)m[1] >= n) break;
			else from = (size_t)m[1] + wh__runelen(s + m[1], n - (size_t)m[1]);
		}
	}
	if (ns == 0) { wh_buf_json_string(out, s, n); return; }
	qsort(spans, ns, sizeof(span), cmp_span);
	wh_buf text = {0};
	long last = 0;
	for (size_t i = 0; i < ns;) {
		span cur = spans[i];
		for (i++; i < ns && spans[i].start < cur.end; i++)
			if (spans[i].end > cur.end) cur.end = spans[i].end;
		wh_buf_put(&text, s + last, (size_t)(cur.start - last));
		wh_buf_put(&text, replacement, replacement_len);
		last = cur.end;
		count++;
	}
	wh_buf_put(&text, s + last, n - (size_t)last);
	wh_buf_json_string(out, text.p, text.n);
}

/* redact_value appends JSON value tok with every string in it redacted;
 * object keys are left alone. */
static void redact_value(wh_buf *out, const wh_json *j, int tok) {
	size_t n;
	switch (j->t[tok].type) {
	case WH_JSTRING: {
		/* The SDK decoded the primary field already. */
		const char *s = tok == cur->primary && cur->primary_text ? (n = cur->primary_len, cur->primary_text) : wh_json_string(j, tok, &n);
		if (!s) { oom = 1; return; }
		redact_text(out, s, n);
		return;
	}
	case WH_JARRAY:
	case WH_JOBJECT: {
		int obj = j->t[tok].type == WH_JOBJECT;
		wh_buf_byte(out, obj ? '{' : '[');
		int first = 1;
		for (int c = wh_json_first(j, tok); c >= 0; c = wh_json_next(j, tok, c)) {
			if (!first) wh_buf_byte(out, ',');
			first = 0;
			if (obj) {
				const char *k = wh_json_raw(j, c, &n);
				wh_buf_put(out, k, n);
				wh_buf_byte(out, ':');
			}
			redact_value(out, j, obj ? c + 1 : c);
		}
		wh_buf_byte(out, obj ? '}' : ']');
		return;
	}
	default: {
		const char *raw = wh_json_raw(j, tok, &n);
		wh_buf_put(out, raw, n);
	}
	}
}

static wh_decision wh_handle(wh_invocation *inv) {
	const char **pats, **extra;
	size_t *lens, *elens;
	int np = wh_setting_strings(inv, "patterns", &pats, &lens);
	int ne = wh_setting_strings(inv, "extra_patterns", &extra, &elens);
	replacement = wh_setting_string(inv, "replacement", "[REDACTED]");
	if (inv->setting_error) return wh_fail(inv->setting_error);
	if (np < 0) np = NDEFAULT;
	if (ne < 0) ne = 0;
	/* The default list, compiled once: no key to build and compare. */
	static wh_re **default_res;
	int defaults = wh_setting(inv, "patterns") < 0 && ne == 0;
	if (defaults && default_res) {
		res = default_res;
		nres = NDEFAULT;
		goto compiled;
	}
	const char **all = (const char **)wh_alloc(sizeof(char *) * (size_t)(np + ne + 1));
	size_t *alen = (size_t *)wh_alloc(sizeof(size_t) * (size_t)(np + ne + 1));
	if (!all || !alen) return wh_fail("out of memory");
	for (int i = 0; i < np; i++) {
		int user = wh_setting(inv, "patterns") >= 0;
		all[i] = user ? pats[i] : default_patterns[i];
		alen[i] = user ? lens[i] : strlen(default_patterns[i]);
	}
	for (int i = 0; i < ne; i++) { all[np + i] = extra[i]; alen[np + i] = elens[i]; }
	const char *err = compile(all, alen, np + ne, &res);
	if (err) return wh_fail(err);
	nres = np + ne;
	if (defaults) default_res = res;
compiled:
	replacement_len = strlen(replacement);
	count = 0;
	oom = 0;

	if (inv->primary < 0) return wh_continue();
	cur = inv;
	wh_buf out = {0};
	redact_value(&out, &inv->doc, inv->primary);
	if (oom || out.oom) return wh_fail("out of memory");
	if (count == 0) return wh_continue();
	wh_decision d = wh_modify_json(NULL, out.p, out.n);
	wh_buf reason = {0};
	wh_buf_puts(&reason, "redacted ");
	wh_buf_int(&reason, count);
	wh_buf_puts(&reason, count == 1 ? " secret" : " secrets");
	d.reason = reason.p;
	return d;
}
