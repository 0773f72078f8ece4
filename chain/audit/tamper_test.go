package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testKey = []byte("k0123456789abcdef0123456789abcdef")

// keyedLog writes n records through a keyed FileSink with a checkpoint and
// returns the log's path, its checkpoint's path and the records.
func keyedLog(t *testing.T, n int) (string, string, []Record) {
	t.Helper()
	dir := t.TempDir()
	path, cp := filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "audit.checkpoint")
	s := openFile(t, path, FileOptions{Key: testKey, Checkpoint: cp})
	for i := 0; i < n; i++ {
		r := rec(i)
		if i == 2 {
			r.Decision, r.Reason = "block", "destructive command"
		}
		if err := s.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	recs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, cp, recs
}

// rechain is what someone who can write the log but does not hold the key
// can do after changing records: renumber them and recompute every prev and
// hash. MACs stay as they were (or absent): they cannot make them.
func rechain(recs []Record) []Record {
	prev := ""
	for i := range recs {
		recs[i].Seq, recs[i].Prev = uint64(i), prev
		recs[i].Hash, _ = Hash(&recs[i])
		prev = recs[i].Hash
	}
	return recs
}

func writeRecords(t *testing.T, path string, recs []Record) {
	t.Helper()
	var buf bytes.Buffer
	for i := range recs {
		line, h, err := encode(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if h != recs[i].Hash { // a record written as-is keeps its claimed hash
			line = append(line[:len(line)-len(h)-2], recs[i].Hash+`"}`...)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestKeyedLogDetectsTampering: every way of rewriting the log that a plain
// hash chain cannot see (recomputed hashes, a forged record with a correct
// hash, cut records) is found by VerifyFileWith with the key and the
// checkpoint kept apart; unkeyed, the rewritten logs verify.
func TestKeyedLogDetectsTampering(t *testing.T) {
	forged := func() Record {
		r := *rec(99)
		r.Decision, r.Reason = "continue", "looks fine"
		return r
	}
	tests := []struct {
		name string
		edit func([]Record) []Record
		// unkeyedOK: the plain hash chain does not see it.
		unkeyedOK bool
	}{
		{"edited", func(r []Record) []Record { r[2].Decision = "continue"; return r }, false},
		{"edited, rehashed", func(r []Record) []Record { r[2].Decision = "continue"; return rechain(r) }, true},
		{"inserted, rehashed", func(r []Record) []Record {
			return rechain(append(r[:3:3], append([]Record{forged()}, r[3:]...)...))
		}, true},
		{"deleted, rehashed", func(r []Record) []Record { return rechain(append(r[:2:2], r[3:]...)) }, true},
		{"reordered, rehashed", func(r []Record) []Record { r[1], r[2] = r[2], r[1]; return rechain(r) }, true},
		{"rehashed without macs", func(r []Record) []Record {
			for i := range r {
				r[i].MAC = ""
			}
			r[2].Decision = "continue"
			return rechain(r)
		}, true},
		{"truncated", func(r []Record) []Record { return r[:4] }, true},
		{"truncated to nothing", func(r []Record) []Record { return nil }, true},
		{"forged record appended", func(r []Record) []Record {
			f := forged()
			return rechain(append(r, f))
		}, true},
		{"mac copied from another record", func(r []Record) []Record {
			r[2].Decision, r[2].MAC = "continue", r[1].MAC
			return rechain(r)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, cpPath, recs := keyedLog(t, 6)
			cp, err := ReadCheckpoint(cpPath)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := VerifyFileWith(path, VerifyOptions{Key: testKey, Checkpoint: cp}); err != nil || n != 6 {
				t.Fatalf("the untouched log: %d, %v", n, err)
			}
			writeRecords(t, path, tt.edit(recs))
			_, plain := VerifyFile(path)
			if tt.unkeyedOK && plain != nil {
				t.Errorf("unkeyed VerifyFile = %v; the case is meant to be one a plain hash chain misses", plain)
			}
			_, err = VerifyFileWith(path, VerifyOptions{Key: testKey, Checkpoint: cp})
			var ve *VerifyError
			if !errors.As(err, &ve) {
				t.Fatalf("VerifyFileWith = %v, want a VerifyError", err)
			}
			// The sink does not continue from a log whose end was
			// rewritten (OpenFile reads the end; a record edited in the
			// middle, its hash left broken, is VerifyFile's to find).
			if s, err := OpenFile(path, FileOptions{Key: testKey, Checkpoint: cpPath}); err == nil && tt.name != "edited" {
				s.Close()
				t.Errorf("OpenFile continued the rewritten log")
			}
			// Records in memory: VerifyWith sees the same.
			got, rerr := ReadFile(path)
			if rerr == nil {
				if err := VerifyWith(got, VerifyOptions{Key: testKey, Checkpoint: cp}); err == nil {
					t.Errorf("VerifyWith accepted the rewritten records")
				}
			}
		})
	}
}

// A forged record appended with a correct hash is refused when the keyed sink
// opens the log, even without a checkpoint.
func TestOpenFileRefusesAForgedLastRecord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	s := openFile(t, path, FileOptions{Key: testKey})
	fill(t, s, 3)
	s.Close()
	recs, _ := ReadFile(path)
	f := *rec(7)
	writeRecords(t, path, rechain(append(recs, f)))
	if _, err := VerifyFile(path); err != nil {
		t.Fatalf("the forgery should pass the plain chain: %v", err)
	}
	if _, err := OpenFile(path, FileOptions{Key: testKey}); err == nil || !strings.Contains(err.Error(), "mac") {
		t.Fatalf("OpenFile = %v, want a refusal naming the mac", err)
	}
}

func TestCheckpoints(t *testing.T) {
	path, cpPath, _ := keyedLog(t, 3)
	cp, _ := ReadCheckpoint(cpPath)
	if cp.Records != 3 {
		t.Fatalf("checkpoint %+v", cp)
	}
	// A checkpoint changed, or checked under another key, is refused.
	bad := *cp
	bad.Records = 2
	if _, err := VerifyFileWith(path, VerifyOptions{Key: testKey, Checkpoint: &bad}); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("changed checkpoint: %v", err)
	}
	other := []byte("another key, 32 bytes or more long")
	if _, err := VerifyFileWith(path, VerifyOptions{Key: other, Checkpoint: cp}); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("another key: %v", err)
	}
	if _, err := VerifyFileWith(path, VerifyOptions{Key: other}); err == nil {
		t.Errorf("records verified under another key")
	}
	if _, err := VerifyFileWith(path, VerifyOptions{Checkpoint: cp}); err == nil {
		t.Errorf("a checkpoint without a key was accepted")
	}
	// A missing checkpoint for a non-empty log stops the sink.
	os.Remove(cpPath)
	if _, err := OpenFile(path, FileOptions{Key: testKey, Checkpoint: cpPath}); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("OpenFile without its checkpoint = %v", err)
	}
	if _, err := OpenFile(path, FileOptions{Key: []byte("short")}); err == nil {
		t.Errorf("a short key was accepted")
	}
	// The keyed sink reopens and continues, and the checkpoint follows.
	path2 := filepath.Join(t.TempDir(), "a.jsonl")
	cp2 := path2 + ".checkpoint"
	for i := 0; i < 2; i++ {
		s := openFile(t, path2, FileOptions{Key: testKey, Checkpoint: cp2, Sync: true})
		fill(t, s, 2)
		s.Close()
	}
	c, _ := ReadCheckpoint(cp2)
	if n, err := VerifyFileWith(path2, VerifyOptions{Key: testKey, Checkpoint: c}); err != nil || n != 4 {
		t.Fatalf("reopened keyed log: %d, %v", n, err)
	}
}

// A keyed record's stored form is still encoding/json's, MAC included, and
// a keyed memory sink verifies with its key and checkpoint.
func TestKeyedRecordEncoding(t *testing.T) {
	ms, err := NewKeyedMemorySink(testKey)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, ms, 3)
	recs := ms.Records()
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for i := range recs {
		if recs[i].MAC == "" {
			t.Fatal("no mac")
		}
		checkRecord(t, &recs[i])
	}
	cp, ok := ms.Checkpoint()
	if !ok {
		t.Fatal("no checkpoint")
	}
	if err := VerifyWith(recs, VerifyOptions{Key: testKey, Checkpoint: &cp}); err != nil {
		t.Fatal(err)
	}
	if err := VerifyWith(recs[:2], VerifyOptions{Key: testKey, Checkpoint: &cp}); err == nil {
		t.Error("a truncated chain verified against its checkpoint")
	}
	b, _ := json.Marshal(recs[0])
	if !bytes.Contains(b, []byte(`"prev":"","mac":"`)) {
		t.Errorf("mac is not after prev: %s", b)
	}
}

// encodeKeyed writes what encode writes for the record with its MAC set.
func TestEncodeKeyedMatchesEncode(t *testing.T) {
	for i := 0; i < 3; i++ {
		r := rec(i)
		r.Reason = "<a & b>"
		line, h, err := encodeKeyed(r, testKey, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, wantH, _ := encode(r) // r.MAC is set now
		if !bytes.Equal(line, want) || h != wantH {
			t.Fatalf("encodeKeyed:\n%s\nencode:\n%s", line, want)
		}
		checkRecord(t, r)
	}
}

func BenchmarkAppend(b *testing.B) {
	keyed, _ := NewKeyedMemorySink(testKey)
	for _, bc := range []struct {
		name string
		sink func(b *testing.B) Sink
	}{
		{"memory", func(*testing.B) Sink { return NewMemorySink() }},
		{"memory-keyed", func(*testing.B) Sink { return keyed }},
		{"file", func(b *testing.B) Sink {
			s, _ := OpenFile(filepath.Join(b.TempDir(), "a.jsonl"), FileOptions{})
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"file-keyed-checkpoint", func(b *testing.B) Sink {
			d := b.TempDir()
			s, _ := OpenFile(filepath.Join(d, "a.jsonl"), FileOptions{Key: testKey, Checkpoint: filepath.Join(d, "a.checkpoint")})
			b.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := bc.sink(b)
			r := rec(0)
			b.ReportAllocs()
			for b.Loop() {
				c := *r
				if err := s.Append(context.Background(), &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
