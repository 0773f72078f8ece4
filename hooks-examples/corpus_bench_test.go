//go:build !wasip1

package examples_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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
	return lang.compile(b, hookDir, filepath.Join(dir, hook+"-"+lang.name+".wasm"))
}

// loaded loads wasm in a new Runtime, closed when b ends.
func loaded(b *testing.B, wasm []byte) (*runtime.Runtime, *runtime.Module) {
	b.Helper()
	rt := newRuntime(b)
	m, err := rt.Load(context.Background(), wasm)
	if err != nil {
		b.Fatal(err)
	}
	return rt, m
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
			rt, m := loaded(b, wasm)
			var out runtime.Result
			if err := rt.InvokeInto(ctx, m, req, &out); err != nil || string(out.Decision.Action) != want {
				b.Fatalf("warm-up: %v %+v", err, out.Decision)
			}
			// The first invocation compiles the patterns (the hooks keep
			// them across invocations): its fuel is reported apart.
			first := out.FuelUsed
			// fuel/op is the mean: a garbage-collected guest's (Go,
			// AssemblyScript) varies from one invocation to the next with
			// its collector's work; C's and Rust's does not.
			var fuel uint64
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := rt.InvokeInto(ctx, m, req, &out); err != nil {
					b.Fatal(err)
				}
				fuel += out.FuelUsed
			}
			b.ReportMetric(float64(len(wasm)), "module-bytes")
			b.ReportMetric(float64(fuel)/float64(b.N), "fuel/op")
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

// BenchmarkRedactFloor: what a hook pays on the 1 KiB redaction's input
// before it scans a byte, per SDK, to read the ratios to native Go
// against: "take" takes and decodes the invocation and continues; "copy"
// also returns the primary text unchanged as a modify with a reason (the
// output of a redaction, without the scanning).
func BenchmarkRedactFloor(b *testing.B) {
	sdk := filepath.Join(repoRoot(), "sdk", "assemblyscript", "assembly", "index")
	floors := map[string]map[string]string{
		"c": {
			"take": "#include \"wasmhooks.h\"\nstatic wh_decision wh_handle(wh_invocation *inv) { (void)inv; return wh_continue(); }\n",
			"copy": "#include \"wasmhooks.h\"\nstatic wh_decision wh_handle(wh_invocation *inv) {\n" +
				"\twh_buf out = {0};\n\twh_buf_json_string(&out, inv->primary_text, inv->primary_len);\n" +
				"\twh_decision d = wh_modify_json(NULL, out.p, out.n);\n\td.reason = \"redacted 1 secret\";\n\treturn d;\n}\n",
		},
		"rust": {
			"take": "use wasmhooks::{hook, Decision, Invocation};\nfn handle(_inv: &mut Invocation) -> Result<Decision, String> { Ok(Decision::continue_()) }\nhook!(handle);\n",
			"copy": "use wasmhooks::{hook, Decision, Invocation};\nfn handle(inv: &mut Invocation) -> Result<Decision, String> {\n" +
				"    let v = inv.primary_value().cloned().unwrap_or(wasmhooks::json::Value::Null);\n" +
				"    Ok(Decision::modify_primary(v).with_reason(\"redacted 1 secret\"))\n}\nhook!(handle);\n",
		},
		"assemblyscript": {
			"take": "import { handle, Invocation, Decision, Continue } from \"SDK\";\n" +
				"function decide(inv: Invocation): Decision { return Continue(); }\n" +
				"export function hook_v1_handle(inLen: u32): u64 { return handle(inLen, decide); }\n",
			"copy": "import { handle, Invocation, Decision, Continue, ModifyPrimary } from \"SDK\";\n" +
				"function decide(inv: Invocation): Decision {\n  const v = inv.primaryValue();\n  if (v === null) return Continue();\n" +
				"  return ModifyPrimary(v).withReason(\"redacted 1 secret\");\n}\n" +
				"export function hook_v1_handle(inLen: u32): u64 { return handle(inLen, decide); }\n",
		},
	}
	req := runtime.Request{Tenant: "bench", Hook: "floor", Point: "message.outbound",
		Context: map[string]any{"incoming": "hi", "outgoing": largeUnit}}
	// Under the repository's build/ (ignored by git), not the system's
	// temporary folder: asc names the SDK's abortHook by its path from the
	// working directory, which must be the repository's.
	if err := os.MkdirAll(filepath.Join(repoRoot(), "build"), 0o755); err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(repoRoot(), "build"), "floor-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	for _, lang := range languages()[1:] {
		for _, name := range []string{"take", "copy"} {
			b.Run(name+"/"+lang.name, func(b *testing.B) {
				if m := lang.missing(); m != "" {
					b.Skipf("toolchain for %s missing: %s", lang.name, m)
				}
				hookDir := filepath.Join(dir, name+"-"+lang.name)
				srcPath := filepath.Join(hookDir, lang.src)
				if err := os.MkdirAll(filepath.Dir(srcPath), 0o755); err != nil {
					b.Fatal(err)
				}
				rel, err := filepath.Rel(filepath.Dir(srcPath), sdk)
				if err != nil {
					b.Fatal(err)
				}
				src := strings.ReplaceAll(floors[lang.name][name], "SDK", filepath.ToSlash(rel))
				if err := os.WriteFile(srcPath, []byte(src), 0o644); err != nil {
					b.Fatal(err)
				}
				rt, m := loaded(b, lang.compile(b, hookDir, filepath.Join(hookDir, "hook.wasm")))
				ctx := context.Background()
				var res runtime.Result
				var fuel uint64
				for b.Loop() {
					if err := rt.InvokeInto(ctx, m, req, &res); err != nil {
						b.Fatal(err)
					}
					fuel += res.FuelUsed
				}
				if res.Failure != nil {
					b.Fatalf("the floor hook failed: %v", res.Failure)
				}
				b.ReportMetric(float64(fuel)/float64(b.N), "fuel/op") // the mean, as above
			})
		}
	}
}
