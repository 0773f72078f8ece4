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

	"github.com/wasmhooks/wasmhooks/abi"
)

type echoCaller struct{}

func (echoCaller) HostCall(_ context.Context, call *abi.Call) abi.Reply {
	if call.Name == "t.echo" {
		return abi.Reply{Status: abi.StatusOK, Body: []byte(`{"ok":true}`), Charged: 7}
	}
	return abi.ErrorReply(abi.StatusUnknownCapability, "unknown")
}

func TestSpans(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	cfg := policyConfig(t,
		Binding{Name: "caller", Module: "scripted", Point: outbound, Phase: Transformer, Fail: FailOpen,
			Grants: []string{"t.echo"}, Settings: script(hostCallScript("t.echo") + hostCallScript("zz.made-up"))},
		Binding{Name: "guard", Point: outbound, Phase: Guard},
	)
	e := newEnv(t, cfg, func(o *Options) { o.TracerProvider = tp; o.HostCaller = echoCaller{} })
	out := e.run(t, outbound, map[string]any{"outgoing": "x"})
	calls := out.Trace[0].HostCalls
	if len(calls) != 2 || calls[0].Capability != "t.echo" || calls[0].Status != "ok" || calls[0].Charged != 7 || calls[1].Status != "unknown_capability" {
		t.Errorf("host calls %+v", calls)
	}
	if out.Records()[0].HostCalls[0].Capability != "t.echo" {
		t.Errorf("audit host calls %+v", out.Records()[0].HostCalls)
	}

	spans := sr.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	var hooks []sdktrace.ReadOnlySpan
	for _, s := range spans {
		byName[s.Name()] = s
		if s.Name() == "chain.hook" {
			hooks = append(hooks, s)
		}
	}
	run, echo, unknown := byName["chain.run"], byName["t.echo"], byName["host_call"]
	if run == nil || echo == nil || unknown == nil || len(hooks) != 2 {
		var got []string
		for _, s := range spans {
			got = append(got, s.Name())
		}
		t.Fatalf("spans %v", got)
	}
	if _, ok := byName["zz.made-up"]; ok {
		t.Error("a hook minted a span name")
	}
	for _, h := range hooks {
		if h.Parent().SpanID() != run.SpanContext().SpanID() {
			t.Errorf("hook span not under the run span")
		}
	}
	if echo.Parent().SpanID() != hooks[0].SpanContext().SpanID() {
		t.Errorf("capability span not under its hook's span")
	}
	attrs := map[string]string{}
	for _, kv := range run.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["wasmhooks.verdict"] != "allow" || attrs["wasmhooks.point"] != outbound || attrs["wasmhooks.tenant"] != "acme" {
		t.Errorf("run span attributes %v", attrs)
	}
}

// TestHookOutputIsAttributedAndNeverInterpreted: a hook that prints fake log
// records, newlines and terminal escapes gets one log record per line it
// wrote, carrying its binding, with the text as a value.
func TestHookOutputIsAttributedAndNeverInterpreted(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	forged := `{"time":"2025-01-01T00:00:00Z","level":"ERROR","msg":"forged","binding":"someone-else"}`
	cfg := policyConfig(t, Binding{Name: "noisy", Point: outbound, Phase: Observer,
		Settings: map[string]any{"log": "hello\n" + forged + "\n\x1b[2Kcleared"}})
	e := newEnv(t, cfg, func(o *Options) { o.Logger = logger })
	out := e.run(t, outbound, nil)
	if n := len(out.Trace[0].Logs); n != 3 {
		t.Fatalf("%d log lines in the trace, want 3: %+v", n, out.Trace[0].Logs)
	}
	var texts []string
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not one JSON record: %q", sc.Text())
		}
		if rec["msg"] == "forged" {
			t.Errorf("the hook forged a log record: %v", rec)
		}
		if rec["msg"] == "chain: hook output" {
			if rec["binding"] != "noisy" || rec["stream"] != "stdout" {
				t.Errorf("hook output not attributed: %v", rec)
			}
			texts = append(texts, rec["text"].(string))
		}
	}
	want := []string{"hello", forged, "\x1b[2Kcleared"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("hook output %q, want %q", texts, want)
	}
}
