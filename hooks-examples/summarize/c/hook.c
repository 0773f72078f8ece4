/* summarize in C: the same hook as ../main.go (same manifest, settings and
 * decisions; the shared corpus in testdata/corpus checks it), written with
 * the C SDK (sdk/c). */
#include "wasmhooks.h"

#define DEFAULT_PROMPT_PREFIX "Summarize the following text in a few sentences. Keep every fact, number, name and instruction the reader needs, and answer with the summary only.\n\n"

static size_t rune_count(const char *s, size_t n) {
	size_t c = 0;
	for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
	return c;
}

/* is_space_at: the length of the Unicode white space at s[i] (Go's
 * unicode.IsSpace), or 0. */
static size_t is_space_at(const char *s, size_t n, size_t i) {
	uint32_t r;
	size_t l = wh_utf8_len((const unsigned char *)s + i, n - i, &r);
	if (!l) return 0;
	int sp = r == ' ' || (r >= '\t' && r <= '\r') || r == 0x85 || r == 0xA0 || r == 0x1680 ||
		 (r >= 0x2000 && r <= 0x200A) || r == 0x2028 || r == 0x2029 || r == 0x202F || r == 0x205F || r == 0x3000;
	return sp ? l : 0;
}

static const char *explain(uint32_t status) {
	switch (status) {
	case WH_INSUFFICIENT_CREDIT: return "insufficient credit for llm.run";
	case WH_DENIED: return "llm.run is not granted to this hook";
	case WH_RATE_LIMITED: return "llm.run is rate limited";
	case WH_MALFORMED_RESULT: return "llm.run returned a malformed result";
	}
	wh_buf b = {0};
	wh_buf_puts(&b, "llm.run failed (");
	wh_buf_puts(&b, wh_status_code(status));
	wh_buf_byte(&b, ')');
	return b.p;
}

static wh_decision with_reason(wh_decision d, wh_buf *b) {
	d.reason = b->p;
	return d;
}

static wh_decision wh_handle(wh_invocation *inv) {
	long long min_chars = wh_setting_int(inv, "min_chars", 400);
	long long max_tokens = wh_setting_int(inv, "max_tokens", 120);
	const char *prefix = wh_setting_string(inv, "prompt_prefix", DEFAULT_PROMPT_PREFIX);
	if (inv->setting_error) return wh_fail(inv->setting_error);
	wh_buf b = {0};
	if (min_chars < 0) { wh_buf_puts(&b, "setting \"min_chars\": must be at least 0, got "); wh_buf_int(&b, min_chars); return wh_fail(b.p); }
	if (max_tokens < 1) { wh_buf_puts(&b, "setting \"max_tokens\": must be at least 1, got "); wh_buf_int(&b, max_tokens); return wh_fail(b.p); }
	if (wh_json_type(&inv->doc, inv->primary) != WH_JSTRING) return wh_continue();
	size_t n = rune_count(inv->primary_text, inv->primary_len);
	if (n == 0 || (long long)n < min_chars) return wh_continue();

	wh_buf prompt = {0};
	wh_buf_puts(&prompt, prefix);
	wh_buf_put(&prompt, inv->primary_text, inv->primary_len);
	if (prompt.oom) return wh_fail("out of memory");
	const char *out;
	size_t olen;
	wh_reply r;
	uint32_t st = wh_llm_run(prompt.p, prompt.n, max_tokens > 0x7FFFFFFF ? 0x7FFFFFFF : (int)max_tokens, &out, &olen, &r);
	if (st != WH_OK) {
		wh_buf_puts(&b, "not summarized: ");
		wh_buf_puts(&b, explain(st));
		return with_reason(wh_continue(), &b);
	}
	size_t a = 0, e = olen, l;
	while (a < e && (l = is_space_at(out, e, a))) a += l;
	while (e > a) { /* trim from the end: find the last character's start */
		size_t k = e - 1;
		while (k > a && ((unsigned char)out[k] & 0xC0) == 0x80) k--;
		if (!is_space_at(out, e, k)) break;
		e = k;
	}
	size_t m = rune_count(out + a, e - a);
	if (m == 0) {
		wh_buf_puts(&b, "not summarized: the model returned an empty summary");
		return with_reason(wh_continue(), &b);
	}
	if (m >= n) {
		wh_buf_puts(&b, "not summarized: the summary (");
		wh_buf_int(&b, (long long)m);
		wh_buf_puts(&b, " characters) is not shorter than the text (");
		wh_buf_int(&b, (long long)n);
		wh_buf_byte(&b, ')');
		return with_reason(wh_continue(), &b);
	}
	wh_buf_puts(&b, "summarized ");
	wh_buf_int(&b, (long long)n);
	wh_buf_puts(&b, " characters to ");
	wh_buf_int(&b, (long long)m);
	return with_reason(wh_modify_primary(out + a, e - a), &b);
}
