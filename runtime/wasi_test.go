package runtime_test

import (
	"fmt"

	"context"
	"github.com/wasmhooks/wasmhooks/abi"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func TestStdoutIsACappedPerInvocationLog(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, printer))
	res := mustInvoke(t, r, m, runtime.Request{Tenant: "t", Context: map[string]any{"outgoing": "x"}})
	want := []runtime.LogLine{
		{Stream: "stdout", Text: "line one"},
		{Stream: "stdout", Text: "line two\r"},
		{Stream: "stdout", Text: "\x1b[31mred\x1b[0m"},
		{Stream: "stdout", Text: `{"level":"error","msg":"forged"}`},
		{Stream: "stdout", Text: "partial"},
		{Stream: "stderr", Text: "line one"},
	}
	if len(res.Logs) != len(want) {
		t.Fatalf("logs %q, want %q", res.Logs, want)
	}
	for i := range want {
		if res.Logs[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, res.Logs[i], want[i])
		}
	}
	// The next invocation on the same (warm) instance starts with an empty log.
	res = mustInvoke(t, r, m, runtime.Request{Tenant: "t", Context: map[string]any{"outgoing": strings.Repeat("!", 100)}, Limits: runtime.Limits{MaxLogBytes: 4096}})
	total := 0
	for _, l := range res.Logs {
		total += len(l.Text) + 1
	}
	if total > 4096+16 || res.LogBytesDropped == 0 {
		t.Fatalf("log of %d bytes with %d dropped; want at most the 4 KiB cap and the rest counted", total, res.LogBytesDropped)
	}
}

func TestPollOneoffSleepsAndHonoursDeadline(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, sleeper))
	start := time.Now()
	if _, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("poll_oneoff returned after %v, want about 300ms", d)
	}
	_, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t", Limits: runtime.Limits{Timeout: 50 * time.Millisecond}})
	if f, ok := abi.AsFailure(err); !ok || f.Code != abi.FailTimeout {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

// TestEveryWASIFunctionIsServed imports the whole fixed WASI set, with the
// signatures abi.WASIFunctions gives, and instantiates the module: the host
// must serve each one with exactly that signature.
func TestEveryWASIFunctionIsServed(t *testing.T) {
	var imports strings.Builder
	for name, sig := range abi.WASIFunctions() {
		params, results, _ := strings.Cut(sig, " -> ")
		wat := func(list string) string {
			list = strings.Trim(list, "()")
			return strings.ReplaceAll(list, ",", "")
		}
		fmt.Fprintf(&imports, "(import %q %q (func (param %s) (result %s)))\n", abi.WASIModule, name, wat(params), wat(results))
	}
	src := `(module ` + imports.String() + `
	  (memory (export "memory") 1)
	  (data (i32.const 0) "{\"action\":\"continue\"}")
	  (func (export "hook_v1_handle") (param i32) (result i64) (i64.const 21)))`
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, src))
	if _, err := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
}
