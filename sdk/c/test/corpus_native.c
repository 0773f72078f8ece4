/* A native driver for a C hook over the shared corpus: compile it after the
 * hook, with the sanitizers, and pass it the corpus's case files:
 *
 *   cc -fsanitize=address,undefined -Isdk/c -include hooks-examples/HOOK/c/hook.c \
 *      sdk/c/test/corpus_native.c -o drv && ./drv testdata/corpus/HOOK/<case>.json...
 *
 * Each case runs through the SDK's test double, its capability replies served
 * from the case's "replies". It checks memory safety (the sanitizers) and that
 * the hook fails exactly on the cases that want a failure; the decisions
 * themselves are compared with the Go hook's by hooks-examples/corpus_test.go,
 * through the real runtime. `make test-sdks` runs it for every C hook. */
#include <stdio.h>
#include "wasmhooks.h"

static wh_json case_doc;
static int replies;

static const char *serve(const char *name, const char *payload, size_t plen, uint32_t *status, void *ctx) {
	(void)payload; (void)plen; (void)ctx;
	int r = wh_json_get(&case_doc, replies, name);
	if (r < 0) { *status = WH_UNKNOWN_CAPABILITY; return "{\"code\":\"unknown_capability\",\"message\":\"no reply\"}"; }
	double st = 0;
	wh_json_number(&case_doc, wh_json_get(&case_doc, r, "status"), &st);
	*status = (uint32_t)st;
	size_t n;
	const char *body = wh_json_raw(&case_doc, wh_json_get(&case_doc, r, "body"), &n);
	/* The mock keeps the pointer until the call returns: a heap copy. */
	static char *copy;
	free(copy);
	copy = (char *)malloc(n + 1);
	memcpy(copy, body, n);
	copy[n] = 0;
	return copy;
}

static char *slurp(const char *path, size_t *n) {
	FILE *f = fopen(path, "rb");
	if (!f) return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = (char *)malloc((size_t)len + 1);
	*n = fread(b, 1, (size_t)len, f);
	b[*n] = 0;
	fclose(f);
	return b;
}

static void raw(wh_buf *b, int tok, const char *def) {
	size_t n;
	if (tok < 0) { wh_buf_puts(b, def); return; }
	const char *s = wh_json_raw(&case_doc, tok, &n);
	wh_buf_put(b, s, n);
}

int main(int argc, char **argv) {
	int bad = 0;
	for (int i = 1; i < argc; i++) {
		size_t n;
		char *file = slurp(argv[i], &n);
		/* The case and the invocation built from it must outlive the run,
		 * whose arena reset would free them: they are allocated
		 * persistently. */
		wh_persistent = 1;
		if (!file || wh_json_parse(&case_doc, file, n) < 0) { fprintf(stderr, "%s: unreadable\n", argv[i]); bad++; wh_persistent = 0; continue; }
		wh_buf doc = {0};
		wh_buf_puts(&doc, "{\"abi\":\"1.1\",\"point\":");
		raw(&doc, wh_json_get(&case_doc, 0, "point"), "\"message.outbound\"");
		wh_buf_puts(&doc, ",\"context\":");
		raw(&doc, wh_json_get(&case_doc, 0, "context"), "{}");
		wh_buf_puts(&doc, ",\"settings\":");
		raw(&doc, wh_json_get(&case_doc, 0, "settings"), "{}");
		wh_buf_puts(&doc, ",\"meta\":{\"hook\":\"corpus\",\"invocation\":\"i\",\"tenant\":\"t\"}}");
		replies = wh_json_get(&case_doc, 0, "replies");
		wh_persistent = 0;
		int want_failure = wh_json_type(&case_doc, wh_json_get(&case_doc, 0, "want_failure")) == WH_JTRUE;
		const char *out = wh_mock_run(doc.p, serve, NULL);
		if ((out == NULL) != want_failure) {
			fprintf(stderr, "%s: %s\n", argv[i], out ? out : wh_last_failure);
			bad++;
		}
	}
	printf("%d cases, %d unexpected\n", argc - 1, bad);
	return bad != 0;
}
