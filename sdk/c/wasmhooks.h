/* wasmhooks.h: the C SDK for wasmhooks hooks (hook ABI v1, ABI.md).
 *
 * One header, no other dependency than a C11 compiler and wasi-libc (or any
 * libc when built natively for tests). It gives what the Go SDK (sdk/) gives:
 *
 *   - the hook_v1_handle export and the hook_v1.host_call import, the take of
 *     the invocation document, pointer packing and status codes;
 *   - the invocation decoded: point, primary field and text, context fields,
 *     settings (typed accessors that record type errors), meta;
 *   - a small JSON reader (wh_json_*) and writer (wh_buf_*);
 *   - the decisions: continue, modify (a field, or the point's primary field),
 *     block, ask, with reason, user message and do_not_reply_again; and
 *     failing the hook (wh_fail), which the host's failure policy handles;
 *   - host calls: wh_call, wh_llm_run, wh_kv_get, wh_kv_set, wh_log, each
 *     returning the ABI status (WH_OK = 0), taking parked replies as needed;
 *   - a native test double: built for anything but wasm, host_call is served
 *     by wh_mock_*, so a hook's C code runs in a plain native test.
 *
 * A hook defines exactly one function and includes this header once:
 *
 *   #include "wasmhooks.h"
 *   wh_decision wh_handle(wh_invocation *inv) {
 *       const char *word = wh_setting_string(inv, "word", "secret");
 *       if (inv->setting_error) return wh_fail(inv->setting_error);
 *       ...
 *       return wh_continue();
 *   }
 *
 * Build (Debian: apt-get install clang lld wasi-libc libclang-rt-dev-wasm32):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -mbulk-memory -O2 \
 *     -Wl,--export=hook_v1_handle -Wl,--strip-all -o hook.wasm hook.c
 *
 * Memory: everything the SDK returns (decoded strings, replies, buffers) is
 * allocated with wh_alloc from an arena that is reset when the next
 * invocation starts, after the host has copied the previous decision. A hook
 * needs no free(). The strict JSON rules are the host's: it validated every
 * document it hands the hook (ABI.md, Strict JSON); the reader here checks
 * the grammar, escapes and UTF-8 again, but not duplicate keys or number
 * limits.
 */
#ifndef WASMHOOKS_H
#define WASMHOOKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Every SDK function is static: the header is included once per hook. */
#define WH_API static __attribute__((unused))

/* ---- status codes (ABI.md, Status codes) ---- */
enum {
	WH_OK = 0,
	WH_UNKNOWN_CAPABILITY = 1,
	WH_INVALID_REQUEST = 2,
	WH_DENIED = 3,
	WH_INSUFFICIENT_CREDIT = 4,
	WH_CAPABILITY_FAILED = 5,
	WH_RESULT_TOO_LARGE = 6,
	WH_REQUEST_TOO_LARGE = 7,
	WH_BUFFER_TOO_SMALL = 8,
	WH_NO_PENDING = 9,
	WH_QUOTA_EXCEEDED = 10,
	WH_NOT_IN_INVOCATION = 11,
	WH_RATE_LIMITED = 12,
	/* Not an ABI status: the SDK's own, for a result it cannot read (the Go
	 * SDK's ErrMalformedResult) or memory it cannot get. */
	WH_MALFORMED_RESULT = 0x10000,
	WH_NO_MEMORY = 0x10001
};

WH_API const char *wh_status_code(uint32_t s) {
	static const char *codes[] = {"ok", "unknown_capability", "invalid_request", "denied",
		"insufficient_credit", "capability_failed", "result_too_large", "request_too_large",
		"buffer_too_small", "no_pending", "quota_exceeded", "not_in_invocation", "rate_limited"};
	if (s < sizeof codes / sizeof codes[0]) return codes[s];
	if (s == WH_MALFORMED_RESULT) return "malformed_result";
	if (s == WH_NO_MEMORY) return "no_memory";
	return "unknown_status";
}

/* ---- the arena ---- */
typedef struct wh_chunk { struct wh_chunk *next; size_t cap, used; } wh_chunk;
static wh_chunk *wh_arena_head;
/* wh_persistent, while set, makes wh_alloc allocate with malloc memory that
 * is never freed: for what a hook caches across invocations (compiled
 * patterns, say). Set it, build the cached value, clear it. */
static int wh_persistent;

/* wh_alloc returns n bytes (8-aligned) that live until the next invocation
 * starts, or NULL. */
WH_API void *wh_alloc(size_t n) {
	n = (n + 7) & ~(size_t)7;
	if (wh_persistent) return malloc(n ? n : 1);
	wh_chunk *c = wh_arena_head;
	if (!c || c->cap - c->used < n) {
		size_t cap = 64 << 10;
		if (c && c->cap > cap) cap = c->cap;
		if (cap < n) cap = n;
		c = (wh_chunk *)malloc(sizeof(wh_chunk) + cap);
		if (!c) return NULL;
		c->cap = cap;
		c->used = 0;
		c->next = wh_arena_head;
		wh_arena_head = c;
	}
	void *p = (char *)(c + 1) + c->used;
	c->used += n;
	return p;
}

/* wh_arena_reset frees everything wh_alloc returned but keeps the newest
 * chunk for reuse. */
WH_API void wh_arena_reset(void) {
	wh_chunk *c = wh_arena_head;
	if (!c) return;
	wh_chunk *rest = c->next;
	c->next = NULL;
	c->used = 0;
	while (rest) {
		wh_chunk *n = rest->next;
		free(rest);
		rest = n;
	}
}

WH_API char *wh_strndup(const char *s, size_t n) {
	char *p = (char *)wh_alloc(n + 1);
	if (!p) return NULL;
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

/* ---- a growable byte buffer ---- */
typedef struct { char *p; size_t n, cap; int oom; } wh_buf;

WH_API int wh_buf_grow(wh_buf *b, size_t extra) {
	if (b->oom) return 0;
	if (b->cap - b->n >= extra + 1) return 1;
	size_t cap = b->cap ? b->cap * 2 : 256;
	while (cap - b->n < extra + 1) cap *= 2;
	char *p = (char *)wh_alloc(cap);
	if (!p) { b->oom = 1; return 0; }
	if (b->n) memcpy(p, b->p, b->n);
	b->p = p;
	b->cap = cap;
	return 1;
}
WH_API void wh_buf_put(wh_buf *b, const char *s, size_t n) {
	if (!wh_buf_grow(b, n)) return;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}
WH_API void wh_buf_puts(wh_buf *b, const char *s) { wh_buf_put(b, s, strlen(s)); }
WH_API void wh_buf_byte(wh_buf *b, char c) { wh_buf_put(b, &c, 1); }
WH_API void wh_buf_int(wh_buf *b, long long v) {
	char tmp[24];
	int i = 23;
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	tmp[i] = 0;
	do { tmp[--i] = (char)('0' + u % 10); u /= 10; } while (u);
	if (v < 0) tmp[--i] = '-';
	wh_buf_puts(b, tmp + i);
}
/* wh__plain_run returns how many bytes from s[0] on, at most n, are plain
 * ASCII inside a JSON string: not a control character, '"', '\\' or a
 * byte >= 0x80. Eight bytes at a time (SWAR): in wasm, a loop per byte
 * costs about four times the instructions. */
#define WH__ONES 0x0101010101010101ULL
#define WH__HIGHS 0x8080808080808080ULL
WH_API size_t wh__plain_run(const char *s, size_t n, int stop_nonascii) {
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v;
		memcpy(&v, s + i, 8);
		uint64_t q = v ^ (WH__ONES * '"'), b = v ^ (WH__ONES * '\\');
		uint64_t hit = ((v - WH__ONES * 0x20) & ~v) | ((q - WH__ONES) & ~q) | ((b - WH__ONES) & ~b);
		if (stop_nonascii) hit |= v;
		if (hit & WH__HIGHS) break;
	}
	for (; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == '"' || c == '\\' || (stop_nonascii && c >= 0x80)) break;
	}
	return i;
}
/* wh_buf_json_string appends s (UTF-8) as a JSON string literal. */
WH_API void wh_buf_json_string(wh_buf *b, const char *s, size_t n) {
	static const char hex[] = "0123456789abcdef";
	wh_buf_byte(b, '"');
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		i += wh__plain_run(s + i, n - i, 0);
		if (i >= n) break;
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;
		char u[7];
		if (c == '"') esc = "\\\"";
		else if (c == '\\') esc = "\\\\";
		else if (c == '\n') esc = "\\n";
		else if (c == '\r') esc = "\\r";
		else if (c == '\t') esc = "\\t";
		else if (c < 0x20) {
			u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0';
			u[4] = hex[c >> 4]; u[5] = hex[c & 15]; u[6] = 0;
			esc = u;
		}
		if (esc) {
			wh_buf_put(b, s + run, i - run);
			wh_buf_puts(b, esc);
			run = i + 1;
		}
	}
	wh_buf_put(b, s + run, n - run);
	wh_buf_byte(b, '"');
}

/* ---- the JSON reader ---- */
enum { WH_JNULL, WH_JFALSE, WH_JTRUE, WH_JNUMBER, WH_JSTRING, WH_JARRAY, WH_JOBJECT };

/* A token is one value; an object's children alternate key and value.
 * next is the index of the token after this value's subtree. */
typedef struct { uint8_t type; uint32_t start, end, next, count; } wh_tok;

typedef struct {
	const char *src;
	size_t len;
	wh_tok *t;
	uint32_t n, cap;
	const char *err; /* NULL when the parse succeeded */
	size_t err_at;
} wh_json;

#define WH_JSON_MAX_DEPTH 128

WH_API int wh__jerr(wh_json *j, size_t at, const char *msg) {
	if (!j->err) { j->err = msg; j->err_at = at; }
	return -1;
}
WH_API int wh__jtok(wh_json *j, uint8_t type, size_t start) {
	if (j->n == j->cap) {
		uint32_t cap = j->cap ? j->cap * 2 : 64;
		wh_tok *t = (wh_tok *)wh_alloc(sizeof(wh_tok) * cap);
		if (!t) return wh__jerr(j, start, "out of memory");
		if (j->n) memcpy(t, j->t, sizeof(wh_tok) * j->n);
		j->t = t;
		j->cap = cap;
	}
	wh_tok *k = &j->t[j->n];
	k->type = type;
	k->start = (uint32_t)start;
	k->end = k->next = k->count = 0;
	return (int)j->n++;
}
WH_API size_t wh__ws(const wh_json *j, size_t i) {
	while (i < j->len && (j->src[i] == ' ' || j->src[i] == '\t' || j->src[i] == '\n' || j->src[i] == '\r')) i++;
	return i;
}
WH_API int wh__hex(char c) {
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}
/* wh_utf8_len returns the length of the valid UTF-8 sequence at s[0..n),
 * or 0 if it is not one. */
WH_API size_t wh_utf8_len(const unsigned char *s, size_t n, uint32_t *cp) {
	unsigned char c = s[0];
	if (c < 0x80) { if (cp) *cp = c; return 1; }
	size_t len;
	uint32_t v, min;
	if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
	else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
	else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
	else return 0;
	if (n < len) return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80) return 0;
		v = (v << 6) | (s[i] & 0x3F);
	}
	if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
	if (cp) *cp = v;
	return len;
}
WH_API size_t wh__jstring(wh_json *j, size_t i) { /* i at the opening quote */
	i++;
	while (i < j->len) {
		i += wh__plain_run(j->src + i, j->len - i, 1);
		if (i >= j->len) break;
		unsigned char c = (unsigned char)j->src[i];
		if (c == '"') return i + 1;
		if (c < 0x20) return (size_t)wh__jerr(j, i, "control character in string");
		if (c == '\\') {
			if (i + 1 >= j->len) break;
			char e = j->src[i + 1];
			if (e == 'u') {
				if (i + 6 > j->len) break;
				int v = 0;
				for (int k = 2; k < 6; k++) {
					int h = wh__hex(j->src[i + k]);
					if (h < 0) return (size_t)wh__jerr(j, i, "invalid \\u escape");
					v = v * 16 + h;
				}
				i += 6;
				if (v >= 0xDC00 && v <= 0xDFFF) return (size_t)wh__jerr(j, i, "lone surrogate");
				if (v >= 0xD800 && v <= 0xDBFF) {
					int w = 0;
					if (i + 6 > j->len || j->src[i] != '\\' || j->src[i + 1] != 'u') return (size_t)wh__jerr(j, i, "lone surrogate");
					for (int k = 2; k < 6; k++) {
						int h = wh__hex(j->src[i + k]);
						if (h < 0) return (size_t)wh__jerr(j, i, "invalid \\u escape");
						w = w * 16 + h;
					}
					if (w < 0xDC00 || w > 0xDFFF) return (size_t)wh__jerr(j, i, "lone surrogate");
					i += 6;
				}
				continue;
			}
			if (!strchr("\"\\/bfnrt", e) || e == 0) return (size_t)wh__jerr(j, i, "invalid escape");
			i += 2;
			continue;
		}
		size_t l = wh_utf8_len((const unsigned char *)j->src + i, j->len - i, NULL);
		if (!l) return (size_t)wh__jerr(j, i, "invalid UTF-8");
		i += l;
	}
	return (size_t)wh__jerr(j, i, "unterminated string");
}
WH_API size_t wh__jnumber(wh_json *j, size_t i) {
	size_t s = i;
	if (i < j->len && j->src[i] == '-') i++;
	if (i < j->len && j->src[i] == '0') i++;
	else if (i < j->len && j->src[i] >= '1' && j->src[i] <= '9') { while (i < j->len && j->src[i] >= '0' && j->src[i] <= '9') i++; }
	else return (size_t)wh__jerr(j, s, "invalid number");
	if (i < j->len && j->src[i] == '.') {
		i++;
		if (!(i < j->len && j->src[i] >= '0' && j->src[i] <= '9')) return (size_t)wh__jerr(j, s, "invalid number");
		while (i < j->len && j->src[i] >= '0' && j->src[i] <= '9') i++;
	}
	if (i < j->len && (j->src[i] == 'e' || j->src[i] == 'E')) {
		i++;
		if (i < j->len && (j->src[i] == '+' || j->src[i] == '-')) i++;
		if (!(i < j->len && j->src[i] >= '0' && j->src[i] <= '9')) return (size_t)wh__jerr(j, s, "invalid number");
		while (i < j->len && j->src[i] >= '0' && j->src[i] <= '9') i++;
	}
	return i;
}
/* wh__jvalue parses the value at i; returns the index after it or
 * (size_t)-1. */
WH_API size_t wh__jvalue(wh_json *j, size_t i, int depth) {
	i = wh__ws(j, i);
	if (i >= j->len) return (size_t)wh__jerr(j, i, "unexpected end");
	char c = j->src[i];
	int k;
	if (c == '{' || c == '[') {
		if (depth >= WH_JSON_MAX_DEPTH) return (size_t)wh__jerr(j, i, "too deep");
		int obj = c == '{';
		if ((k = wh__jtok(j, obj ? WH_JOBJECT : WH_JARRAY, i)) < 0) return (size_t)-1;
		uint32_t count = 0;
		i = wh__ws(j, i + 1);
		if (i < j->len && j->src[i] == (obj ? '}' : ']')) {
			i++;
		} else {
			for (;;) {
				if (obj) {
					i = wh__ws(j, i);
					if (i >= j->len || j->src[i] != '"') return (size_t)wh__jerr(j, i, "want a key");
					int kk = wh__jtok(j, WH_JSTRING, i);
					if (kk < 0) return (size_t)-1;
					i = wh__jstring(j, i);
					if (i == (size_t)-1) return i;
					j->t[kk].end = (uint32_t)i;
					j->t[kk].next = j->n;
					i = wh__ws(j, i);
					if (i >= j->len || j->src[i] != ':') return (size_t)wh__jerr(j, i, "want ':'");
					i++;
				}
				i = wh__jvalue(j, i, depth + 1);
				if (i == (size_t)-1) return i;
				count++;
				i = wh__ws(j, i);
				if (i < j->len && j->src[i] == ',') { i++; continue; }
				if (i < j->len && j->src[i] == (obj ? '}' : ']')) { i++; break; }
				return (size_t)wh__jerr(j, i, obj ? "want ',' or '}'" : "want ',' or ']'");
			}
		}
		j->t[k].end = (uint32_t)i;
		j->t[k].count = count;
		j->t[k].next = j->n;
		return i;
	}
	uint8_t type;
	size_t e;
	if (c == '"') { type = WH_JSTRING; e = wh__jstring(j, i); }
	else if (c == '-' || (c >= '0' && c <= '9')) { type = WH_JNUMBER; e = wh__jnumber(j, i); }
	else if (j->len - i >= 4 && !memcmp(j->src + i, "null", 4)) { type = WH_JNULL; e = i + 4; }
	else if (j->len - i >= 4 && !memcmp(j->src + i, "true", 4)) { type = WH_JTRUE; e = i + 4; }
	else if (j->len - i >= 5 && !memcmp(j->src + i, "false", 5)) { type = WH_JFALSE; e = i + 5; }
	else return (size_t)wh__jerr(j, i, "invalid value");
	if (e == (size_t)-1) return e;
	if ((k = wh__jtok(j, type, i)) < 0) return (size_t)-1;
	j->t[k].end = (uint32_t)e;
	j->t[k].next = j->n;
	return e;
}

/* wh_json_parse parses src[0..len) into j; returns 0, or -1 with j->err
 * and j->err_at set. Token 0 is the top-level value. */
WH_API int wh_json_parse(wh_json *j, const char *src, size_t len) {
	memset(j, 0, sizeof *j);
	j->src = src;
	j->len = len;
	size_t i = wh__jvalue(j, 0, 0);
	if (i == (size_t)-1) return -1;
	if (wh__ws(j, i) != len) return wh__jerr(j, i, "data after the value");
	return 0;
}

WH_API int wh_json_type(const wh_json *j, int tok) { return tok < 0 ? -1 : j->t[tok].type; }

/* wh_json_string decodes string token tok into a NUL-terminated arena copy
 * (which may hold NULs from \u0000; *n is the length). NULL if tok is not a
 * string. */
WH_API char *wh_json_string(const wh_json *j, int tok, size_t *n) {
	if (tok < 0 || j->t[tok].type != WH_JSTRING) return NULL;
	const char *s = j->src + j->t[tok].start + 1;
	size_t len = j->t[tok].end - j->t[tok].start - 2;
	char *out = (char *)wh_alloc(len + 1);
	if (!out) return NULL;
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		if (s[i] != '\\') {
			const char *bs = (const char *)memchr(s + i, '\\', len - i);
			size_t run = bs ? (size_t)(bs - (s + i)) : len - i;
			memcpy(out + o, s + i, run);
			o += run;
			i += run;
			continue;
		}
		char e = s[i + 1];
		i += 2;
		switch (e) {
		case 'b': out[o++] = '\b'; break;
		case 'f': out[o++] = '\f'; break;
		case 'n': out[o++] = '\n'; break;
		case 'r': out[o++] = '\r'; break;
		case 't': out[o++] = '\t'; break;
		case 'u': {
			uint32_t v = 0;
			for (int k = 0; k < 4; k++) v = v * 16 + (uint32_t)wh__hex(s[i + k]);
			i += 4;
			if (v >= 0xD800 && v <= 0xDBFF) {
				uint32_t w = 0;
				for (int k = 2; k < 6; k++) w = w * 16 + (uint32_t)wh__hex(s[i + k]);
				i += 6;
				v = 0x10000 + ((v - 0xD800) << 10) + (w - 0xDC00);
			}
			if (v < 0x80) out[o++] = (char)v;
			else if (v < 0x800) { out[o++] = (char)(0xC0 | v >> 6); out[o++] = (char)(0x80 | (v & 63)); }
			else if (v < 0x10000) { out[o++] = (char)(0xE0 | v >> 12); out[o++] = (char)(0x80 | ((v >> 6) & 63)); out[o++] = (char)(0x80 | (v & 63)); }
			else { out[o++] = (char)(0xF0 | v >> 18); out[o++] = (char)(0x80 | ((v >> 12) & 63)); out[o++] = (char)(0x80 | ((v >> 6) & 63)); out[o++] = (char)(0x80 | (v & 63)); }
			break;
		}
		default: out[o++] = e;
		}
	}
	out[o] = 0;
	if (n) *n = o;
	return out;
}

/* wh_json_key_is reports whether string token tok decodes to key. */
WH_API int wh_json_key_is(const wh_json *j, int tok, const char *key) {
	const char *s = j->src + j->t[tok].start + 1;
	size_t len = j->t[tok].end - j->t[tok].start - 2, kl = strlen(key);
	if (!memchr(s, '\\', len)) return len == kl && !memcmp(s, key, kl);
	size_t n;
	char *d = wh_json_string(j, tok, &n);
	return d && n == kl && !memcmp(d, key, kl);
}

/* wh_json_get returns the value token of key in object tok, or -1. */
WH_API int wh_json_get(const wh_json *j, int tok, const char *key) {
	if (tok < 0 || j->t[tok].type != WH_JOBJECT) return -1;
	uint32_t i = (uint32_t)tok + 1;
	for (uint32_t c = 0; c < j->t[tok].count; c++) {
		uint32_t v = i + 1;
		if (wh_json_key_is(j, (int)i, key)) return (int)v;
		i = j->t[v].next;
	}
	return -1;
}

/* Iterating over an array or object tok:
 *
 *   for (int c = wh_json_first(j, tok); c >= 0; c = wh_json_next(j, tok, c))
 *
 * visits each element of an array, or each key of an object (its value is
 * the token c + 1). */
WH_API int wh_json_first(const wh_json *j, int tok) {
	return (tok >= 0 && j->t[tok].count > 0) ? tok + 1 : -1;
}
WH_API int wh_json_next(const wh_json *j, int tok, int c) {
	uint32_t n = j->t[tok].type == WH_JOBJECT ? j->t[c + 1].next : j->t[c].next;
	return n < j->t[tok].next ? (int)n : -1;
}

/* wh_json_number reads number token tok as a double; 0 if it is not one. */
WH_API int wh_json_number(const wh_json *j, int tok, double *out) {
	if (tok < 0 || j->t[tok].type != WH_JNUMBER) return 0;
	char tmp[130]; /* strict JSON numbers are at most 128 bytes */
	size_t n = j->t[tok].end - j->t[tok].start;
	if (n >= sizeof tmp) return 0;
	memcpy(tmp, j->src + j->t[tok].start, n);
	tmp[n] = 0;
	*out = strtod(tmp, NULL);
	return 1;
}

/* wh_json_raw returns the raw text of token tok. */
WH_API const char *wh_json_raw(const wh_json *j, int tok, size_t *n) {
	*n = j->t[tok].end - j->t[tok].start;
	return j->src + j->t[tok].start;
}

/* ---- the invocation ---- */
typedef struct {
	wh_json doc;
	const char *point;         /* "message.outbound", ... */
	const char *primary_field; /* "outgoing", ...; "" at a point without one */
	int context, settings;     /* object tokens (settings may be -1) */
	int primary;               /* the primary field's value token, or -1 */
	const char *primary_text;  /* the primary field if it is a string, else "" */
	size_t primary_len;
	const char *hook, *invocation_id, *tenant; /* meta */
	/* setting_error is set by the first setting accessor that found a value
	 * of the wrong type (the Go SDK's SettingsErr). */
	const char *setting_error;
} wh_invocation;

WH_API const char *wh_primary_field_of(const char *point) {
	static const char *const table[][2] = {
		{"message.inbound", "incoming"}, {"message.outbound", "outgoing"},
		{"tool.before", "arguments"},    {"tool.after", "result"},
		{"llm.before", "prompt"},        {"llm.after", "response"},
		{"context.assemble", ""},        {"compaction", "summary"},
		{"memory.read", "value"},        {"memory.write", "value"},
	};
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (!strcmp(point, table[i][0])) return table[i][1];
	return "";
}

/* wh_context returns the value token of context field key, or -1. */
WH_API int wh_context(const wh_invocation *inv, const char *key) { return wh_json_get(&inv->doc, inv->context, key); }
/* wh_context_string returns context field key if it is a string, else "". */
WH_API const char *wh_context_string(const wh_invocation *inv, const char *key, size_t *n) {
	int t = wh_context(inv, key);
	const char *s = wh_json_type(&inv->doc, t) == WH_JSTRING ? wh_json_string(&inv->doc, t, n) : NULL;
	if (!s) { if (n) *n = 0; return ""; }
	return s;
}

/* wh_setting returns the value token of setting key, or -1 if it is absent
 * or null. */
WH_API int wh_setting(const wh_invocation *inv, const char *key) {
	int t = wh_json_get(&inv->doc, inv->settings, key);
	return wh_json_type(&inv->doc, t) == WH_JNULL ? -1 : t;
}
WH_API void wh__bad_setting(wh_invocation *inv, const char *key, const char *want) {
	if (inv->setting_error) return;
	wh_buf b = {0};
	wh_buf_puts(&b, "setting \"");
	wh_buf_puts(&b, key);
	wh_buf_puts(&b, "\": want ");
	wh_buf_puts(&b, want);
	inv->setting_error = b.p ? b.p : "setting: wrong type";
}
WH_API const char *wh_setting_string(wh_invocation *inv, const char *key, const char *def) {
	int t = wh_setting(inv, key);
	if (t < 0) return def;
	if (inv->doc.t[t].type != WH_JSTRING) { wh__bad_setting(inv, key, "a string"); return def; }
	return wh_json_string(&inv->doc, t, NULL);
}
WH_API double wh_setting_number(wh_invocation *inv, const char *key, double def) {
	double v;
	int t = wh_setting(inv, key);
	if (t < 0) return def;
	if (!wh_json_number(&inv->doc, t, &v)) { wh__bad_setting(inv, key, "a number"); return def; }
	return v;
}
WH_API long long wh_setting_int(wh_invocation *inv, const char *key, long long def) {
	double v;
	int t = wh_setting(inv, key);
	if (t < 0) return def;
	if (!wh_json_number(&inv->doc, t, &v) || v != (double)(long long)v || v > 9007199254740991.0 || v < -9007199254740991.0) {
		wh__bad_setting(inv, key, "an integer");
		return def;
	}
	return (long long)v;
}
WH_API int wh_setting_bool(wh_invocation *inv, const char *key, int def) {
	int t = wh_setting(inv, key);
	if (t < 0) return def;
	int ty = inv->doc.t[t].type;
	if (ty != WH_JTRUE && ty != WH_JFALSE) { wh__bad_setting(inv, key, "a boolean"); return def; }
	return ty == WH_JTRUE;
}
/* wh_setting_strings returns the number of strings in array setting key and
 * sets *out to them (arena), or -1 if the setting is absent or null. A
 * value that is not an array of strings records a setting error and
 * returns -1. */
WH_API int wh_setting_strings(wh_invocation *inv, const char *key, const char ***out, size_t **lens) {
	int t = wh_setting(inv, key);
	if (t < 0) return -1;
	const wh_json *j = &inv->doc;
	if (j->t[t].type != WH_JARRAY) { wh__bad_setting(inv, key, "an array of strings"); return -1; }
	int n = (int)j->t[t].count;
	const char **v = (const char **)wh_alloc(sizeof(char *) * (size_t)(n + 1));
	size_t *l = (size_t *)wh_alloc(sizeof(size_t) * (size_t)(n + 1));
	if (!v || !l) return -1;
	int i = 0;
	for (int e = wh_json_first(j, t); e >= 0 && i < n; e = wh_json_next(j, t, e), i++) {
		if (j->t[e].type != WH_JSTRING) { wh__bad_setting(inv, key, "an array of strings"); return -1; }
		v[i] = wh_json_string(j, e, &l[i]);
	}
	*out = v;
	if (lens) *lens = l;
	return n;
}

WH_API const char *wh__meta(const wh_json *j, int meta, const char *key) {
	const char *s = wh_json_string(j, wh_json_get(j, meta, key), NULL);
	return s ? s : "";
}

/* wh_invocation_decode decodes an invocation document; NULL on success,
 * else why not. */
WH_API const char *wh_invocation_decode(wh_invocation *inv, const char *doc, size_t n) {
	memset(inv, 0, sizeof *inv);
	wh_json *j = &inv->doc;
	if (wh_json_parse(j, doc, n) < 0) return j->err;
	if (j->t[0].type != WH_JOBJECT) return "the invocation is not an object";
	inv->point = wh_json_string(j, wh_json_get(j, 0, "point"), NULL);
	if (!inv->point) return "the invocation has no point";
	inv->context = wh_json_get(j, 0, "context");
	if (wh_json_type(j, inv->context) != WH_JOBJECT) return "the invocation's context is not an object";
	inv->settings = wh_json_get(j, 0, "settings");
	int meta = wh_json_get(j, 0, "meta");
	inv->hook = wh__meta(j, meta, "hook");
	inv->invocation_id = wh__meta(j, meta, "invocation");
	inv->tenant = wh__meta(j, meta, "tenant");
	inv->primary_field = wh_primary_field_of(inv->point);
	inv->primary = *inv->primary_field ? wh_context(inv, inv->primary_field) : -1;
	inv->primary_text = "";
	if (wh_json_type(j, inv->primary) == WH_JSTRING)
		inv->primary_text = wh_json_string(j, inv->primary, &inv->primary_len);
	return NULL;
}

/* ---- decisions ---- */
enum { WH_CONTINUE, WH_MODIFY, WH_BLOCK, WH_ASK, WH_FAIL };

typedef struct {
	int action;
	const char *field;      /* modify: the field; NULL means the primary field */
	const char *value_json; /* modify: the field's new value, as JSON */
	size_t value_len;
	const char *reason, *user_message;
	int do_not_reply_again;
} wh_decision;

WH_API wh_decision wh_continue(void) { wh_decision d = {0}; d.action = WH_CONTINUE; return d; }
WH_API wh_decision wh_block(const char *reason) { wh_decision d = {0}; d.action = WH_BLOCK; d.reason = reason; return d; }
WH_API wh_decision wh_ask(const char *reason) { wh_decision d = {0}; d.action = WH_ASK; d.reason = reason; return d; }
/* wh_fail makes the hook fail with why (written to stderr, kept in the
 * invocation's log): hook_v1_handle returns 0 and the host applies the
 * hook's failure policy. */
WH_API wh_decision wh_fail(const char *why) { wh_decision d = {0}; d.action = WH_FAIL; d.reason = why; return d; }
/* wh_modify_json changes context field (NULL: the point's primary field)
 * to the JSON value json. */
WH_API wh_decision wh_modify_json(const char *field, const char *json, size_t n) {
	wh_decision d = {0};
	d.action = WH_MODIFY;
	d.field = field;
	d.value_json = json;
	d.value_len = n;
	return d;
}
/* wh_modify_string changes context field (NULL: the primary field) to the
 * string s. */
WH_API wh_decision wh_modify_string(const char *field, const char *s, size_t n) {
	wh_buf b = {0};
	wh_buf_json_string(&b, s, n);
	if (b.oom) return wh_fail("out of memory");
	return wh_modify_json(field, b.p, b.n);
}
WH_API wh_decision wh_modify_primary(const char *s, size_t n) { return wh_modify_string(NULL, s, n); }

/* wh_decision_encode writes d's canonical JSON for inv's point; NULL and
 * *why set if it cannot be encoded. */
WH_API const char *wh_decision_encode(const wh_decision *d, const wh_invocation *inv, size_t *n, const char **why) {
	static const char *names[] = {"continue", "modify", "block", "ask"};
	wh_buf b = {0};
	if (d->action == WH_FAIL) { *why = d->reason ? d->reason : "the hook failed"; return NULL; }
	if (d->action < 0 || d->action > WH_ASK) { *why = "unknown action"; return NULL; }
	wh_buf_puts(&b, "{\"action\":\"");
	wh_buf_puts(&b, names[d->action]);
	wh_buf_byte(&b, '"');
	if (d->action == WH_MODIFY) {
		const char *f = d->field ? d->field : inv->primary_field;
		if (!f || !*f) { *why = "modify of the primary field at a point without one"; return NULL; }
		wh_buf_puts(&b, ",\"context\":{");
		wh_buf_json_string(&b, f, strlen(f));
		wh_buf_byte(&b, ':');
		wh_buf_put(&b, d->value_json, d->value_len);
		wh_buf_byte(&b, '}');
	}
	if (d->reason && *d->reason) { wh_buf_puts(&b, ",\"reason\":"); wh_buf_json_string(&b, d->reason, strlen(d->reason)); }
	if (d->user_message && *d->user_message) { wh_buf_puts(&b, ",\"user_message\":"); wh_buf_json_string(&b, d->user_message, strlen(d->user_message)); }
	if (d->do_not_reply_again) wh_buf_puts(&b, ",\"do_not_reply_again\":true");
	wh_buf_byte(&b, '}');
	if (b.oom) { *why = "out of memory"; return NULL; }
	*n = b.n;
	return b.p;
}

/* ---- host calls ---- */
#ifdef __wasm__
__attribute__((import_module("hook_v1"), import_name("host_call")))
uint64_t wh_host_call(uint32_t name_ptr, uint32_t name_len, uint32_t in_ptr, uint32_t in_len, uint32_t out_ptr, uint32_t out_cap);
#define WH_PTR(p) ((uint32_t)(uintptr_t)(p))
#else
#define WH_PTR(p) ((uintptr_t)(p))
static uint64_t wh_host_call(uintptr_t name_ptr, uint32_t name_len, uintptr_t in_ptr, uint32_t in_len, uintptr_t out_ptr, uint32_t out_cap);
#endif

static int wh__in_invocation;

typedef struct {
	uint32_t status;   /* WH_OK or an error status */
	const char *body;  /* the result (status 0) or the error object; arena */
	size_t len;
	const char *message; /* for an error: the error object's message, or "" */
} wh_reply;

#define WH_SCRATCH (16 << 10)

/* wh_call calls capability name with JSON payload and returns the status;
 * r (may be NULL) gets the body. A reply too large for the scratch buffer
 * is taken into a buffer of its size. */
WH_API uint32_t wh_call(const char *name, const char *payload, size_t plen, wh_reply *r) {
	wh_reply dummy;
	if (!r) r = &dummy;
	memset(r, 0, sizeof *r);
	r->message = "";
	if (!wh__in_invocation) return r->status = WH_NOT_IN_INVOCATION;
	char *buf = (char *)wh_alloc(WH_SCRATCH);
	if (!buf) return r->status = WH_NO_MEMORY;
	uint64_t res = wh_host_call(WH_PTR(name), (uint32_t)strlen(name), WH_PTR(payload), (uint32_t)plen, WH_PTR(buf), WH_SCRATCH);
	uint32_t status = (uint32_t)(res >> 32), n = (uint32_t)res;
	if (n > WH_SCRATCH) {
		buf = (char *)wh_alloc(n);
		if (!buf) return r->status = WH_NO_MEMORY;
		res = wh_host_call(0, 0, 0, 0, WH_PTR(buf), n);
		if ((uint32_t)res != n || (res >> 32) == WH_BUFFER_TOO_SMALL || (res >> 32) == WH_NO_PENDING)
			return r->status = (uint32_t)(res >> 32) ? (uint32_t)(res >> 32) : WH_MALFORMED_RESULT;
		status = (uint32_t)(res >> 32);
	}
	r->status = status;
	r->body = buf;
	r->len = n;
	if (status != WH_OK) {
		wh_json j;
		if (wh_json_parse(&j, buf, n) == 0) {
			const char *m = wh_json_string(&j, wh_json_get(&j, 0, "message"), NULL);
			if (m) r->message = m;
		}
	}
	return status;
}

/* wh__call_object calls name and parses its result as an object into j. */
WH_API uint32_t wh__call_object(const char *name, const wh_buf *payload, wh_json *j, wh_reply *r) {
	if (payload->oom) return WH_NO_MEMORY;
	uint32_t s = wh_call(name, payload->p, payload->n, r);
	if (s != WH_OK) return s;
	if (wh_json_parse(j, r->body, r->len) < 0 || j->t[0].type != WH_JOBJECT) return r->status = WH_MALFORMED_RESULT;
	return WH_OK;
}

/* wh_llm_run runs the host's model on prompt; max_tokens <= 0 leaves it to
 * the host. On WH_OK, *text is the reply's "text" (arena). */
WH_API uint32_t wh_llm_run(const char *prompt, size_t n, int max_tokens, const char **text, size_t *tlen, wh_reply *r) {
	wh_reply dummy;
	wh_json j;
	wh_buf b = {0};
	if (!r) r = &dummy;
	wh_buf_puts(&b, "{\"prompt\":");
	wh_buf_json_string(&b, prompt, n);
	if (max_tokens > 0) { wh_buf_puts(&b, ",\"max_tokens\":"); wh_buf_int(&b, max_tokens); }
	wh_buf_byte(&b, '}');
	uint32_t s = wh__call_object("llm.run", &b, &j, r);
	if (s != WH_OK) return s;
	const char *t = wh_json_string(&j, wh_json_get(&j, 0, "text"), tlen);
	if (!t) return r->status = WH_MALFORMED_RESULT;
	*text = t;
	return WH_OK;
}

/* wh_kv_get reads key from the hook's key-value store. On WH_OK, *found says
 * whether it was there and *value_json (arena) is its JSON value. */
WH_API uint32_t wh_kv_get(const char *key, int *found, const char **value_json, size_t *vlen, wh_reply *r) {
	wh_reply dummy;
	wh_json j;
	wh_buf b = {0};
	if (!r) r = &dummy;
	*found = 0;
	*value_json = "null";
	*vlen = 4;
	wh_buf_puts(&b, "{\"key\":");
	wh_buf_json_string(&b, key, strlen(key));
	wh_buf_byte(&b, '}');
	uint32_t s = wh__call_object("kv.get", &b, &j, r);
	if (s != WH_OK) return s;
	int v = wh_json_get(&j, 0, "value"), f = wh_json_get(&j, 0, "found");
	if (f >= 0) {
		if (j.t[f].type != WH_JTRUE && j.t[f].type != WH_JFALSE) return r->status = WH_MALFORMED_RESULT;
		*found = j.t[f].type == WH_JTRUE;
	} else {
		*found = v >= 0 && j.t[v].type != WH_JNULL;
	}
	if (*found && v >= 0) *value_json = wh_strndup(wh_json_raw(&j, v, vlen), *vlen);
	else { *value_json = "null"; *vlen = 4; }
	return WH_OK;
}

/* wh_kv_set stores the JSON value value_json under key. */
WH_API uint32_t wh_kv_set(const char *key, const char *value_json, size_t vlen, wh_reply *r) {
	wh_json j;
	wh_buf b = {0};
	wh_reply dummy;
	if (!r) r = &dummy;
	wh_buf_puts(&b, "{\"key\":");
	wh_buf_json_string(&b, key, strlen(key));
	wh_buf_puts(&b, ",\"value\":");
	wh_buf_put(&b, value_json, vlen);
	wh_buf_byte(&b, '}');
	return wh__call_object("kv.set", &b, &j, r);
}

/* wh_log writes msg at level ("debug", "info", "warn", "error") to the
 * host's log capability (log.write). */
WH_API uint32_t wh_log(const char *level, const char *msg) {
	wh_json j;
	wh_reply r;
	wh_buf b = {0};
	wh_buf_puts(&b, "{\"level\":");
	wh_buf_json_string(&b, level, strlen(level));
	wh_buf_puts(&b, ",\"message\":");
	wh_buf_json_string(&b, msg, strlen(msg));
	wh_buf_byte(&b, '}');
	return wh__call_object("log.write", &b, &j, &r);
}

/* ---- stderr ---- */
#ifdef __wasm__
#include <wasi/api.h>
WH_API void wh_stderr(const char *s) {
	__wasi_ciovec_t iov[2] = {{(const uint8_t *)s, strlen(s)}, {(const uint8_t *)"\n", 1}};
	__wasi_size_t n;
	(void)__wasi_fd_write(2, iov, 2, &n);
}
#else
#include <stdio.h>
WH_API void wh_stderr(const char *s) { fprintf(stderr, "%s\n", s); }
#endif

/* ---- the export ---- */

/* The hook's handler: define it in the hook's source. */
static wh_decision wh_handle(wh_invocation *inv);

static const char *wh_last_failure; /* for the native test double */
#ifndef __wasm__
static const char *wh__native_out;
#endif

#ifdef __wasm__
__attribute__((export_name("hook_v1_handle")))
#endif
uint64_t hook_v1_handle(uint32_t in_len) {
	static int running;
	wh_last_failure = NULL;
	if (running) { wh_stderr("hook_v1_handle re-entered"); return 0; }
	running = 1;
	wh_arena_reset();
	const char *why = NULL;
	uint64_t ret = 0;
	/* in_len + 1 must not wrap a 32-bit size_t; the host's documents are
	 * far smaller (1 MiB by default). */
	char *doc = in_len < 0x40000000u ? (char *)wh_alloc((size_t)in_len + 1) : NULL;
	if (!doc) { why = "out of memory for the invocation document"; goto out; }
	uint64_t r = wh_host_call(0, 0, 0, 0, WH_PTR(doc), in_len);
	if ((r >> 32) != WH_OK || (uint32_t)r != in_len) { why = "taking the invocation document failed"; goto out; }
	wh_invocation inv;
	if ((why = wh_invocation_decode(&inv, doc, in_len)) != NULL) goto out;
	wh__in_invocation = 1;
	wh_decision d = wh_handle(&inv);
	wh__in_invocation = 0;
	size_t n = 0;
	const char *out = wh_decision_encode(&d, &inv, &n, &why);
#ifdef __wasm__
	if (out) ret = ((uint64_t)WH_PTR(out) << 32) | (uint64_t)n;
#else
	wh__native_out = out; /* a native pointer does not fit 32 bits */
	if (out) ret = ((uint64_t)1 << 32) | (uint64_t)n;
#endif
out:
	if (why) { wh_stderr(why); wh_last_failure = why; }
	running = 0;
	return ret;
}

/* ---- the native test double ---- */
#ifndef __wasm__
/* A capability served by the test: it sets *status and returns the reply
 * body (JSON) for the call. */
typedef const char *(*wh_mock_capability)(const char *name, const char *payload, size_t plen, uint32_t *status, void *ctx);

static struct {
	const char *parked;
	size_t parked_len;
	uint32_t parked_status;
	int has_parked;
	wh_mock_capability cap;
	void *ctx;
	int calls;
} wh_mock;

WH_API uint64_t wh_host_call(uintptr_t name_ptr, uint32_t name_len, uintptr_t in_ptr, uint32_t in_len, uintptr_t out_ptr, uint32_t out_cap) {
	if (name_len == 0 && in_len == 0) {
		if (!wh_mock.has_parked) return (uint64_t)WH_NO_PENDING << 32;
		if (wh_mock.parked_len > out_cap) return ((uint64_t)WH_BUFFER_TOO_SMALL << 32) | wh_mock.parked_len;
		memcpy((void *)out_ptr, wh_mock.parked, wh_mock.parked_len);
		wh_mock.has_parked = 0;
		return ((uint64_t)wh_mock.parked_status << 32) | wh_mock.parked_len;
	}
	wh_mock.has_parked = 0;
	wh_mock.calls++;
	uint32_t status = WH_UNKNOWN_CAPABILITY;
	char name[128];
	size_t nl = name_len < sizeof name - 1 ? name_len : sizeof name - 1;
	memcpy(name, (const void *)name_ptr, nl);
	name[nl] = 0;
	const char *body = "{\"code\":\"unknown_capability\",\"message\":\"no mock\"}";
	if (wh_mock.cap) body = wh_mock.cap(name, (const char *)in_ptr, in_len, &status, wh_mock.ctx);
	size_t n = strlen(body);
	if (n <= out_cap) memcpy((void *)out_ptr, body, n);
	else { wh_mock.parked = body; wh_mock.parked_len = n; wh_mock.parked_status = status; wh_mock.has_parked = 1; }
	return ((uint64_t)status << 32) | n;
}

/* wh_mock_run runs the hook on an invocation document, serving host calls
 * with cap; it returns the decision JSON (NUL-terminated, valid until the
 * next run), or NULL if the hook failed (wh_last_failure says why). */
WH_API const char *wh_mock_run(const char *invocation, wh_mock_capability cap, void *ctx) {
	static char *out;
	wh_mock.parked = invocation;
	wh_mock.parked_len = strlen(invocation);
	wh_mock.parked_status = WH_OK;
	wh_mock.has_parked = 1;
	wh_mock.cap = cap;
	wh_mock.ctx = ctx;
	wh_mock.calls = 0;
	uint64_t r = hook_v1_handle((uint32_t)wh_mock.parked_len);
	wh_mock.has_parked = 0;
	if (!r) return NULL;
	free(out);
	size_t n = (uint32_t)r;
	out = (char *)malloc(n + 1);
	memcpy(out, wh__native_out, n);
	out[n] = 0;
	return out;
}
#endif

#endif /* WASMHOOKS_H */
