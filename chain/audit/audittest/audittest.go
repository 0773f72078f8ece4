// Package audittest is a conformance kit for audit.Store implementations,
// in the spirit of testing/slogtest: call Run from a test with a function
// that returns a new, empty store (one chain), and it checks the rules every
// store must keep for an audit.Log over it to hold one unbroken chain.
//
//	func TestStoreConformance(t *testing.T) {
//		audittest.Run(t, func(t *testing.T) audit.Store { return mystore.New(t.TempDir()) })
//	}
package audittest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// Key is the key Run's keyed subtests use.
var Key = []byte("audittest key: 32 bytes or more.")

// Concurrency is the shape of the concurrent subtest: Logs Logs over one
// store, each appended to by Goroutines goroutines, Records records each.
const (
	Logs       = 2
	Goroutines = 4
	Records    = 25
)

// Run checks the stores newStore returns against the conformance rules,
// each as a subtest:
//
//   - empty: a new store's head is (0, nil), Read calls nothing, and it
//     verifies as an empty chain;
//   - append and read: a Log's records come back from Read in Seq order,
//     byte for byte, from any seq; Head is the last of them; the chain
//     verifies, with and without the key;
//   - link: Append hands its LinkFunc the next seq and the last line, and
//     stores nothing when the LinkFunc fails or links a record that does
//     not follow the head (a seq taken or past the next, a wrong prev);
//   - read stops: Read returns the error its callback returns;
//   - continue: a second Log over the store (over Options.Another's, with
//     RunWith) continues the chain from its last record, and the first
//     then continues after the second's;
//   - concurrent logs: Logs Logs over one store (each over its own, with
//     Options.Another), appended to at once, make one chain with no fork
//     and no gap, holding every record once.
//
// newStore is called once per subtest; it may skip (t.Skip) when its
// backing service is absent.
func Run(t *testing.T, newStore func(t *testing.T) audit.Store) {
	RunWith(t, Options{New: newStore})
}

// Options configures RunWith.
type Options struct {
	// New returns a new, empty store (one chain). Required.
	New func(t *testing.T) audit.Store
	// Another, if set, returns a second Store value over the same chain
	// as s (another connection or handle, as another process would
	// have): the continue and concurrent subtests then give each Log
	// its own. Nil gives every Log s itself.
	Another func(t *testing.T, s audit.Store) audit.Store
}

// RunWith is Run with opts.
func RunWith(t *testing.T, opts Options) {
	another := func(t *testing.T, s audit.Store) audit.Store { return s }
	if opts.Another != nil {
		another = opts.Another
	}
	t.Run("empty", func(t *testing.T) { testEmpty(t, opts.New(t)) })
	t.Run("append and read", func(t *testing.T) { testAppendRead(t, opts.New(t)) })
	t.Run("link", func(t *testing.T) { testLink(t, opts.New(t)) })
	t.Run("read stops", func(t *testing.T) { testReadStops(t, opts.New(t)) })
	t.Run("continue", func(t *testing.T) {
		s := opts.New(t)
		testContinue(t, s, another(t, s))
	})
	t.Run("concurrent logs", func(t *testing.T) {
		s := opts.New(t)
		stores := []audit.Store{s}
		for len(stores) < Logs {
			stores = append(stores, another(t, s))
		}
		testConcurrent(t, s, stores)
	})
}

// Rechain is what someone who can write the log but does not hold the key
// can do after changing records: renumber them and recompute every prev and
// hash. MACs stay as they were (or absent): they cannot make them.
func Rechain(recs []audit.Record) []audit.Record {
	prev := ""
	for i := range recs {
		recs[i].Seq, recs[i].Prev = uint64(i), prev
		recs[i].Hash, _ = audit.Hash(&recs[i])
		prev = recs[i].Hash
	}
	return recs
}

// Record returns a plausible record, i distinguishing it.
func Record(i int) *audit.Record {
	in := audit.Digest(map[string]any{"outgoing": "x"})
	return &audit.Record{
		Time: time.Date(2025, 1, 2, 3, 4, 5, i, time.UTC), Run: fmt.Sprintf("run-%d", i), Tenant: "acme",
		Point: "message.outbound", Binding: "b", Phase: "guard", Module: "abc", Decision: "continue", By: "hook",
		Input: in, Output: in, LatencyUS: int64(i),
	}
}

func newLog(t *testing.T, s audit.Store, key []byte) *audit.Log {
	t.Helper()
	l, err := audit.NewLog(context.Background(), s, audit.LogOptions{Key: key})
	if err != nil {
		t.Fatalf("NewLog: %v", err)
	}
	return l
}

func appendN(t *testing.T, l *audit.Log, from, n int) []audit.Record {
	t.Helper()
	out := make([]audit.Record, 0, n)
	for i := from; i < from+n; i++ {
		r := Record(i)
		if err := l.Append(context.Background(), r); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, *r)
	}
	return out
}

// lines reads the store's lines from seq from.
func lines(t *testing.T, s audit.Store, from uint64) [][]byte {
	t.Helper()
	var out [][]byte
	if err := s.Read(context.Background(), from, func(line []byte) error {
		out = append(out, bytes.Clone(line))
		return nil
	}); err != nil {
		t.Fatalf("Read(%d): %v", from, err)
	}
	return out
}

func verify(t *testing.T, s audit.Store, want int, opts audit.VerifyOptions) {
	t.Helper()
	if n, err := audit.VerifyStore(context.Background(), s, opts); err != nil || n != want {
		t.Fatalf("VerifyStore = %d, %v; want %d, nil", n, err, want)
	}
}

func seqHash(t *testing.T, line []byte) (uint64, string) {
	t.Helper()
	var h struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(line, &h); err != nil {
		t.Fatalf("a stored line is not a record: %v: %q", err, line)
	}
	return h.Seq, h.Hash
}

func testEmpty(t *testing.T, s audit.Store) {
	next, last, err := s.Head(context.Background())
	if err != nil || next != 0 || last != nil {
		t.Fatalf("Head = %d, %q, %v; want 0, nil, nil", next, last, err)
	}
	if got := lines(t, s, 0); len(got) != 0 {
		t.Fatalf("Read of an empty store: %d lines", len(got))
	}
	verify(t, s, 0, audit.VerifyOptions{})
}

func testAppendRead(t *testing.T, s audit.Store) {
	l := newLog(t, s, Key)
	recs := appendN(t, l, 0, 10)
	got := lines(t, s, 0)
	if len(got) != len(recs) {
		t.Fatalf("Read: %d lines, want %d", len(got), len(recs))
	}
	for i, line := range got {
		if seq, h := seqHash(t, line); seq != uint64(i) || h != recs[i].Hash {
			t.Fatalf("line %d: seq %d hash %.16s, want %d %.16s", i, seq, h, i, recs[i].Hash)
		}
	}
	if tail := lines(t, s, 4); len(tail) != 6 || !bytes.Equal(tail[0], got[4]) || !bytes.Equal(tail[5], got[9]) {
		t.Fatalf("Read(4): %d lines, not the last 6 stored", len(tail))
	}
	if past := lines(t, s, 10); len(past) != 0 {
		t.Fatalf("Read(10): %d lines, want none", len(past))
	}
	next, last, err := s.Head(context.Background())
	if err != nil || next != 10 || !bytes.Equal(last, got[9]) {
		t.Fatalf("Head = %d, %.40q, %v; want 10 and the last line", next, last, err)
	}
	if head, n := l.Head(); head != recs[9].Hash || n != 10 {
		t.Fatalf("Log.Head = %.16s, %d", head, n)
	}
	verify(t, s, 10, audit.VerifyOptions{})
	verify(t, s, 10, audit.VerifyOptions{Key: Key})
	cp, _ := l.Checkpoint()
	verify(t, s, 10, audit.VerifyOptions{Key: Key, Checkpoint: &cp})
}

func testLink(t *testing.T, s audit.Store) {
	l := newLog(t, s, nil)
	appendN(t, l, 0, 3)
	before := lines(t, s, 0)
	_, head := seqHash(t, before[2])
	refused := errors.New("link refuses")
	var sawNext uint64
	var sawLast []byte
	err := s.Append(context.Background(), func(next uint64, last []byte) (audit.Entry, error) {
		sawNext, sawLast = next, bytes.Clone(last)
		return audit.Entry{}, refused
	})
	if !errors.Is(err, refused) {
		t.Errorf("Append with a failing link = %v, want its error", err)
	}
	if sawNext != 3 || !bytes.Equal(sawLast, before[2]) {
		t.Errorf("link saw next %d and last %.40q; want 3 and the last line stored", sawNext, sawLast)
	}
	line := func(seq uint64, prev string) []byte {
		return []byte(fmt.Sprintf(`{"seq":%d,"prev":%q,"hash":"%064d"}`, seq, prev, seq))
	}
	for _, c := range []struct {
		name string
		seq  uint64
		prev string
	}{
		{"seq taken", 1, head},
		{"seq past the next", 4, head},
		{"prev not the head", 3, "0123"},
	} {
		err := s.Append(context.Background(), func(uint64, []byte) (audit.Entry, error) {
			return audit.Entry{Seq: c.seq, Prev: c.prev, Hash: fmt.Sprintf("%064d", c.seq), Line: line(c.seq, c.prev)}, nil
		})
		if err == nil {
			t.Errorf("%s: Append stored a record that does not follow the head", c.name)
		}
	}
	after := lines(t, s, 0)
	if len(after) != len(before) {
		t.Fatalf("%d lines after refused appends, want %d", len(after), len(before))
	}
	for i := range before {
		if !bytes.Equal(before[i], after[i]) {
			t.Fatalf("line %d changed by a refused append", i)
		}
	}
	verify(t, s, 3, audit.VerifyOptions{})
	appendN(t, l, 3, 1) // the Log goes on
	verify(t, s, 4, audit.VerifyOptions{})
}

func testReadStops(t *testing.T, s audit.Store) {
	appendN(t, newLog(t, s, nil), 0, 5)
	stop := errors.New("enough")
	calls := 0
	err := s.Read(context.Background(), 0, func([]byte) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Fatalf("Read = %v after %d calls; want the callback's error after 2", err, calls)
	}
}

func testContinue(t *testing.T, s, other audit.Store) {
	a := newLog(t, s, Key)
	first := appendN(t, a, 0, 3)
	b := newLog(t, other, Key) // a restart, or another process
	if head, n := b.Head(); head != first[2].Hash || n != 3 {
		t.Fatalf("a new Log starts at %.16s, %d; want the store's head", head, n)
	}
	appendN(t, b, 3, 2)
	appendN(t, a, 5, 2) // a's head is stale: it checks the store's, goes on
	verify(t, s, 7, audit.VerifyOptions{Key: Key})
}

func testConcurrent(t *testing.T, s audit.Store, stores []audit.Store) {
	logs := make([]*audit.Log, Logs)
	for i := range logs {
		logs[i] = newLog(t, stores[i], Key)
	}
	var wg sync.WaitGroup
	errs := make(chan error, Logs*Goroutines*Records)
	for li, l := range logs {
		for g := 0; g < Goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < Records; i++ {
					n := (li*Goroutines+g)*Records + i
					if err := l.Append(context.Background(), Record(n)); err != nil {
						errs <- fmt.Errorf("log %d, record %d: %w", li, n, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := Logs * Goroutines * Records
	verify(t, s, total, audit.VerifyOptions{Key: Key})
	seen := map[string]bool{}
	for _, line := range lines(t, s, 0) {
		var r struct {
			Run string `json:"run"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if seen[r.Run] {
			t.Fatalf("record %s stored twice", r.Run)
		}
		seen[r.Run] = true
	}
	if len(seen) != total {
		t.Fatalf("%d distinct records stored, want %d", len(seen), total)
	}
}
