//go:build !wasip1

package examples_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmhooks/wasmhooks/runtime"
)

// buildFor builds hook in lang into dir, or skips the benchmark.
func buildFor(b *testing.B, hook string, lang language, dir string) []byte {
	b.Helper()
	if m := lang.missing(); m != "" {
		b.Skipf("toolchain for %s missing: %s", lang.name, m)
	}
	hookDir := filepath.Join(repoRoot(), "hooks-examples", hook)
	if _, err := os.Stat(filepath.Join(hookDir, lang.src)); err != nil {
		b.Skipf("%s has no %s port", hook, lang.name)
	}
	out := filepath.Join(dir, hook+"-"+lang.name+".wasm")
	if lang.name == "rust" {
		if err := buildRustSDK(dir); err != nil {
			b.Fatal(err)
		}
	}
	if err := lang.build(hookDir, out); err != nil {
		b.Fatal(err)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	return wasm
}

// BenchmarkRedactSecrets1KiB: redact-secrets (its ten default patterns) over
// the 1 KiB text, warm instance, runtime.InvokeInto, per language. The native
// Go figure of the same work is BenchmarkNative1KiB in
// hooks-examples/redact-secrets. Reports the module's size.
func BenchmarkRedactSecrets1KiB(b *testing.B) {
	benchHook(b, "redact-secrets", runtime.Request{
		Tenant: "bench", Hook: "redact", Point: "message.outbound",
		Context: map[string]any{"incoming": "hi", "outgoing": largeUnit},
	}, "modify")
}

// BenchmarkBlockPromptInjection1KiB: block-prompt-injection over the same
// text at message.inbound (it continues).
func BenchmarkBlockPromptInjection1KiB(b *testing.B) {
	benchHook(b, "block-prompt-injection", runtime.Request{
		Tenant: "bench", Hook: "bpi", Point: "message.inbound",
		Context: map[string]any{"incoming": largeUnit},
	}, "continue")
}

func benchHook(b *testing.B, hook string, req runtime.Request, want string) {
	dir := b.TempDir()
	for _, lang := range languages() {
		b.Run(lang.name, func(b *testing.B) {
			wasm := buildFor(b, hook, lang, dir)
			ctx := context.Background()
			rt, err := runtime.New(ctx, runtime.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(ctx)
			m, err := rt.Load(ctx, wasm)
			if err != nil {
				b.Fatal(err)
			}
			var out runtime.Result
			if err := rt.InvokeInto(ctx, m, req, &out); err != nil || string(out.Decision.Action) != want {
				b.Fatalf("warm-up: %v %+v", err, out.Decision)
			}
			// The first invocation compiles the patterns (the hooks keep
			// them across invocations): its fuel is reported apart.
			first := out.FuelUsed
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := rt.InvokeInto(ctx, m, req, &out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(wasm)), "module-bytes")
			b.ReportMetric(float64(out.FuelUsed), "fuel/op")
			b.ReportMetric(float64(first), "first-fuel")
		})
	}
}

// BenchmarkLoadCold: Load of redact-secrets in a new Runtime without a disk
// cache (validate, instrument, compile), per language.
func BenchmarkLoadCold(b *testing.B) {
	dir := b.TempDir()
	for _, lang := range languages() {
		b.Run(lang.name, func(b *testing.B) {
			wasm := buildFor(b, "redact-secrets", lang, dir)
			ctx := context.Background()
			for b.Loop() {
				rt, err := runtime.New(ctx, runtime.Config{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := rt.Load(ctx, wasm); err != nil {
					b.Fatal(err)
				}
				rt.Close(ctx)
			}
			b.ReportMetric(float64(len(wasm)), "module-bytes")
		})
	}
}

// BenchmarkRedactFloor: what any C hook pays on the 1 KiB redaction's input
// before it scans a byte, to read the ratios to native Go against: "take"
// takes and decodes the invocation and continues; "copy" also returns the
// primary text unchanged as a modify (the same output size as a redaction).
// The rest of a redaction's time is its scanning and output.
func BenchmarkRedactFloor(b *testing.B) {
	c := languages()[1]
	if m := c.missing(); m != "" {
		b.Skipf("toolchain for C missing: %s", m)
	}
	req := runtime.Request{Tenant: "bench", Hook: "floor", Point: "message.outbound",
		Context: map[string]any{"incoming": "hi", "outgoing": largeUnit}}
	dir := b.TempDir()
	for _, f := range []struct{ name, handler string }{
		{"take", "(void)inv; return wh_continue();"},
		{"copy", "wh_buf out = {0}; wh_buf_json_string(&out, inv->primary_text, inv->primary_len); " +
			"return wh_modify_json(NULL, out.p, out.n);"},
	} {
		b.Run(f.name, func(b *testing.B) {
			hookDir := filepath.Join(dir, f.name)
			src := "#include \"wasmhooks.h\"\nstatic wh_decision wh_handle(wh_invocation *inv) { " + f.handler + " }\n"
			if err := os.MkdirAll(filepath.Join(hookDir, "c"), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(hookDir, "c", "hook.c"), []byte(src), 0o644); err != nil {
				b.Fatal(err)
			}
			out := filepath.Join(dir, f.name+".wasm")
			if err := c.build(hookDir, out); err != nil {
				b.Fatal(err)
			}
			wasm, err := os.ReadFile(out)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			rt, err := runtime.New(ctx, runtime.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(ctx)
			m, err := rt.Load(ctx, wasm)
			if err != nil {
				b.Fatal(err)
			}
			var res runtime.Result
			for b.Loop() {
				if err := rt.InvokeInto(ctx, m, req, &res); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.FuelUsed), "fuel/op")
		})
	}
}
