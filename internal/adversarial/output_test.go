package adversarial

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threat: a hook's output that is not a valid decision for its point,
// hoping the platform reads it leniently (as an allow, or as a partial
// modify). Defence: strict decoding; any such output is invalid_output, a
// failure the fail policy handles, never a decision.
func TestOutputRefused(t *testing.T) {
	tests := []struct {
		name   string
		output string
	}{
		{"not JSON", `{action: continue}`},
		{"truncated JSON", `{"action":"continue"`},
		{"trailing data", `{"action":"continue"} {"action":"block"}`},
		{"invalid UTF-8", "{\"action\":\"block\",\"reason\":\"\xff\xfe\"}"},
		{"a lone surrogate", `{"action":"block","reason":"\udc00"}`},
		{"an unknown decision word", `{"action":"permit"}`},
		{"a decision word in another case", `{"action":"Continue"}`},
		{"duplicate action", `{"action":"continue","action":"block"}`},
		{"modify a field the point does not allow", `{"action":"modify","context":{"incoming":"rewritten"}}`},
		{"modify the tenant", `{"action":"modify","context":{"tenant":"other"}}`},
		{"modify nothing", `{"action":"modify","context":{}}`},
		{"an array", `[{"action":"continue"}]`},
		{"empty", ``},
		{"nesting 10,000 deep", `{"action":"block","reason":"x","extra":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			script := opReturnRaw([]byte(tt.output))
			if tt.output == "" {
				script = opOutput(rawPtr, 0)
			}
			_, f := w.faultOnWarmInstance(t, "acme", runtime.Limits{}, script, abi.FailInvalidOutput)
			checkSanitised(t, "failure message", f.Message)
		})
	}
	// The accepted counterpart, so the table above is not refusing everything.
	w := newWorld(t)
	res, err := w.run(t, "acme", runtime.Limits{}, opReturnRaw([]byte(`{"action":"modify","context":{"outgoing":"rewritten"}}`)))
	if err != nil || res.Decision.Action != abi.ActionModify || res.Decision.Context["outgoing"] != "rewritten" {
		t.Fatalf("a valid modify: %v %+v", err, res)
	}
}

// forged is what a hook prints to forge log lines: CR/LF, ANSI escapes, and
// a line that looks like the operator's own JSON log.
const forged = "innocent\r\n" +
	"\x1b[2K\x1b[1A\x1b[31mERROR\x1b[0m credit granted\n" +
	`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"capability: call answered","tenant":"victim","charged":0}` + "\n" +
	"no newline at the end\r"

// Threat: a hook printing CR/LF, ANSI escapes and fake JSON log lines to
// forge or hide the operator's log lines. Defence: the hook's output is kept
// as raw lines (split at LF only), attributed to its stream and invocation,
// and every printer escapes it (JSON here); log.write puts the text in an
// attribute of one record, never in the message.
func TestLogForging(t *testing.T) {
	w := newWorld(t)
	script := opWrite(rawPtr, []byte(forged)) + opPrint(1, rawPtr, uint32(len(forged)), 1) + opPrint(2, rawPtr, uint32(len(forged)), 1) +
		opHostCall("log.write", `{"level":"error","message":`+jsonString(forged)+`}`, 256)
	res, err := w.run(t, "acme", runtime.Limits{}, script)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(t, res)[0]; got.status != abi.StatusOK {
		t.Fatalf("log.write: %v %s", got.status, got.body)
	}
	// stdout and stderr: raw lines, attributed.
	wantLines := strings.Split(strings.TrimSuffix(forged, "\r")+"\r", "\n")
	var stdout, stderr []string
	for _, l := range res.Logs {
		switch l.Stream {
		case "stdout":
			stdout = append(stdout, l.Text)
		case "stderr":
			stderr = append(stderr, l.Text)
		default:
			t.Errorf("a line attributed to %q", l.Stream)
		}
	}
	if strings.Join(stdout, "\n") != strings.Join(wantLines, "\n") || strings.Join(stderr, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("stdout %q, stderr %q; want the raw lines %q on each", stdout, stderr, wantLines)
	}
	// Rendered as JSON (as the CLI does), every line is one escaped string:
	// one output line, no raw control characters, and the fake record is a
	// string value, not a record.
	enc, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	checkEscaped(t, "the result as JSON", enc)
	var back struct{ Logs []runtime.LogLine }
	if err := json.Unmarshal(enc, &back); err != nil || len(back.Logs) != len(res.Logs) {
		t.Fatalf("round trip: %v, %d lines", err, len(back.Logs))
	}
	// log.write: one record in the operator's log, attributed to the caller,
	// the hook's text only in the "message" attribute.
	var found int
	for _, line := range strings.Split(strings.TrimSpace(w.oplog.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("the operator's log has a line that is not a record: %q", line)
		}
		if rec["msg"] == "hook log" {
			found++
			if rec["message"] != forged || rec["tenant"] != "acme" || rec["invocation"] != res.InvocationID {
				t.Errorf("record %v: want the text verbatim in message, attributed to acme/%s", rec, res.InvocationID)
			}
		}
		if rec["tenant"] == "victim" {
			t.Errorf("a forged record made it into the operator's log: %q", line)
		}
	}
	if found != 1 {
		t.Errorf("%d hook log records, want 1", found)
	}
	checkEscaped(t, "the operator's log", []byte(strings.ReplaceAll(strings.TrimSpace(w.oplog.String()), "\n", "")))
}

// checkEscaped fails if b holds a raw control character.
func checkEscaped(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, c := range []byte{'\n', '\r', 0x1b} {
		if i := bytes.IndexByte(b, c); i >= 0 {
			t.Errorf("%s holds a raw %q at byte %d", what, c, i)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Threat: a hook printing 10 MB to fill the host's memory or its logs.
// Defence: stdout and stderr together are capped per invocation
// (MaxLogBytes); the rest is dropped and counted, without being copied.
func TestLogFlood(t *testing.T) {
	w := newWorld(t)
	const chunk, times = 64 << 10, 160 // 10 MiB
	script := opFill(0x60000, chunk, 'x') + opFill(0x60000+chunk-1, 1, '\n') + opPrint(1, 0x60000, chunk, times)
	before := totalAlloc()
	res := w.runWithin(t, 5*time.Second, "printing 10 MiB", runtime.Limits{}, script)
	kept := 0
	for _, l := range res.Logs {
		kept += len(l.Text) + 1
	}
	if kept > runtime.DefaultMaxLogBytes || res.LogBytesDropped != chunk*times-runtime.DefaultMaxLogBytes {
		t.Errorf("kept %d bytes, dropped %d; want at most %d kept and the rest (%d) counted", kept, res.LogBytesDropped,
			runtime.DefaultMaxLogBytes, chunk*times-runtime.DefaultMaxLogBytes)
	}
	if grew := totalAlloc() - before; grew > 8<<20 {
		t.Errorf("printing 10 MiB allocated %d MiB on the host", grew>>20)
	}
	// Empty lines cost a LogLine each: bounded by the cap too.
	lines := opFill(0x60000, chunk, '\n') + opPrint(2, 0x60000, chunk, times)
	before = totalAlloc()
	res, err := w.run(t, "acme", runtime.Limits{}, lines)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Logs) != runtime.DefaultMaxLogBytes || res.LogBytesDropped != chunk*times-runtime.DefaultMaxLogBytes {
		t.Errorf("%d lines, %d bytes dropped", len(res.Logs), res.LogBytesDropped)
	}
	if grew := totalAlloc() - before; grew > 32<<20 {
		t.Errorf("%d empty lines allocated %d MiB on the host", len(res.Logs), grew>>20)
	}
	// The next invocation has a log of its own.
	res, err = w.run(t, "acme", runtime.Limits{}, opWrite(rawPtr, []byte("hi\n"))+opPrint(2, rawPtr, 3, 1))
	if err != nil || len(res.Logs) != 1 || res.Logs[0].Text != "hi" || res.LogBytesDropped != 0 {
		t.Errorf("the next invocation's log: %v %+v", err, res)
	}
}
