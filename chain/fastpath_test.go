package chain

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// overheadChain is the chain of the bench module's chain/3-hooks row with
// the runtime replaced by canned results: a transformer that redacts a
// secret from a 1 KiB message, an observer and a guard that continue. It
// measures the chain's own work.
func overheadChain(tb testing.TB) (*Chain, Input) {
	t := &testing.T{}
	cfg := policyConfig(t,
		Binding{Name: "redact", Point: outbound, Phase: Transformer},
		Binding{Name: "observe", Point: outbound, Phase: Observer},
		Binding{Name: "guard", Point: outbound, Phase: Guard})
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 11)
	in := Input{Tenant: "acme", Point: outbound, Run: "bench", Context: map[string]any{"outgoing": text + "AKIAIOSFODNN7EXAMPLE" + text}}
	redacted := &runtime.Result{Decision: &abi.Decision{Action: abi.ActionModify, Reason: "redacted 1 secret",
		Context: map[string]any{"outgoing": text + "[REDACTED]" + text}}}
	cont := &runtime.Result{Decision: &abi.Decision{Action: abi.ActionContinue}}
	engine := &fakeEngine{Runtime: testRuntime(t), invoke: func(_ context.Context, _ *runtime.Module, req runtime.Request) (*runtime.Result, error) {
		if req.Hook == "redact" {
			return redacted, nil
		}
		return cont, nil
	}}
	c, err := New(context.Background(), cfg, Options{Runtime: engine, Audit: &audittest.LinkingSink{}, Logger: quiet(),
		TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(context.Background()) })
	if out, err := c.Run(context.Background(), in); err != nil || !out.Modified || len(out.Trace) != 3 || len(out.Records()) != 3 {
		tb.Fatalf("outcome %+v, %v", out, err)
	}
	return c, in
}

// TestChainAllocations bounds the chain's own allocations for the three
// steps of overheadChain: 28 when this test was written (141 before the
// audit records and digests were written by hand and the step logger made
// lazily).
func TestChainAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	c, in := overheadChain(t)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Run(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 32 {
		t.Errorf("%v allocations per run, want at most 32", allocs)
	}
}

// TestStepLogsAttributed: the records a step logs carry the run, tenant,
// point and binding (the logger carrying them is made only when a record is
// wanted), and the run's verdict is logged at debug level.
func TestStepLogsAttributed(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := policyConfig(t,
		Binding{Name: "ignored", Point: outbound, Phase: Observer, Settings: decide(`{"action":"block","reason":"no"}`)},
		Binding{Name: "broken", Point: outbound, Phase: Guard, Fail: FailOpen, Settings: decide(`{"action":"explode"}`)})
	e := newEnv(t, cfg, func(o *Options) { o.Logger = logger })
	out, err := e.c.Run(context.Background(), Input{Tenant: "acme", Point: outbound, Run: "run-7", Context: map[string]any{"outgoing": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"chain: decision ignored": "ignored", "chain: hook failed": "broken", "chain: verdict": ""}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		msg, _ := rec["msg"].(string)
		binding, ok := want[msg]
		if !ok {
			continue
		}
		delete(want, msg)
		if rec["run"] != "run-7" || rec["tenant"] != "acme" || rec["point"] != outbound || rec["binding"] != binding {
			t.Errorf("%s: attributes %v", msg, rec)
		}
	}
	if len(want) > 0 {
		t.Errorf("not logged: %v (outcome %+v)", want, out)
	}
}

// TestHookSpanAttributes: every chain.hook span carries its binding's
// attributes (made once per configuration and shared by the runs) and what
// the step applied, run after run.
func TestHookSpanAttributes(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	cfg := policyConfig(t,
		Binding{Name: "add", Point: outbound, Phase: Transformer, Priority: 3, Settings: appendTo("outgoing", "!")},
		Binding{Name: "stop", Point: outbound, Phase: Guard, Priority: -2, Settings: when("no", `{"action":"block"}`)})
	e := newEnv(t, cfg, func(o *Options) { o.TracerProvider = tp })
	info, _ := e.c.Info()
	digest := info.Points[outbound][0].Digest
	want := []map[string]string{
		{"wasmhooks.binding": "add", "wasmhooks.phase": "transformer", "wasmhooks.priority": "3", "wasmhooks.module": digest,
			"wasmhooks.applied": "modify", "wasmhooks.by": "hook"},
		{"wasmhooks.binding": "stop", "wasmhooks.phase": "guard", "wasmhooks.priority": "-2", "wasmhooks.module": digest,
			"wasmhooks.applied": "continue", "wasmhooks.by": "hook"},
	}
	for run := range 3 {
		sr.Reset()
		e.run(t, outbound, map[string]any{"outgoing": "x"})
		var hooks []map[string]string
		for _, s := range sr.Ended() {
			if s.Name() != "chain.hook" {
				continue
			}
			attrs := map[string]string{}
			for _, kv := range s.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			hooks = append(hooks, attrs)
		}
		if len(hooks) != len(want) {
			t.Fatalf("run %d: %d hook spans, want %d", run, len(hooks), len(want))
		}
		for i := range want {
			for k, v := range want[i] {
				if hooks[i][k] != v {
					t.Errorf("run %d, hook span %d: %s = %q, want %q (all: %v)", run, i, k, hooks[i][k], v, hooks[i])
				}
			}
			if len(hooks[i]) != len(want[i]) {
				t.Errorf("run %d, hook span %d: attributes %v, want %v", run, i, hooks[i], want[i])
			}
		}
	}
}
