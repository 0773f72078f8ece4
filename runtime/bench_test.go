package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func BenchmarkInvokeEmptyWAT(b *testing.B) {
	r, m := loaded(b, runtime.Config{}, testutil.WAT(b, testutil.EmptyHookWAT))
	ctx := context.Background()
	req := runtime.Request{Tenant: "t", Context: map[string]any{"outgoing": "hello"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Invoke(ctx, m, req); err != nil {
			b.Fatal(err)
		}
	}
}

type noopHost struct{}

func (noopHost) HostCall(context.Context, *abi.Call) abi.Reply {
	return abi.Reply{Status: abi.StatusOK, Body: []byte("{}")}
}

// BenchmarkHostCallRoundTrip makes 10 host calls to a no-op capability per
// invocation; compare with BenchmarkInvokeEmptyWAT to get the cost of one.
func BenchmarkHostCallRoundTrip10(b *testing.B) {
	r, m := loaded(b, runtime.Config{}, scripted(b))
	benchScript(b, r, m, strings.Repeat(opHostCall("noop", "{}", 64), 10))
}

func BenchmarkInvokeScriptedNoCalls(b *testing.B) {
	r, m := loaded(b, runtime.Config{}, scripted(b))
	benchScript(b, r, m, strings.Repeat(opWrite(namePtr, []byte("noop"))+opWrite(inPtr, []byte("{}")), 10))
}

// benchScript invokes the scripted module m on r with script, host calls
// answered by noopHost.
func benchScript(b *testing.B, r *runtime.Runtime, m *runtime.Module, script string) {
	ctx := context.Background()
	req := runtime.Request{Tenant: "t", HostCaller: noopHost{}, Context: map[string]any{"s": "@@" + script}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Invoke(ctx, m, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadCached(b *testing.B) {
	r := newRuntime(b, runtime.Config{})
	wasm := scripted(b)
	ctx := context.Background()
	for b.Loop() {
		m, err := r.Load(ctx, wasm)
		if err != nil {
			b.Fatal(err)
		}
		_ = m.Close(ctx)
	}
}

func BenchmarkValidate(b *testing.B) {
	wasm := scripted(b)
	for b.Loop() {
		if _, err := runtime.Validate(wasm, runtime.ValidateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
