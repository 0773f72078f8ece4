package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func rec(i int) *Record {
	return &Record{
		Time: time.Date(2025, 1, 2, 3, 4, 5, i, time.UTC), Run: "r1", Tenant: "acme", Point: "message.outbound",
		Binding: "b", Phase: "guard", Module: "abc", Decision: "continue", By: "hook",
		Input: Digest(map[string]any{"outgoing": "x"}), Output: Digest(map[string]any{"outgoing": "x"}),
		Diff: []Change{{Field: "outgoing", Before: Digest("a"), After: Digest("b"), BeforeValue: "a", AfterValue: json.Number("1.50")}},
	}
}

// openFile is OpenFile, failing the test on an error.
func openFile(t *testing.T, path string, opts FileOptions) *FileSink {
	t.Helper()
	s, err := OpenFile(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fill(t *testing.T, s Sink, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := s.Append(context.Background(), rec(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVerify(t *testing.T) {
	s := NewMemorySink()
	fill(t, s, 5)
	good := s.Records()
	if err := Verify(good); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	head, next := s.Head()
	if head != good[4].Hash || next != 5 || good[0].Prev != "" || good[3].Prev != good[2].Hash {
		t.Errorf("head %s next %d", head, next)
	}
	tests := []struct {
		name   string
		tamper func([]Record) []Record
		index  int
	}{
		{"modified decision", func(r []Record) []Record { r[2].Decision = "block"; return r }, 2},
		{"modified value in a diff", func(r []Record) []Record { r[1].Diff[0].AfterValue = "c"; return r }, 1},
		{"modified and rehashed", func(r []Record) []Record {
			r[2].Reason = "x"
			r[2].Hash, _ = Hash(&r[2])
			return r
		}, 3},
		{"deleted", func(r []Record) []Record { return append(r[:1:1], r[2:]...) }, 1},
		{"deleted first", func(r []Record) []Record { return r[1:] }, 0},
		{"swapped", func(r []Record) []Record { r[1], r[2] = r[2], r[1]; return r }, 1},
		{"inserted copy", func(r []Record) []Record { return append(r[:3:3], append([]Record{r[2]}, r[3:]...)...) }, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := tt.tamper(clone(good))
			err := Verify(recs)
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Index != tt.index {
				t.Errorf("Verify = %v, want a VerifyError at index %d", err, tt.index)
			}
		})
	}
	if err := VerifyFrom(good[1].Hash, 2, good[2:]); err != nil {
		t.Errorf("VerifyFrom a suffix: %v", err)
	}
}

func clone(r []Record) []Record {
	b, _ := json.Marshal(r)
	var out []Record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	_ = dec.Decode(&out)
	return out
}

func TestFileSinkReopensAndContinues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openFile(t, path, FileOptions{Sync: true})
	fill(t, s, 3)
	s.Close()
	if err := s.Append(context.Background(), rec(9)); err == nil {
		t.Error("Append after Close succeeded")
	}
	s2 := openFile(t, path, FileOptions{})
	fill(t, s2, 2)
	if _, next := s2.Head(); next != 5 {
		t.Errorf("next seq %d, want 5", next)
	}
	s2.Close()
	n, err := VerifyFile(path)
	if err != nil || n != 5 {
		t.Fatalf("VerifyFile = %d, %v", n, err)
	}
	recs, err := ReadFile(path)
	if err != nil || len(recs) != 5 {
		t.Fatalf("ReadFile = %d, %v", len(recs), err)
	}
	if err := Verify(recs); err != nil {
		t.Errorf("Verify(ReadFile) = %v", err)
	}

	lines := strings.Split(strings.TrimSpace(readString(t, path)), "\n")
	tamper := []struct {
		name  string
		edit  func([]string) []string
		index int
	}{
		{"changed value", func(l []string) []string { l[3] = strings.Replace(l[3], `"continue"`, `"block"`, 1); return l }, 3},
		{"added field", func(l []string) []string { l[1] = strings.Replace(l[1], `{"seq"`, `{"extra":1,"seq"`, 1); return l }, 1},
		{"deleted line", func(l []string) []string { return append(l[:2:2], l[3:]...) }, 2},
	}
	for _, tt := range tamper {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "audit.jsonl")
			if err := os.WriteFile(p, []byte(strings.Join(tt.edit(append([]string(nil), lines...)), "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := VerifyFile(p)
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Index != tt.index {
				t.Errorf("VerifyFile = %v, want index %d", err, tt.index)
			}
		})
	}
}

func TestFileSinkRefusesATornFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openFile(t, path, FileOptions{})
	fill(t, s, 1)
	s.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":1,"ti`)
	f.Close()
	if _, err := OpenFile(path, FileOptions{}); err == nil || !strings.Contains(err.Error(), "needs repair") {
		t.Errorf("OpenFile on a torn file = %v", err)
	}
}

func TestConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	fs := openFile(t, path, FileOptions{})
	defer fs.Close()
	ms := NewMemorySink()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				_ = ms.Append(context.Background(), rec(i))
				_ = fs.Append(context.Background(), rec(i))
			}
		}()
	}
	wg.Wait()
	if err := Verify(ms.Records()); err != nil {
		t.Error(err)
	}
	if n, err := VerifyFile(path); err != nil || n != 200 {
		t.Errorf("VerifyFile = %d, %v", n, err)
	}
}

func TestDigestIsCanonical(t *testing.T) {
	a := Digest(map[string]any{"b": 1, "a": "x"})
	b := Digest(map[string]any{"a": "x", "b": 1})
	if a != b || !strings.HasPrefix(a, "sha256:") || Digest(map[string]any(nil)) != Digest(map[string]any{}) {
		t.Errorf("digests %s %s", a, b)
	}
}

func readString(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
