/* Native unit tests of the C SDK, against its test double (wh_mock_*).
 * Build and run: make test-sdk-c (or cc -I sdk/c sdk/c/test/sdk_test.c). */
#include <stdio.h>
#include "wasmhooks.h"
#include "wasmhooks_regex.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* The handler under test does what the test tells it through `mode`. */
static const char *mode;
static char observed[4096];

static wh_decision wh_handle(wh_invocation *inv) {
	if (!strcmp(mode, "echo")) {
		snprintf(observed, sizeof observed, "%s|%s|%s|%s|%s|%s", inv->point, inv->primary_field, inv->primary_text, inv->hook, inv->invocation_id, inv->tenant);
		return wh_continue();
	}
	if (!strcmp(mode, "settings")) {
		const char **v;
		size_t *l;
		int n = wh_setting_strings(inv, "list", &v, &l);
		snprintf(observed, sizeof observed, "%s|%g|%lld|%d|%d|%s", wh_setting_string(inv, "s", "def"), wh_setting_number(inv, "f", -1),
			 wh_setting_int(inv, "i", -1), wh_setting_bool(inv, "b", 0), n, n > 1 ? v[1] : "");
		if (inv->setting_error) return wh_fail(inv->setting_error);
		return wh_continue();
	}
	if (!strcmp(mode, "modify")) { wh_decision d = wh_modify_primary("a\"b\n\x01", 5); d.reason = "r"; d.do_not_reply_again = 1; return d; }
	if (!strcmp(mode, "block")) { wh_decision d = wh_block("bad"); d.user_message = "no"; return d; }
	if (!strcmp(mode, "ask")) return wh_ask("check");
	if (!strcmp(mode, "fail")) return wh_fail("because");
	if (!strcmp(mode, "calls")) {
		const char *text;
		size_t tl;
		wh_reply r;
		uint32_t s = wh_llm_run("hi", 2, 10, &text, &tl, &r);
		int found;
		const char *val;
		size_t vl;
		uint32_t s2 = wh_kv_get("k", &found, &val, &vl, NULL);
		uint32_t s3 = wh_kv_set("k", "[1,2]", 5, NULL);
		uint32_t s4 = wh_log("info", "hello");
		snprintf(observed, sizeof observed, "%u:%.*s|%u:%d:%.*s|%u|%u|%s", s, (int)(s ? 0 : tl > 40 ? 40 : tl), s ? "" : text, s2, found, (int)vl, val, s3, s4, r.message);
		return wh_continue();
	}
	return wh_fail("unknown mode");
}

static const char *big_reply;
static const char *mock_ok(const char *name, const char *payload, size_t plen, uint32_t *status, void *ctx) {
	(void)ctx;
	*status = WH_OK;
	if (!strcmp(name, "llm.run")) {
		if (!memmem(payload, plen, "\"max_tokens\":10", 15)) return "{\"text\":\"no max_tokens\"}";
		return big_reply ? big_reply : "{\"text\":\"sum\\u00e9\"}";
	}
	if (!strcmp(name, "kv.get")) return "{\"found\":true,\"value\":{\"a\":1}}";
	return "{}";
}
static const char *mock_err(const char *name, const char *payload, size_t plen, uint32_t *status, void *ctx) {
	(void)name; (void)payload; (void)plen; (void)ctx;
	*status = WH_DENIED;
	return "{\"code\":\"denied\",\"message\":\"not granted\"}";
}

static const char *inv_doc(const char *point, const char *context, const char *settings) {
	static char buf[8192];
	snprintf(buf, sizeof buf, "{\"abi\":\"1.1\",\"point\":\"%s\",\"context\":%s,\"settings\":%s,\"meta\":{\"hook\":\"h\",\"invocation\":\"i-1\",\"tenant\":\"t\"}}", point, context, settings);
	return buf;
}

static void test_json(void) {
	static const char *valid[] = {"0", "-0", "1.5e3", "\"\\u00e9\\ud83d\\ude00\"", "[]", "{}", "{\"a\":[1,{\"b\":null}],\"c\":true}", " [ false ] "};
	static const char *invalid[] = {"", " ", "01", "1.", ".5", "-", "[1,]", "{\"a\"}", "{a:1}", "\"\\x\"", "\"\\ud800\"", "\"\x01\"", "\"\xc3\"", "[1] 2", "nul", "'a'", "\"\xed\xa0\x80\""};
	wh_json j;
	for (size_t i = 0; i < sizeof valid / sizeof *valid; i++)
		CHECK(wh_json_parse(&j, valid[i], strlen(valid[i])) == 0, "valid %s: %s", valid[i], j.err);
	for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++)
		CHECK(wh_json_parse(&j, invalid[i], strlen(invalid[i])) < 0, "invalid %s accepted", invalid[i]);
	const char *doc = "{\"k\\u0065y\":\"v\\n\\u00e9\\ud83d\\ude00\",\"arr\":[1,[2,3],{\"x\":4}],\"z\":1}";
	CHECK(wh_json_parse(&j, doc, strlen(doc)) == 0, "parse: %s", j.err);
	size_t n;
	const char *v = wh_json_string(&j, wh_json_get(&j, 0, "key"), &n);
	CHECK(v && n == 8 && !memcmp(v, "v\n\xc3\xa9\xf0\x9f\x98\x80", 8), "escaped key/value: %s", v ? v : "(null)");
	int arr = wh_json_get(&j, 0, "arr"), count = 0;
	for (int c = wh_json_first(&j, arr); c >= 0; c = wh_json_next(&j, arr, c)) count++;
	CHECK(count == 3, "array elements %d", count);
	count = 0;
	for (int c = wh_json_first(&j, 0); c >= 0; c = wh_json_next(&j, 0, c)) count++;
	CHECK(count == 3, "object keys %d", count);
	double d;
	CHECK(wh_json_number(&j, wh_json_get(&j, 0, "z"), &d) && d == 1, "number");
	CHECK(wh_json_get(&j, 0, "missing") < 0, "missing key");
}

static void test_handle(void) {
	const char *out;
	mode = "echo";
	out = wh_mock_run(inv_doc("message.outbound", "{\"incoming\":\"q\",\"outgoing\":\"hello\"}", "{}"), NULL, NULL);
	CHECK(out && !strcmp(out, "{\"action\":\"continue\"}"), "continue: %s", out);
	CHECK(!strcmp(observed, "message.outbound|outgoing|hello|h|i-1|t"), "invocation: %s", observed);
	out = wh_mock_run(inv_doc("context.assemble", "{\"items\":[]}", "{}"), NULL, NULL);
	CHECK(!strcmp(observed, "context.assemble|||h|i-1|t"), "no primary: %s", observed);

	mode = "settings";
	out = wh_mock_run(inv_doc("message.inbound", "{\"incoming\":\"x\"}", "{\"s\":\"str\",\"f\":1.5,\"i\":7,\"b\":true,\"list\":[\"a\",\"b\"]}"), NULL, NULL);
	CHECK(out && !strcmp(observed, "str|1.5|7|1|2|b"), "settings: %s", observed);
	out = wh_mock_run(inv_doc("message.inbound", "{\"incoming\":\"x\"}", "{\"s\":null}"), NULL, NULL);
	CHECK(out && !strcmp(observed, "def|-1|-1|0|-1|"), "defaults: %s", observed);
	static const char *bad[] = {"{\"s\":1}", "{\"f\":\"1\"}", "{\"i\":1.5}", "{\"b\":0}", "{\"list\":\"a\"}", "{\"list\":[1]}"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		out = wh_mock_run(inv_doc("message.inbound", "{\"incoming\":\"x\"}", bad[i]), NULL, NULL);
		CHECK(!out && wh_last_failure && strstr(wh_last_failure, "setting \""), "bad setting %s: %s", bad[i], out);
	}

	mode = "modify";
	out = wh_mock_run(inv_doc("tool.after", "{\"tool\":\"t\",\"result\":\"x\"}", "{}"), NULL, NULL);
	CHECK(out && !strcmp(out, "{\"action\":\"modify\",\"context\":{\"result\":\"a\\\"b\\n\\u0001\"},\"reason\":\"r\",\"do_not_reply_again\":true}"), "modify: %s", out);
	out = wh_mock_run(inv_doc("context.assemble", "{\"items\":[]}", "{}"), NULL, NULL);
	CHECK(!out, "modify of the primary field at a point without one must fail: %s", out);
	mode = "block";
	out = wh_mock_run(inv_doc("message.inbound", "{\"incoming\":\"x\"}", "{}"), NULL, NULL);
	CHECK(out && !strcmp(out, "{\"action\":\"block\",\"reason\":\"bad\",\"user_message\":\"no\"}"), "block: %s", out);
	mode = "ask";
	out = wh_mock_run(inv_doc("tool.before", "{\"tool\":\"t\",\"arguments\":{}}", "{}"), NULL, NULL);
	CHECK(out && !strcmp(out, "{\"action\":\"ask\",\"reason\":\"check\"}"), "ask: %s", out);
	mode = "fail";
	out = wh_mock_run(inv_doc("message.inbound", "{\"incoming\":\"x\"}", "{}"), NULL, NULL);
	CHECK(!out && wh_last_failure && !strcmp(wh_last_failure, "because"), "fail: %s", wh_last_failure);
	out = wh_mock_run("{\"point\":1}", NULL, NULL);
	CHECK(!out, "a malformed invocation must fail");

	mode = "calls";
	out = wh_mock_run(inv_doc("message.inbound", "{\"incoming\":\"x\"}", "{}"), mock_ok, NULL);
	CHECK(out && !strcmp(observed, "0:sum\xc3\xa9|0:1:{\"a\":1}|0|0|"), "calls: %s", observed);
	CHECK(wh_mock.calls == 4, "calls made: %d", wh_mock.calls);
	out = wh_mock_run(inv_doc("message.inbound", "{\"incoming\":\"x\"}", "{}"), mock_err, NULL);
	CHECK(out && !strcmp(observed, "3:|3:0:null|3|3|not granted"), "denied: %s", observed);
	/* A reply larger than the scratch buffer is parked and taken. */
	static char big[70000];
	strcpy(big, "{\"text\":\"");
	memset(big + 9, 'x', 65000);
	strcpy(big + 9 + 65000, "\"}");
	big_reply = big;
	out = wh_mock_run(inv_doc("message.inbound", "{\"incoming\":\"x\"}", "{}"), mock_ok, NULL);
	CHECK(out && !strncmp(observed, "0:xxxxxxxxxx", 12), "big reply: %.40s", observed);
	big_reply = NULL;
}

static void test_regex(void) {
	static const struct { const char *re, *text; long start, end; } cases[] = {
		{"a+", "baaa", 1, 4}, {"a+?", "baaa", 1, 2}, {"\\bfoo\\b", "xfoo foo", 5, 8}, {"(?i)BEAR", "a bear", 2, 6},
		{"x{2,3}", "xxxxx", 0, 3}, {"x{2}", "x", -1, -1}, {"[^a-c]+", "abcdef", 3, 6}, {"a|ab", "ab", 0, 1},
		{"(?:ab)*c", "ababc", 0, 5}, {"^a", "ba", -1, -1}, {"a$", "ba", 1, 2}, {"\\d{3}", "ab1234", 2, 5},
		{"[\\s\\S]*?END", "x\nyEND", 0, 6}, {".", "\xc3\xa9", 0, 2}, {"(a*)*b", "aaab", 0, 4}, {"a{,2}", "a{,2}", 0, 5},
		/* Unicode simple case folding under (?i), as Go's (the corpus's
		 * redact-secrets/regexp-fold-*.json hold the engines to Go's answers) */
		{"(?i)k", "\xe2\x84\xaa", 0, 3}, {"(?i)[a-z]+", "s\xc5\xbfK", 0, 4}, {"(?i)[^a-z]", "\xe2\x84\xaa\xc5\xbf-", 5, 6},
		{"(?i)\xc3\xa9+", "\xc3\x89\xc3\xa9", 0, 4}, {"(?i)\\W", "\xe2\x84\xaa!", 3, 4}, {"(?i)[\\Ws]+", "\xe2\x84\xaa!\xc5\xbf", 3, 6},
		{"(?i)\xcf\x83+", "\xce\xa3\xcf\x82", 0, 4}, {"(?i)\xc3\x9f", "ss", -1, -1}, {"k", "\xe2\x84\xaa", -1, -1},
		/* a repetition of a character of several bytes repeats the character */
		{"\xc3\xbc{2}", "\xc3\xbc\xc3\xbc", 0, 4}, {"x\xc3\xa9+", "x\xc3\xa9\xc3\xa9", 0, 5},
		/* non-ASCII class members and ranges, negated a whole character at a time */
		{"[\xc3\xa9-\xc3\xab]+", "e\xc3\xa9\xc3\xab", 1, 5}, {"[^\xc3\x9f]", "\xc3\x9fx", 2, 3}, {"[^a]", "\xf0\x9f\x98\x80", 0, 4},
		{"[a-\xc3\xa9]+", "~\xc2\xa9\xc3\xaa", 0, 3}, {"[\\x{1F600}-\\x{1F64F}]", "a\xf0\x9f\x98\x81", 1, 5}, {"\\x{e9}", "\xc3\xa9", 0, 2},
		{"(?i)[\xd0\xb0-\xd1\x8f]+", "\xd0\x9f\xd1\x80", 0, 4}, {"(?i)[^\xc3\xa0-\xc3\xa5]", "\xc3\x80\xc3\x86", 2, 4}, {"[^\xef\xbf\xbd]", "\xff", -1, -1},
		{"[\xef\xbf\xbd]", "a\xff", 1, 2}, {"[\\w\\x{e9}]+", "\xc3\xa9" "a", 0, 3}, {"(?i)[\\W\\x{17F}]", "\xc5\xbf", 0, 2}, {"(?i)[K\\W]", "\xe2\x84\xaa", 0, 3},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *err = NULL;
		wh_re *re = wh_re_compile(cases[i].re, strlen(cases[i].re), &err);
		CHECK(re, "compile %s: %s", cases[i].re, err);
		if (!re) continue;
		long m[2], sub[2];
		int r = wh_re_match(re, cases[i].text, strlen(cases[i].text), 0, m, sub);
		if (cases[i].start < 0) CHECK(r == 0, "%s on %s matched", cases[i].re, cases[i].text);
		else CHECK(r == 1 && m[0] == cases[i].start && m[1] == cases[i].end, "%s on %s: %d [%ld,%ld]", cases[i].re, cases[i].text, r, m[0], m[1]);
	}
	static const char *invalid[] = {"(", ")", "a**", "*", "a{2,1}", "[b-a]", "[a", "\\p{L}", "x{1001}", "(?P<a b>x)", "\\",
		"[\xc3\xaa-\xc3\xa9]", "[\xc3]", "\\x{110000}", "\\x{}", "\\x{41"};
	for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
		const char *err = NULL;
		CHECK(!wh_re_compile(invalid[i], strlen(invalid[i]), &err) && err, "invalid %s compiled", invalid[i]);
	}
	const char *err;
	const char *pat = "(?i)bearer\\s+(?P<secret>\\w+)";
	wh_re *re = wh_re_compile(pat, strlen(pat), &err);
	long m[2], sub[2];
	CHECK(re && wh_re_match(re, "Bearer abc", 10, 0, m, sub) == 1 && sub[0] == 7 && sub[1] == 10, "secret group");
	/* A class holds at most WH_RE_CLASS_RANGES non-ASCII ranges, a pattern
	 * WH_RE_MAX_RANGES: 64 separate characters fit in a class, 65 do not;
	 * eight such classes fit in a pattern, nine do not. */
	static char cls[1200];
	for (int want = 64; want <= 65; want++) {
		size_t n = 0;
		cls[n++] = '[';
		for (int i = 0; i < want; i++) n += (size_t)sprintf(cls + n, "\\x{%x}", 0x100 + 2 * i);
		cls[n++] = ']';
		err = NULL;
		re = wh_re_compile(cls, n, &err);
		CHECK(want == 64 ? re && wh_re_match(re, "\xc4\x82", 2, 0, m, sub) == 1 : !re && err && strstr(err, "too many"), "%d ranges: %s", want, err ? err : "compiled");
		static char pat[12000];
		for (int k = 8; k <= 9 && want == 64; k++) {
			for (int i = 0; i < k; i++) memcpy(pat + n * (size_t)i, cls, n);
			err = NULL;
			re = wh_re_compile(pat, n * (size_t)k, &err);
			CHECK(k == 8 ? re != NULL : !re && err && strstr(err, "too many"), "%d classes: %s", k, err ? err : "compiled");
		}
	}
	/* The node and program arrays grow (wh__grow) up to their bounds, and
	 * no further: 3,999 literals and a concatenation are 4,000 nodes; 39
	 * copies of a{1000} are 39,003 instructions, 40 over 40,000. What grew
	 * through many moves still matches. */
	static char text[39000];
	memset(text, 'a', sizeof text);
	static const struct { const char *re; size_t n; int ok; } bounds[] = {
		{text, 3999, 1}, {text, 4000, 0}, {"(?:a{1000}){39}", 15, 1}, {"(?:a{1000}){40}", 15, 0},
	};
	for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++) {
		err = NULL;
		re = wh_re_compile(bounds[i].re, bounds[i].n, &err);
		if (!bounds[i].ok) {
			CHECK(!re && err && strcmp(err, "expression too large") == 0, "bound %zu: compiled, or %s", i, err ? err : "no error");
			continue;
		}
		size_t want = bounds[i].re == text ? bounds[i].n : sizeof text;
		CHECK(re && wh_re_match(re, text, sizeof text, 0, m, sub) == 1 && m[0] == 0 && (size_t)m[1] == want,
			"bound %zu: %s", i, re ? "no match" : err);
	}
}

/* wh__fold_next is unicode.SimpleFold for every rune: its FNV-1a sum is
 * the one sdk/internal/foldgen computed from Go's table. */
static void test_fold_table(void) {
	uint32_t h = 2166136261u;
	for (uint32_t r = 0; r <= 0x10FFFF; r++) {
		uint32_t v = wh__fold_next(r);
		for (int i = 0; i < 4; i++) h = (h ^ ((v >> (8 * i)) & 255)) * 16777619u;
	}
	CHECK(h == WH__FOLD_SUM, "fold table sum %08x, want %08x", h, WH__FOLD_SUM);
}

/* The eight-bytes-at-a-time scanners agree with a byte loop on every
 * length and alignment, over bytes drawn to hit each special class. */
static void test_swar(void) {
	static const unsigned char alphabet[] = {'a', 'Z', ' ', '"', '\\', 0x1f, 0x00, 0x7f, 0x80, 0xc3, 0xff, 'e', 'b'};
	unsigned seed = 1;
	char buf[40];
	for (int round = 0; round < 20000; round++) {
		size_t n = (size_t)(round % 37);
		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			/* mostly plain, now and then one special byte */
			buf[i] = (char)((seed >> 16) % 4 ? 'a' + (seed >> 20) % 26 : alphabet[(seed >> 20) % sizeof alphabet]);
		}
		for (int stop = 0; stop < 2; stop++) {
			size_t want = 0;
			while (want < n) {
				unsigned char c = (unsigned char)buf[want];
				if (c < 0x20 || c == '"' || c == '\\' || (stop && c >= 0x80)) break;
				want++;
			}
			size_t got = wh__plain_run(buf, n, stop);
			CHECK(got == want, "wh__plain_run(round %d, n %zu, stop %d) = %zu, want %zu", round, n, stop, got, want);
		}
		unsigned char a = alphabet[round % sizeof alphabet], b = (unsigned char)('a' + round % 26);
		size_t want = 0;
		while (want < n && (unsigned char)buf[want] != a && (unsigned char)buf[want] != b) want++;
		size_t got = wh__find2(buf, n, a, b);
		CHECK(got == want, "wh__find2(round %d, n %zu, %02x, %02x) = %zu, want %zu", round, n, a, b, got, want);
	}
}

/* wh_re_may_match rules a pattern out only when the text lacks a byte every
 * match contains, or every byte a match can start with. */
static void test_may_match(void) {
	const char *err;
	wh_byteset set;
	const char *skp = "\\bsk-[A-Za-z0-9]{4,}", *bp = "(?i)\\bbearer\\s+\\w+";
	wh_re *sk = wh_re_compile(skp, strlen(skp), &err);
	wh_re *bearer = wh_re_compile(bp, strlen(bp), &err);
	wh_re *any = wh_re_compile("x*", 2, &err);
	CHECK(sk && bearer && any, "compile");
	if (!sk || !bearer || !any) return;
	wh_byteset_of(&set, "ask me", 6);
	CHECK(!wh_re_may_match(sk, &set), "sk- without '-'");
	wh_byteset_of(&set, "key sk-abcd", 11);
	CHECK(wh_re_may_match(sk, &set), "sk- present");
	wh_byteset_of(&set, "no such word here", 17);
	CHECK(!wh_re_may_match(bearer, &set), "bearer without b or B");
	wh_byteset_of(&set, "Bearer abc", 10);
	CHECK(wh_re_may_match(bearer, &set), "Bearer present");
	wh_byteset_of(&set, "", 0);
	CHECK(wh_re_may_match(any, &set), "an empty match needs nothing");
}

/* The prefilters (required bytes, the first-byte set and its two-byte
 * search, wh_re_may_match) never lose a match: random patterns over random
 * texts (case-insensitive letters, classes, alternations, assertions,
 * non-ASCII bytes, the Kelvin sign, the long s and Greek sigmas) match
 * exactly as the same program run at every position with no filter, and
 * may_match is 1 whenever it matches. */
static void test_prefilter_differential(void) {
	static const char *atoms[] = {"a", "b", "k", "K", "-", "[a-c]", "[^a]", "\\w", "\\s", "\\d", ".", "(?i)k",
		"(?i:ab)", "(a|b)", "(?:ab|c)", "\\b", "^", "$", "\xc3\xa9", "[\xc3\xa9-\xc3\xaa]", "x?", "(?i)\xc3\xa9", "\\S",
		"(?s).", "[[:alpha:]]", "(?i)[k-m]", "(?m)^", "a*", "b+", "(?i)s", "\xc5\xbf", "[^\\x00-\\x7f]", "sk-", "(?i)bearer",
		"(?i)[^a-z]", "(?i)\\w", "(?i)\\W", "(?i)\xcf\x83", "(?i)[\\Ws]", "(?i)\xe2\x84\xaa",
		"[^\xc3\x9f]", "[a-\xc3\xa9]", "(?i)[\xc3\xa0-\xc3\xa5]", "(?i)[^\xc3\xa0-\xc3\xa5]", "[\xd0\xb0-\xd1\x8f]", "(?i)[\xd0\xb0-\xd1\x8f]",
		"[\\x{1F600}-\\x{1F64F}]", "[\xce\xb1-\xcf\x89]", "[\\x{3a3}\\x{17F}]", "[^\\x{80}-\\x{10FFFF}]", "[\\x{FFFD}]", "\\x{e9}"};
	static const char *chars[] = {"a", "b", "k", "K", "-", " ", "x", "\xc3\xa9", "\n", "_", "\xe2\x84\xaa", "\xc5\xbf", "s", "S", "\xce\xa3", "\xcf\x82", "\xc3\x89",
		"\xc3\x9f", "\xc3\x80", "\xd0\x9f", "\xd1\x80", "\xf0\x9f\x98\x81", "\xff", "\xce\xbb", "\xc2\xa9"};
	unsigned seed = 11;
#define RND(n) ((seed = seed * 1103515245u + 12345u), (seed >> 16) % (unsigned)(n))
	char pat[256], txt[128];
	int compiled = 0;
	for (int round = 0; round < 30000; round++) {
		pat[0] = 0;
		for (unsigned i = 0, na = 1 + RND(4); i < na; i++) {
			strcat(pat, atoms[RND(sizeof atoms / sizeof *atoms)]);
			if (RND(5) == 0) strcat(pat, RND(2) ? "*" : "+");
			if (RND(9) == 0 && i + 1 < na) strcat(pat, "|");
		}
		const char *err;
		wh_re *re = wh_re_compile(pat, strlen(pat), &err);
		if (!re) continue;
		compiled++;
		wh_re ref = *re;
		ref.nfirstb = 0, ref.first_any = 1, ref.nrequired = 0;
		size_t n = 0;
		for (unsigned i = 0, nc = RND(24); i < nc; i++) {
			const char *c = chars[RND(sizeof chars / sizeof *chars)];
			memcpy(txt + n, c, strlen(c));
			n += strlen(c);
		}
		for (size_t from = 0; from <= n && from < 3; from++) {
			long m1[2], s1[2], m2[2], s2[2];
			int got = wh_re_match(re, txt, n, from, m1, s1), want = wh_re_match(&ref, txt, n, from, m2, s2);
			CHECK(got == want && (got != 1 || (m1[0] == m2[0] && m1[1] == m2[1])),
			      "pattern %s on %.*s from %zu: %d [%ld,%ld], unfiltered %d [%ld,%ld]", pat, (int)n, txt, from, got, m1[0], m1[1], want, m2[0], m2[1]);
		}
		long m[2], sub[2];
		wh_byteset set;
		wh_byteset_of(&set, txt, n);
		CHECK(wh_re_match(&ref, txt, n, 0, m, sub) != 1 || wh_re_may_match(re, &set), "may_match(%s) ruled out a match in %.*s", pat, (int)n, txt);
	}
	CHECK(compiled > 10000, "only %d patterns compiled", compiled);
#undef RND
}

int main(void) {
	test_fold_table();
	test_prefilter_differential();
	test_may_match();
	test_swar();
	test_json();
	test_handle();
	test_regex();
	if (failures) { fprintf(stderr, "FAIL: %d\n", failures); return 1; }
	printf("ok: C SDK native tests\n");
	return 0;
}
