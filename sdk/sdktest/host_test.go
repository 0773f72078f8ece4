//go:build !wasip1

package sdktest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

// TestParkAndTake drives the fake host's host_call directly, as a guest that
// is not the Go SDK would.
func TestParkAndTake(t *testing.T) {
	h := NewHost()
	long := strings.Repeat("x", 100)
	h.Register("big", func(map[string]any) (any, error) { return long, nil })
	h.RegisterError("fail", abi.StatusCapabilityFailed, long)
	body := `"` + long + `"`
	n := uint32(len(body))

	type step struct {
		name       string
		capability string
		payload    string
		outCap     int
		status     abi.Status
		length     uint32
		wrote      string
	}
	steps := []step{
		{"take with nothing parked", "", "", 10, abi.StatusNoPending, 0, ""},
		{"call that fits", "big", "{}", 200, abi.StatusOK, n, body},
		{"take after a reply that fit", "", "", 200, abi.StatusNoPending, 0, ""},
		{"call that does not fit parks", "big", "{}", 10, abi.StatusOK, n, ""},
		{"take into a buffer still too small", "", "", 50, abi.StatusBufferTooSmall, n, ""},
		{"take that fits", "", "", int(n), abi.StatusOK, n, body},
		{"second take", "", "", 200, abi.StatusNoPending, 0, ""},
		{"park again", "big", "{}", 0, abi.StatusOK, n, ""},
		{"a new call drops the parked reply", "nope", "{}", 200, abi.StatusUnknownCapability, 0, ""},
		{"nothing parked after it", "", "", 200, abi.StatusNoPending, 0, ""},
		{"error bodies park too", "fail", "{}", 10, abi.StatusCapabilityFailed, 0, ""},
		{"and are taken with their status", "", "", 1000, abi.StatusCapabilityFailed, 0, `{"code":"capability_failed"`},
		{"name without payload is not a take", "big", "", 200, abi.StatusInvalidRequest, 0, ""},
		{"payload without name is not a take", "", "{}", 200, abi.StatusUnknownCapability, 0, ""},
	}
	for _, s := range steps {
		out := make([]byte, s.outCap)
		status, length := h.hostCall(s.capability, []byte(s.payload), out)
		if status != s.status || (s.length != 0 && length != s.length) {
			t.Fatalf("%s: got %s %d, want %s %d", s.name, status, length, s.status, s.length)
		}
		if s.wrote != "" && !strings.HasPrefix(string(out), s.wrote) {
			t.Fatalf("%s: wrote %q, want %q", s.name, out, s.wrote)
		}
		if s.wrote == "" && strings.Trim(string(out), "\x00") != "" && int(length) > s.outCap {
			t.Fatalf("%s: wrote %q into a buffer the body did not fit", s.name, out)
		}
	}
	calls := h.Calls()
	if len(calls) != 7 || !calls[1].Parked || calls[1].Takes != 3 || calls[0].Parked || calls[0].Takes != 1 {
		t.Errorf("calls: %d; parked %t %t, takes %d %d", len(calls), calls[0].Parked, calls[1].Parked, calls[0].Takes, calls[1].Takes)
	}
}

func TestRunErrors(t *testing.T) {
	h := NewHost()
	if _, err := h.Run(Invocation{Point: "no.such.point"}); err == nil || errors.Is(err, ErrHookFailed) {
		t.Errorf("unknown point: err = %v", err)
	}
	if _, err := h.RunRaw(Invocation{Point: "message.outbound", Context: map[string]any{"x": func() {}}}); err == nil || !strings.Contains(err.Error(), "encoding the invocation") {
		t.Errorf("unencodable context: err = %v", err)
	}
	if _, err := h.RunHandler(nil, Invocation{Point: "message.outbound"}); err == nil {
		t.Error("RunHandler(nil) succeeded")
	}
}

func TestSetKVNormalises(t *testing.T) {
	h := NewHost()
	if err := h.SetKV("k", struct{ N int }{3}); err != nil {
		t.Fatal(err)
	}
	v, ok := h.KV("k")
	if m, _ := v.(map[string]any); !ok || m["N"] != json.Number("3") {
		t.Errorf("KV = %#v", v)
	}
	if err := h.SetKV("bad", func() {}); err == nil {
		t.Error("SetKV of a func succeeded")
	}
}
