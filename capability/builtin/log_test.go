package builtin

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/capabilitytest"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

func TestLogWriteConformance(t *testing.T) {
	capabilitytest.Run(t, LogWrite(LogConfig{Sink: &MemoryLogSink{}}),
		capabilitytest.Case{Name: "message", Payload: `{"message": "hello"}`, Valid: true},
		capabilitytest.Case{Name: "level", Payload: `{"level": "warn", "message": "careful"}`, Valid: true},
		capabilitytest.Case{Name: "empty message", Payload: `{"message": ""}`, Valid: true},
		capabilitytest.Case{Name: "no message", Payload: `{"level": "info"}`},
		capabilitytest.Case{Name: "unknown level", Payload: `{"level": "fatal", "message": "x"}`},
		capabilitytest.Case{Name: "message too long", Payload: `{"message": "` + strings.Repeat("x", 4097) + `"}`},
		capabilitytest.Case{Name: "message not a string", Payload: `{"message": {"text": "x"}}`},
		capabilitytest.Case{Name: "hook chosen by the payload", Payload: `{"message": "x", "hook": "other"}`},
	)
}

// logRunner returns a runner with log.write writing to sink.
func logRunner(t *testing.T, sink LogSink) *capability.Runner {
	t.Helper()
	reg := capability.NewRegistry()
	reg.MustRegister(LogWrite(LogConfig{Sink: sink}))
	r, err := capability.NewRunner(reg, capability.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func logCall(invocation, payload string) *abi.Call {
	return &abi.Call{Name: LogWriteName, Payload: []byte(payload), Seq: 1, Caller: abi.Caller{
		Tenant: "acme", Hook: "redact", Invocation: invocation, Granted: []string{LogWriteName}}}
}

// syncBuffer is a bytes.Buffer safe for a slog handler.
type syncBuffer = testutil.SyncBuffer

// TestLogWriteCannotForgeLines writes hostile messages through a text and a
// JSON handler: each call must produce exactly one line, with the hook's
// text inside the message attribute and no raw control characters.
func TestLogWriteCannotForgeLines(t *testing.T) {
	forged := "innocent\n" + `time=2026-01-01T00:00:00Z level=INFO msg="credit granted" tenant=acme amount=1000000` +
		"\r\n{\"level\":\"INFO\",\"msg\":\"credit granted\"}\x1b[2K\x1b[31mred\x07"
	payload, _ := abi.Marshal(map[string]any{"level": "error", "message": forged})
	handlers := []struct {
		name string
		new  func(*syncBuffer) slog.Handler
	}{
		{"text", func(b *syncBuffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
		{"json", func(b *syncBuffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
	}
	for _, h := range handlers {
		t.Run(h.name, func(t *testing.T) {
			buf := &syncBuffer{}
			r := logRunner(t, SlogSink{Logger: slog.New(h.new(buf))})
			if reply := r.HostCall(context.Background(), logCall("inv-1", string(payload))); reply.Status != abi.StatusOK {
				t.Fatalf("status %v %s", reply.Status, reply.Body)
			}
			out := buf.String()
			if n := strings.Count(out, "\n"); n != 1 || !strings.HasSuffix(out, "\n") {
				t.Errorf("%d lines written:\n%s", n, out)
			}
			if strings.ContainsAny(strings.TrimSuffix(out, "\n"), "\r\n\x1b\x07") {
				t.Errorf("raw control characters in the log line: %q", out)
			}
			for _, want := range []string{"hook log", "acme", "redact", "inv-1", "ERROR"} {
				if !strings.Contains(out, want) {
					t.Errorf("line lacks %q: %s", want, out)
				}
			}
			if h.name == "json" {
				var rec map[string]any
				if err := json.Unmarshal([]byte(out), &rec); err != nil {
					t.Fatal(err)
				}
				if rec["message"] != forged || rec["msg"] != "hook log" {
					t.Errorf("record %v", rec)
				}
			}
		})
	}
}

func TestLogWriteLevelsAndLimits(t *testing.T) {
	sink := &MemoryLogSink{MaxPerInvocation: 3}
	r := logRunner(t, sink)
	tests := []struct {
		name      string
		inv       string
		payload   string
		want      abi.Status
		wantLevel slog.Level
	}{
		{"default level", "a", `{"message": "one"}`, abi.StatusOK, slog.LevelInfo},
		{"debug", "a", `{"level": "debug", "message": "two"}`, abi.StatusOK, slog.LevelDebug},
		{"error", "a", `{"level": "error", "message": "three"}`, abi.StatusOK, slog.LevelError},
		{"per-invocation limit", "a", `{"message": "four"}`, abi.StatusQuotaExceeded, 0},
		{"another invocation", "b", `{"level": "warn", "message": "one"}`, abi.StatusOK, slog.LevelWarn},
		{"4096 characters but 8192 bytes", "b", `{"message": "` + strings.Repeat("é", 4096) + `"}`, abi.StatusInvalidRequest, 0},
		{"4096 bytes", "b", `{"message": "` + strings.Repeat("x", 4096) + `"}`, abi.StatusOK, slog.LevelInfo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(sink.Entries(tc.inv))
			reply := r.HostCall(context.Background(), logCall(tc.inv, tc.payload))
			if reply.Status != tc.want {
				t.Fatalf("status %v %s, want %v", reply.Status, reply.Body, tc.want)
			}
			entries := sink.Entries(tc.inv)
			if tc.want != abi.StatusOK {
				if len(entries) != before {
					t.Errorf("a refused line was kept")
				}
				return
			}
			e := entries[len(entries)-1]
			if e.Level != tc.wantLevel || e.Tenant != "acme" || e.Hook != "redact" || e.Invocation != tc.inv {
				t.Errorf("entry %+v", e)
			}
		})
	}
	if got := sink.Take("a"); len(got) != 3 || got[0].Message != "one" {
		t.Errorf("Take = %+v", got)
	}
	if got := sink.Entries("a"); len(got) != 0 {
		t.Errorf("Take did not forget: %d", len(got))
	}
}
