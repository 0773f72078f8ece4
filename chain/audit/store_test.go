package audit

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// conflicting is an optimistic Store: it links outside its lock, as a
// database inserting under a unique key on the sequence number would, and
// makes the first conflicts Appends lose a race (another writer's record
// goes in first).
type conflicting struct {
	*MemoryStore
	other     *Log // the other writer
	conflicts int
}

func (s *conflicting) Append(ctx context.Context, link LinkFunc) error {
	next, last, err := s.MemoryStore.Head(ctx)
	if err != nil {
		return err
	}
	e, err := link(next, last)
	if err != nil {
		return err
	}
	if s.conflicts > 0 {
		s.conflicts--
		if err := s.other.Append(ctx, rec(900+s.conflicts)); err != nil {
			return err
		}
	}
	return s.MemoryStore.Append(ctx, func(n uint64, _ []byte) (Entry, error) {
		if n != e.Seq {
			return Entry{}, ErrConflict
		}
		return e, nil
	})
}

// TestLogRetriesAConflict: a Log over an optimistic store that loses the
// race for a sequence number links the record again at the new head, up to
// MaxAppendAttempts times, and the chain neither forks nor has a gap.
func TestLogRetriesAConflict(t *testing.T) {
	for _, tt := range []struct {
		conflicts int
		ok        bool
	}{{0, true}, {1, true}, {MaxAppendAttempts - 1, true}, {MaxAppendAttempts, false}} {
		ms := NewMemoryStore()
		other, err := NewLog(t.Context(), ms, LogOptions{Key: testKey})
		if err != nil {
			t.Fatal(err)
		}
		s := &conflicting{MemoryStore: ms, other: other}
		l, err := NewLog(t.Context(), s, LogOptions{Key: testKey})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(t.Context(), rec(0)); err != nil {
			t.Fatal(err)
		}
		s.conflicts = tt.conflicts
		err = l.Append(t.Context(), rec(1))
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrConflict)) {
			t.Errorf("%d conflicts: Append = %v", tt.conflicts, err)
		}
		want := 1 + tt.conflicts
		if tt.ok {
			want++
		}
		if n, err := VerifyStore(t.Context(), ms, VerifyOptions{Key: testKey}); err != nil || n != want {
			t.Errorf("%d conflicts: VerifyStore = %d, %v; want %d", tt.conflicts, n, err, want)
		}
	}
}

// TestLogRefusesAForgedHead: a Log that finds a head it did not write
// checks it before linking to it: a record appended without the key is not
// continued from.
func TestLogRefusesAForgedHead(t *testing.T) {
	ms := NewMemoryStore()
	keyed, err := NewLog(t.Context(), ms, LogOptions{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := keyed.Append(t.Context(), rec(0)); err != nil {
		t.Fatal(err)
	}
	forger, err := NewLog(t.Context(), ms, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := forger.Append(t.Context(), rec(1)); err != nil {
		t.Fatal(err)
	}
	if err := keyed.Append(t.Context(), rec(2)); err == nil || !strings.Contains(err.Error(), "mac") {
		t.Fatalf("Append after a forged record = %v, want a refusal naming the mac", err)
	}
	if _, err := NewLog(t.Context(), ms, LogOptions{Key: testKey}); err == nil {
		t.Fatal("NewLog continued from a forged record")
	}
	if next, _, _ := ms.Head(t.Context()); next != 2 {
		t.Fatalf("%d records, want 2", next)
	}
}

// TestTenantLogs: each tenant's records form a chain of their own in their
// own store, numbered from 0, that verifies alone.
func TestTenantLogs(t *testing.T) {
	stores := map[string]*MemoryStore{}
	tl, err := NewTenantLogs(func(_ context.Context, tenant string) (Store, error) {
		if tenant == "" {
			return nil, errors.New("no tenant")
		}
		s := NewMemoryStore()
		stores[tenant] = s
		return s, nil
	}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	for i, tenant := range []string{"acme", "globex", "acme", "acme", "globex"} {
		r := rec(i)
		r.Tenant = tenant
		if err := tl.Append(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	for tenant, want := range map[string]int{"acme": 3, "globex": 2} {
		if n, err := VerifyStore(t.Context(), stores[tenant], VerifyOptions{Key: testKey}); err != nil || n != want {
			t.Errorf("%s: VerifyStore = %d, %v; want %d", tenant, n, err, want)
		}
	}
	r := rec(9)
	r.Tenant = ""
	if err := tl.Append(t.Context(), r); err == nil {
		t.Error("a record whose store cannot be opened was stored")
	}
	if _, err := NewTenantLogs(nil, []byte("short")); err == nil {
		t.Error("a short key was accepted")
	}
}

// TestFileStoreRefusesASecondWriter: while one FileSink has a file open, a
// second over it (here, in this process; another process alike) is refused
// instead of appending a fork; once the first is closed, it opens.
func TestFileStoreRefusesASecondWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openFile(t, path, FileOptions{})
	fill(t, a, 2)
	if b, err := OpenFile(path, FileOptions{}); !errors.Is(err, ErrFileInUse) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("second OpenFile = %v, want ErrFileInUse", err)
	}
	fill(t, a, 1)
	a.Close()
	b := openFile(t, path, FileOptions{})
	defer b.Close()
	fill(t, b, 1)
	if n, err := VerifyFile(path); err != nil || n != 4 {
		t.Fatalf("VerifyFile = %d, %v", n, err)
	}
}

// memCheckpoints is a CheckpointStore in memory whose Save fails while fail
// is set.
type memCheckpoints struct {
	c    *Checkpoint
	fail bool
}

func (m *memCheckpoints) Load() (*Checkpoint, error) { return m.c, nil }

func (m *memCheckpoints) Save(c Checkpoint) error {
	if m.fail {
		return errors.New("checkpoint volume full")
	}
	m.c = &c
	return nil
}

// TestLogCheckpointBehindItsStore: review1's fixes for FileSink hold for a
// Log over any Store. A record the store stored whose checkpoint's save
// failed is a *CheckpointError (the record stands); NewLog then continues
// the chain from the older checkpoint, which catches up, since every record
// after it carries a MAC; a chain cut short of its checkpoint, or rewritten
// before it, is still refused.
func TestLogCheckpointBehindItsStore(t *testing.T) {
	ctx := context.Background()
	st, cps := NewMemoryStore(), &memCheckpoints{}
	l, err := NewLog(ctx, st, LogOptions{Key: testKey, Checkpoints: cps})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 3)
	old := *cps.c
	cps.fail = true
	err = l.Append(ctx, rec(3))
	var ce *CheckpointError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCheckpoint) || ce.Seq != 3 {
		t.Fatalf("Append with a failing checkpoint = %v, want a *CheckpointError for seq 3", err)
	}
	if n, err := VerifyStore(ctx, st, VerifyOptions{Key: testKey, Checkpoint: &old}); err != nil || n != 4 {
		t.Fatalf("the record was not stored: %d, %v", n, err)
	}
	cps.fail = false
	if _, err := NewLog(ctx, st, LogOptions{Key: testKey, Checkpoints: cps}); err != nil {
		t.Fatalf("NewLog with a checkpoint behind the chain: %v", err)
	}
	if cps.c.Records != 4 {
		t.Fatalf("the checkpoint did not catch up: %+v", cps.c)
	}

	// Rewritten before the checkpoint: a head the chain does not hold.
	forged, err := NewCheckpoint(testKey, 3, "00"+old.Head[2:])
	if err != nil {
		t.Fatal(err)
	}
	cps.c = &forged
	if _, err := NewLog(ctx, st, LogOptions{Key: testKey, Checkpoints: cps}); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("NewLog with a checkpoint whose head is not the chain's record = %v, want ErrCheckpoint", err)
	}
	// Cut short of the checkpoint.
	ahead, err := NewCheckpoint(testKey, 7, old.Head)
	if err != nil {
		t.Fatal(err)
	}
	cps.c = &ahead
	if _, err := NewLog(ctx, st, LogOptions{Key: testKey, Checkpoints: cps}); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("NewLog with a checkpoint ahead of the chain = %v, want ErrCheckpoint", err)
	}
}

// TestVerifyStoreFrom: a verification from a checkpoint reads only the
// checkpoint's last record and the records after it, and finds records cut
// from the end (the first missing seq), the checkpoint's record rewritten,
// and a record after it forged; a chain rewritten before the checkpoint is
// found by a full verification against it, not by one from it; a second
// checkpoint (a copy kept elsewhere) is checked too.
func TestVerifyStoreFrom(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	// build returns a store of 10 records and the checkpoint at 6.
	build := func(t *testing.T) (*MemoryStore, Checkpoint) {
		s := NewMemoryStore()
		l, err := NewLog(ctx, s, LogOptions{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		var c Checkpoint
		for i := range 10 {
			if err := l.Append(ctx, &Record{Tenant: "acme", Decision: "continue", Reason: strings.Repeat("x", i)}); err != nil {
				t.Fatal(err)
			}
			if i == 5 {
				c, _ = l.Checkpoint()
			}
		}
		return s, c
	}
	forge := func(s *MemoryStore, seq int) {
		s.lines[seq] = []byte(strings.Replace(string(s.lines[seq]), `"continue"`, `"block"`, 1))
	}
	// regrow cuts the chain to cut records and appends others (MACed:
	// what the key's holder appends after a cut it did not see) up to n.
	regrow := func(s *MemoryStore, cut, n int) {
		s.lines = s.lines[:cut]
		_, h, err := parseLine(s.lines[cut-1])
		if err != nil {
			panic(err)
		}
		s.head = h
		l, err := NewLog(ctx, s, LogOptions{Key: key})
		if err != nil {
			panic(err)
		}
		for range n - cut {
			if err := l.Append(ctx, &Record{Tenant: "acme", Decision: "block"}); err != nil {
				panic(err)
			}
		}
	}
	tests := []struct {
		name    string
		tamper  func(*MemoryStore)
		full    bool
		n, read int
		seq     uint64 // the broken record's, when wantErr
		wantErr bool
		missing bool
	}{
		{name: "intact", n: 10, read: 5},
		{name: "intact full", full: true, n: 10, read: 10},
		{name: "cut after the checkpoint", tamper: func(s *MemoryStore) { s.lines = s.lines[:8] }, n: 8, read: 3},
		{name: "cut before the checkpoint", tamper: func(s *MemoryStore) { s.lines = s.lines[:4] }, wantErr: true, missing: true, seq: 4},
		{name: "cut at the checkpoint", tamper: func(s *MemoryStore) { s.lines = s.lines[:5] }, wantErr: true, missing: true, seq: 5},
		{name: "cut before the checkpoint, full", full: true, tamper: func(s *MemoryStore) { s.lines = s.lines[:3] }, wantErr: true, missing: true, seq: 3},
		{name: "the checkpoint's record rewritten", tamper: func(s *MemoryStore) { forge(s, 5) }, wantErr: true, seq: 5},
		{name: "cut and regrown to the checkpoint's count", tamper: func(s *MemoryStore) { regrow(s, 3, 6) }, wantErr: true, seq: 5},
		{name: "cut and regrown past it", tamper: func(s *MemoryStore) { regrow(s, 3, 9) }, wantErr: true, seq: 5},
		{name: "a record after it rewritten", tamper: func(s *MemoryStore) { forge(s, 7) }, wantErr: true, seq: 7},
		{name: "a record before it rewritten: not read", tamper: func(s *MemoryStore) { forge(s, 2) }, n: 10, read: 5},
		{name: "a record before it rewritten, full", full: true, tamper: func(s *MemoryStore) { forge(s, 2) }, wantErr: true, seq: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := build(t)
			if tt.tamper != nil {
				tt.tamper(s)
			}
			from, opts := c, VerifyOptions{Key: key}
			if tt.full {
				from, _ = NewCheckpoint(key, 0, "")
				opts.Checkpoint = &c
			}
			res, err := VerifyStoreFrom(ctx, s, from, opts)
			n, read := res.Records, res.Read
			var ve *VerifyError
			if tt.wantErr {
				if !errors.As(err, &ve) || ve.Seq != tt.seq || ve.Missing != tt.missing || ve.Index != int(tt.seq) || n != int(tt.seq) {
					t.Fatalf("got %d %v (%+v), want the error at seq %d, missing %v", n, err, ve, tt.seq, tt.missing)
				}
				return
			}
			if err != nil || n != tt.n || read != tt.read {
				t.Fatalf("got %d records, %d read, %v; want %d, %d", n, read, err, tt.n, tt.read)
			}
			// The end's checkpoint is the chain's: verifying from it reads
			// only its last record.
			if res.End.Records != uint64(n) {
				t.Fatalf("end %+v", res.End)
			}
			if again, err := VerifyStoreFrom(ctx, s, res.End, VerifyOptions{Key: key}); err != nil || again.Records != n || again.Read != 1 {
				t.Fatalf("from the end: %+v %v", again, err)
			}
		})
	}
	t.Run("a second checkpoint", func(t *testing.T) {
		s, c := build(t)
		l, err := NewLog(ctx, s, LogOptions{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		at10, _ := l.Checkpoint()
		if res, err := VerifyStoreFrom(ctx, s, c, VerifyOptions{Key: key, Checkpoints: []Checkpoint{at10}}); err != nil || res.Records != 10 || res.End != at10 {
			t.Fatalf("%+v %v", res, err)
		}
		s.lines = s.lines[:9]
		var ve *VerifyError
		if _, err := VerifyStoreFrom(ctx, s, c, VerifyOptions{Key: key, Checkpoints: []Checkpoint{at10}}); !errors.As(err, &ve) || !ve.Missing || ve.Seq != 9 {
			t.Fatalf("cut under the second: %v", err)
		}
		if _, err := VerifyStoreFrom(ctx, s, at10, VerifyOptions{Key: key, Checkpoints: []Checkpoint{c}}); err == nil {
			t.Fatal("a checkpoint older than from: accepted")
		}
		bad := c
		bad.Records++
		if _, err := VerifyStoreFrom(ctx, s, bad, VerifyOptions{Key: key}); !errors.Is(err, ErrCheckpoint) {
			t.Fatalf("a forged checkpoint: %v", err)
		}
	})
	// Another tenant's chain and checkpoint, MACed under the same key (a
	// TenantLogs keys every tenant's chain with one), put in the place of
	// acme's: only VerifyOptions.Tenant finds it, at the first record read
	// (the checkpoint's last, or record 0), without naming that tenant.
	t.Run("another tenant's chain", func(t *testing.T) {
		s, _ := build(t)
		other := NewMemoryStore()
		l, err := NewLog(ctx, other, LogOptions{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		for range 6 {
			if err := l.Append(ctx, &Record{Tenant: "globex", Decision: "continue"}); err != nil {
				t.Fatal(err)
			}
		}
		theirs, _ := l.Checkpoint()
		s.lines = other.lines
		zero, _ := NewCheckpoint(key, 0, "")
		for _, from := range []Checkpoint{theirs, zero} {
			if _, err := VerifyStoreFrom(ctx, s, from, VerifyOptions{Key: key}); err != nil {
				t.Fatalf("from %d, no tenant required: %v", from.Records, err)
			}
			var ve *VerifyError
			_, err := VerifyStoreFrom(ctx, s, from, VerifyOptions{Key: key, Tenant: "acme"})
			if want := max(from.Records, 1) - 1; !errors.As(err, &ve) || ve.Seq != want || ve.Missing || strings.Contains(ve.Reason, "globex") {
				t.Fatalf("from %d: %v, want a broken record %d not naming the tenant", from.Records, err, want)
			}
		}
		var ve *VerifyError
		if err := VerifyWith(nil, VerifyOptions{Tenant: "acme"}); err != nil {
			t.Fatal(err)
		}
		recs := []Record{{Tenant: "globex"}}
		recs[0].Hash, _ = Hash(&recs[0])
		if err := VerifyWith(recs, VerifyOptions{Tenant: "acme"}); !errors.As(err, &ve) || ve.Seq != 0 {
			t.Fatalf("VerifyWith: %v", err)
		}
	})
}
