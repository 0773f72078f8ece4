package client

import (
	"strings"
	"testing"
)

// TestReadEvents: the event-stream format's cases: named and unnamed
// events, multi-line data, comments, CRLF-free "field:value" without the
// space, events without data (not dispatched), a stop.
func TestReadEvents(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string // name=data
	}{
		{"one", "event: status\ndata: {}\n\n", []string{"status={}"}},
		{"comments and heartbeats", ": hi\n\n: heartbeat\n\nevent: x\ndata: 1\n\n", []string{"x=1"}},
		{"unnamed", "data: a\n\n", []string{"message=a"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"message=a\nb"}},
		{"no space", "event:x\ndata:1\n\n", []string{"x=1"}},
		{"no data: not dispatched", "event: x\n\nevent: y\ndata: 2\n\n", []string{"y=2"}},
		{"unterminated last event: not dispatched", "event: x\ndata: 1", nil},
		{"unknown fields ignored", "id: 7\nretry: 10\nevent: x\ndata: 1\n\n", []string{"x=1"}},
		{"stops at resolved", "event: resolved\ndata: 1\n\nevent: x\ndata: 2\n\n", []string{"resolved=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			err := readEvents(strings.NewReader(c.in), func(name string, data []byte) (bool, error) {
				got = append(got, name+"="+string(data))
				return name == "resolved", nil
			})
			if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// FuzzReadEvents: any stream parses without a panic, and no event's data
// is longer than the stream.
func FuzzReadEvents(f *testing.F) {
	f.Add("event: status\ndata: {}\n\n: heartbeat\n\nevent: resolved\ndata: {\"id\":\"a\"}\n\n")
	f.Add("data:\ndata:\n\n")
	f.Add(":\n\n\n\nevent")
	f.Fuzz(func(t *testing.T, in string) {
		_ = readEvents(strings.NewReader(in), func(name string, data []byte) (bool, error) {
			if len(data) > len(in) || (len(name) > len(in) && name != "message") {
				t.Fatalf("event %q of %d bytes from %d", name, len(data), len(in))
			}
			return false, nil
		})
	})
}
