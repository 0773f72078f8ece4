package audit

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// ErrConflict is wrapped by the error of a Store.Append that lost a race
// for the chain's next sequence number to another writer (an optimistic
// store: an insert refused by a unique key on the sequence number). The
// store stored nothing; the Log calls Append again.
var ErrConflict = errors.New("audit: sequence number taken")

// MaxAppendAttempts bounds how many times Log.Append calls Store.Append for
// one record when the store reports ErrConflict (16): each conflict means
// another writer's record went in, so the chain moves on, but a writer
// outrun that many times in a row reports the conflict rather than spin.
const MaxAppendAttempts = 16

// Entry is one record as a Store keeps it: its sequence number, the hash
// of the record before it, its own hash, its run and its stored line (the
// bytes that are hashed, MACed and verified). Prev, Hash and Run are in Line
// too; they are given apart for a store that keeps them in columns (a
// database indexes records by run, so that one run's are found without
// reading the chain). Run is "" for a record of no run.
type Entry struct {
	Seq        uint64
	Prev, Hash string
	Run        string
	Line       []byte
}

// LinkFunc links a record at the chain's next sequence number next, after
// the record whose stored line is last (nil for an empty chain), and
// returns its Entry (whose Seq is next).
type LinkFunc func(next uint64, last []byte) (Entry, error)

// Store keeps the stored lines of one audit chain, in Seq order, and
// assigns their sequence numbers: it is the single place where the writers
// of one chain meet, so it is where a fork is refused. It knows nothing of
// hashes or keys; a Log links the records and a verifier (VerifyStore)
// checks them. One Store is one chain: a store keeping a chain per tenant
// hands out one Store per tenant (see
// RATIONALE.md#the-audit-log-over-a-store).
//
// Implementations must be safe for concurrent use, and a database store for
// use by several processes at once.
type Store interface {
	// Head returns the Seq the next record will get (the number of
	// records stored) and the stored line of the last one (nil when the
	// chain is empty).
	Head(ctx context.Context) (next uint64, last []byte, err error)
	// Append appends one record at the chain's next sequence number.
	// Holding the chain against other writers (a mutex; a row lock or a
	// serializable transaction in a database), it reads the next sequence
	// number and the last line, calls link with them, and stores the
	// Entry link returns as record next, atomically with the read: of two
	// Appends at once, the second's link sees the first's record. If link
	// fails, or the store does, nothing is stored and Append returns the
	// error. A store that does not hold the chain while link runs (an
	// optimistic insert, refused by a unique key on the sequence number)
	// returns an error wrapping ErrConflict when another writer took next
	// first; never two records with one sequence number, never a gap. The
	// store may keep Entry.Line: the Log does not modify it afterwards.
	Append(ctx context.Context, link LinkFunc) error
	// Read calls f with the stored line of each record from seq from to
	// the end as it was when Read began, in Seq order, and stops at the
	// first error f returns, returning it. f must not keep line.
	Read(ctx context.Context, from uint64, f func(line []byte) error) error
}

// MissingError is what a Store's Read returns (or wraps) when records are
// missing from the chain it keeps, from Seq on: deleted, or the chain cut
// while the store's head says it holds more. When the first record asked
// is missing, Seq is the first of those missing before it, back to the
// last one the store holds. VerifyStore and VerifyStoreFrom report it as a
// *VerifyError with Missing set.
type MissingError struct {
	Seq uint64
}

func (e *MissingError) Error() string { return fmt.Sprintf("audit: record %d is missing", e.Seq) }

// CheckpointStore keeps a keyed chain's newest Checkpoint apart from its
// records (another file, volume or host). It belongs to one writer: two
// Logs saving to one CheckpointStore overwrite each other's checkpoints.
type CheckpointStore interface {
	// Load returns the newest checkpoint saved, nil if none.
	Load() (*Checkpoint, error)
	// Save replaces it.
	Save(Checkpoint) error
}

// LogOptions configures a Log. The zero value links an unkeyed chain.
type LogOptions struct {
	// Key, when set (at least MinKeyBytes), gives every record a MAC
	// under it, and the Log refuses to continue from a last record
	// without a valid one.
	Key []byte
	// Checkpoints, when set (it needs Key), receives a checkpoint of the
	// head after every record; NewLog refuses a chain that does not hold
	// the newest one's records with its head (cut, or rewritten), and a
	// non-empty chain without one. A chain longer than its checkpoint
	// (the writer stopped between a record and its checkpoint, or the
	// checkpoint's write failed: a *CheckpointError) is continued if it
	// verifies against it, every record after it MACed under Key; the
	// checkpoint then catches up.
	Checkpoints CheckpointStore
}

// Log links audit records into the chain a Store keeps: it owns the
// sequence numbers, the previous hash, the MAC, the hash and the
// checkpoints, so that every store (memory, file, database) keeps only
// bytes. Several Logs, in one process or several, may append to one Store:
// the store hands each Append the chain's head, and a Log that finds a head
// another writer made checks it (its hash and, keyed, its MAC) before it
// links to it, so the chain never forks, has no gap and never continues
// from a forged record. A Log is a Sink and is safe for concurrent use.
type Log struct {
	store Store
	ckpts CheckpointStore
	mu    sync.Mutex // guards the fields below
	keys  *keys      // nil for an unkeyed chain
	hm    hash.Hash  // HMAC under keys.record, reused
	next  uint64
	head  string
	// pending is the record Append is storing; linkFn is l.linkPending,
	// made once so that an Append allocates no closure.
	pending *Record
	linkFn  LinkFunc
}

// NewLog returns a Log appending to store, continuing its chain from the
// store's last record. It refuses a chain whose last record is not a record
// with a valid hash (and, with a key, a valid MAC), and one that does not
// hold the records opts.Checkpoints' newest checkpoint counts, the last of
// them its head (an error wrapping ErrCheckpoint). Records after the
// checkpoint's are accepted when the whole chain verifies against it
// (VerifyStore): each carries a MAC only the key's holder makes.
func NewLog(ctx context.Context, store Store, opts LogOptions) (*Log, error) {
	l := &Log{store: store, ckpts: opts.Checkpoints}
	l.linkFn = l.linkPending
	if opts.Key != nil {
		k, err := deriveKeys(opts.Key)
		if err != nil {
			return nil, err
		}
		l.keys = k
	} else if opts.Checkpoints != nil {
		return nil, fmt.Errorf("audit: LogOptions.Checkpoints needs LogOptions.Key")
	}
	if err := l.sync(ctx); err != nil {
		return nil, err
	}
	if l.ckpts == nil {
		return l, nil
	}
	c, err := l.ckpts.Load()
	switch {
	case err != nil:
		return nil, err
	case c == nil && l.next > 0:
		return nil, fmt.Errorf("%w: none kept, but the chain holds %d records; it does not continue without one", ErrCheckpoint, l.next)
	case c != nil:
		if err := c.Check(opts.Key); err != nil {
			return nil, err
		}
		if err := l.checkBehind(ctx, c, opts.Key); err != nil {
			return nil, err
		}
	}
	if err := l.ckpts.Save(l.keys.checkpoint(l.next, l.head)); err != nil { // a new chain's, or the same again
		return nil, err
	}
	return l, nil
}

// checkBehind checks the chain's head against checkpoint c (whose MAC is
// checked): the chain ends where c says, or c is behind it (the writer
// stopped between a record and its checkpoint) and the whole chain verifies
// against c, every record after it MACed under key. A chain cut short of c,
// or rewritten before it, is refused. The caller owns l.
func (l *Log) checkBehind(ctx context.Context, c *Checkpoint, key []byte) error {
	if c.Records == l.next && c.Head == l.head {
		return nil
	}
	if c.Records < l.next {
		if _, err := VerifyStore(ctx, l.store, VerifyOptions{Key: key, Checkpoint: c}); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: the chain ends at record %d (%.16s), its checkpoint at %d (%.16s): records were cut, or the chain rewritten; verify and repair it first",
		ErrCheckpoint, l.next, l.head, c.Records, c.Head)
}

// sync reads the store's head and adopts it. The caller owns l.
func (l *Log) sync(ctx context.Context) error {
	next, last, err := l.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("audit: reading the chain's head: %w", err)
	}
	return l.adopt(next, last)
}

// adopt checks the chain's head, as a Store gives it, and continues from
// it. The caller holds l.mu (or owns l).
func (l *Log) adopt(next uint64, last []byte) error {
	if last == nil {
		if next != 0 {
			return fmt.Errorf("audit: the store reports %d records but no last record", next)
		}
		l.next, l.head = 0, ""
		return nil
	}
	if next == 0 {
		return fmt.Errorf("audit: the store reports no records but a last record")
	}
	seq, h, err := parseLine(last)
	if err != nil {
		return fmt.Errorf("audit: record %d: %v; the chain needs repair before it can continue", next-1, err)
	}
	if seq+1 != next {
		return fmt.Errorf("audit: the last record has seq %d but the store holds %d records; the chain needs repair before it can continue", seq, next)
	}
	if l.keys != nil {
		if err := l.keys.checkLine(int(seq), seq, last); err != nil {
			return fmt.Errorf("audit: record %d: %v; the chain does not continue from it", seq, err.(*VerifyError).Reason)
		}
	}
	l.next, l.head = next, h
	return nil
}

// known reports whether next and last are the head this Log knows (it
// wrote or checked that record): its hash, the end of the line, is l.head.
func (l *Log) known(next uint64, last []byte) bool {
	if next != l.next {
		return false
	}
	if last == nil {
		return l.head == ""
	}
	const suffix = len(`"}`)
	return len(last) >= len(l.head)+suffix && l.head != "" && string(last[len(last)-suffix-len(l.head):len(last)-suffix]) == l.head
}

// parseLine checks a stored line's shape and hash and returns its Seq and
// Hash.
func parseLine(line []byte) (seq uint64, h string, err error) {
	var head struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(line, &head); err != nil || head.Hash == "" {
		return 0, "", errors.New("not an audit record")
	}
	got, claimed, err := lineHash(line)
	if err != nil || got != claimed || claimed != head.Hash {
		return 0, "", errors.New("it does not hash to its hash")
	}
	return head.Seq, head.Hash, nil
}

// Append links r into the chain (it sets Seq, Prev, MAC and Hash) at the
// head the store gives and stores it. After ErrConflict it tries again, at
// most MaxAppendAttempts times in all. When the store stored the record but
// the checkpoint after it could not be saved, the error is a
// *CheckpointError: the record stands and a caller must count it as stored.
func (l *Log) Append(ctx context.Context, r *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = r
	defer func() { l.pending = nil }()
	for attempt := 1; ; attempt++ {
		err := l.store.Append(ctx, l.linkFn)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrConflict) || attempt == MaxAppendAttempts {
			return err
		}
	}
	l.next, l.head = r.Seq+1, r.Hash
	if l.ckpts != nil {
		// The record is stored: a failure here is reported as a
		// *CheckpointError, the record stands, and the next NewLog
		// catches the checkpoint up (the chain verifies against the
		// older one).
		if err := l.ckpts.Save(l.keys.checkpoint(l.next, l.head)); err != nil {
			return &CheckpointError{Seq: r.Seq, Err: err}
		}
	}
	return nil
}

// CheckpointError is Log.Append's error (and so FileSink's) when the store
// stored the record but the checkpoint after it could not be saved. The
// record stands: a caller must count it as stored (and report the
// failure). It wraps ErrCheckpoint and the save's error.
type CheckpointError struct {
	// Seq is the stored record's.
	Seq uint64
	// Err is the checkpoint save's error.
	Err error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("audit: record %d stored, but the checkpoint after it was not written: %v", e.Seq, e.Err)
}

// Unwrap returns ErrCheckpoint and Err.
func (e *CheckpointError) Unwrap() []error { return []error{ErrCheckpoint, e.Err} }

// linkPending is the LinkFunc of Append, for l.pending: it checks a head
// it does not know and links the record after it. The caller holds l.mu.
func (l *Log) linkPending(next uint64, last []byte) (Entry, error) {
	if l.pending == nil {
		return Entry{}, errors.New("audit: a Log's LinkFunc called outside its Append")
	}
	if !l.known(next, last) {
		if err := l.adopt(next, last); err != nil {
			return Entry{}, err
		}
	}
	r := l.pending
	line, err := l.link(r)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Seq: r.Seq, Prev: r.Prev, Hash: r.Hash, Run: r.Run, Line: line}, nil
}

// link sets r's Seq, Prev, MAC and Hash at the head this Log knows and
// returns its stored line.
func (l *Log) link(r *Record) ([]byte, error) {
	r.Seq, r.Prev, r.MAC = l.next, l.head, ""
	var (
		line []byte
		h    string
		err  error
	)
	if l.keys != nil {
		if l.hm == nil {
			l.hm = hmac.New(sha256.New, l.keys.record)
		}
		line, h, err = encodeKeyed(r, l.keys.record, l.hm)
	} else {
		line, h, err = encode(r)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: encoding record: %w", err)
	}
	r.Hash = h
	return line, nil
}

// Head returns the hash of the newest record this Log knows ("" when
// empty) and the Seq the next record will get. Another writer's records
// are known after this Log's next Append.
func (l *Log) Head() (hash string, next uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head, l.next
}

// Checkpoint returns a checkpoint of Head, MACed under the key, to keep
// apart from the records; ok is false for an unkeyed Log.
func (l *Log) Checkpoint() (c Checkpoint, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		return Checkpoint{}, false
	}
	return l.keys.checkpoint(l.next, l.head), true
}

// VerifyStore verifies the chain a Store keeps, on the bytes as stored, as
// VerifyFileWith does a file: it returns the number of records and nil, or
// a *VerifyError naming the first broken record (Index = its position).
func VerifyStore(ctx context.Context, s Store, opts VerifyOptions) (int, error) {
	v, err := newLineVerifier(opts)
	if err != nil {
		return 0, err
	}
	i := 0
	err = s.Read(ctx, 0, func(line []byte) error {
		err := v.line(i, line)
		i++
		return err
	})
	return v.end(err)
}

// StoreVerified is what VerifyStoreFrom verified.
type StoreVerified struct {
	// Records is the number of records the chain holds, all verified;
	// after a failure, the number before the first broken (or missing)
	// one.
	Records int
	// Read is how many stored lines were read.
	Read int
	// End is the checkpoint of the chain's end as verified, MACed under
	// the key: to keep (or hand to whoever will ask for the next
	// verification) and verify from next time. Zero after a failure.
	End Checkpoint
}

// VerifyStoreFrom is VerifyStore from checkpoint from (checked under
// opts.Key, which it requires) on: it reads the chain from from's last
// record, which must still be there with from's head and a valid MAC, and
// verifies the records after it as VerifyStore does, against opts'
// checkpoints too (none may count fewer records than from). A from of no
// records verifies the whole chain. Records before from's last are not
// read: a chain rewritten before it is found by a verification from an
// older checkpoint (or record 0). It returns nil or a *VerifyError naming
// the first broken record (Index = its Seq); records cut from the end
// before from's last are reported as VerifyStore reports them against
// from (Missing).
func VerifyStoreFrom(ctx context.Context, s Store, from Checkpoint, opts VerifyOptions) (StoreVerified, error) {
	var res StoreVerified
	if opts.Key == nil {
		return res, fmt.Errorf("audit: a checkpoint is verified under the key: VerifyOptions.Key is required")
	}
	if err := from.Check(opts.Key); err != nil {
		return res, err
	}
	v, err := newLineVerifier(opts)
	if err != nil {
		return res, err
	}
	for i := range v.ends.c {
		if v.ends.c[i].Records < from.Records {
			return res, fmt.Errorf("audit: a checkpoint of %d records is not checked by reading from one of %d", v.ends.c[i].Records, from.Records)
		}
	}
	// The checkpoint's last record is the first line read; the verifier
	// continues from it.
	v.prev, v.seq, v.n = from.Head, from.Records, int(from.Records)
	v.ends.after(v.seq, v.prev)
	start := from.Records
	if start > 0 {
		start--
	}
	err = s.Read(ctx, start, func(line []byte) error {
		res.Read++
		if from.Records > 0 && res.Read == 1 {
			return v.at(int(start), start, from.Head, line)
		}
		return v.line(v.n, line)
	})
	if err == nil && from.Records > 0 && res.Read == 0 {
		// The chain ends before the checkpoint's last record: where?
		next, _, herr := s.Head(ctx)
		if herr != nil {
			return res, herr
		}
		res.Records = int(next)
		return res, cutError(int(next), next, from.Records)
	}
	if res.Records, err = v.end(err); err != nil {
		var ve *VerifyError
		if errors.As(err, &ve) {
			res.Records = ve.Index // the records before it (Index = Seq)
		}
		return res, err
	}
	res.End = v.k.checkpoint(v.seq, v.prev)
	return res, nil
}

// at checks that line is record seq (Index i) with hash head, a valid MAC
// and the tenant required, if any: the last record of a checkpoint.
func (v *lineVerifier) at(i int, seq uint64, head string, line []byte) error {
	gotSeq, h, err := parseLine(line)
	switch {
	case err != nil:
		return &VerifyError{Index: i, Seq: seq, Reason: err.Error()}
	case gotSeq != seq:
		return &VerifyError{Index: i, Seq: gotSeq, Reason: fmt.Sprintf("seq is %d, want %d (a record was deleted or inserted)", gotSeq, seq)}
	case h != head:
		return &VerifyError{Index: i, Seq: seq, Reason: fmt.Sprintf("record %d's hash is not the head of the checkpoint, which counts %d records (the log was rewritten)", seq, seq+1)}
	}
	if err := v.k.checkLine(i, seq, line); err != nil {
		return err
	}
	if v.tenant == "" {
		return nil
	}
	var r struct {
		Tenant string `json:"tenant"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return &VerifyError{Index: i, Seq: seq, Reason: "not an audit record: " + err.Error()}
	}
	return checkTenant(v.tenant, i, seq, r.Tenant)
}

// lineVerifier checks stored lines one by one (VerifyFileWith,
// VerifyStore).
type lineVerifier struct {
	k    *keys
	prev string
	seq  uint64
	n    int
	ends ends
	// tenant is VerifyOptions.Tenant.
	tenant string
}

func newLineVerifier(opts VerifyOptions) (*lineVerifier, error) {
	k, err := opts.keys()
	if err != nil {
		return nil, err
	}
	return &lineVerifier{k: k, ends: opts.ends(), tenant: opts.Tenant}, nil
}

// line checks line i.
func (v *lineVerifier) line(i int, line []byte) error {
	var head struct {
		Seq    uint64 `json:"seq"`
		Tenant string `json:"tenant"`
		Prev   string `json:"prev"`
		Hash   string `json:"hash"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return &VerifyError{Index: i, Reason: "not an audit record: " + err.Error()}
	}
	got, claimed, err := lineHash(line)
	if err != nil {
		return &VerifyError{Index: i, Seq: head.Seq, Reason: err.Error()}
	}
	if err := check(i, v.prev, v.seq, head.Seq, head.Prev, claimed, func() (string, error) { return got, nil }); err != nil {
		return err
	}
	if v.k != nil {
		if err := v.k.checkLine(i, head.Seq, line); err != nil {
			return err
		}
	}
	if err := checkTenant(v.tenant, i, head.Seq, head.Tenant); err != nil {
		return err
	}
	v.prev, v.seq = head.Hash, head.Seq+1
	v.ends.after(v.seq, v.prev)
	v.n++
	return nil
}

// end returns the count and err, or the checkpoints' verdict on the end.
// A store's *MissingError is reported as a *VerifyError.
func (v *lineVerifier) end(err error) (int, error) {
	var me *MissingError
	if errors.As(err, &me) {
		return int(me.Seq), &VerifyError{Index: int(me.Seq), Seq: me.Seq, Missing: true, Reason: fmt.Sprintf("record %d is missing from the store (deleted, or the chain cut while its head says more): %v", me.Seq, err)}
	}
	if err != nil {
		return v.n, err
	}
	return v.n, v.ends.check(v.n, v.seq, v.prev)
}

// MemoryStore is a Store in memory: for tests, and for a chain whose records
// are shipped elsewhere. It is safe for concurrent use.
type MemoryStore struct {
	mu    sync.Mutex // guards lines, head; held over Append's link
	lines [][]byte
	head  string
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Head returns the number of records and the last one's line.
func (s *MemoryStore) Head(context.Context) (uint64, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lines) == 0 {
		return 0, nil, nil
	}
	return uint64(len(s.lines)), s.lines[len(s.lines)-1], nil
}

// Append links a record at the next seq, holding the store.
func (s *MemoryStore) Append(_ context.Context, link LinkFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last []byte
	if n := len(s.lines); n > 0 {
		last = s.lines[n-1]
	}
	e, err := link(uint64(len(s.lines)), last)
	if err != nil {
		return err
	}
	if err := e.check(uint64(len(s.lines)), s.head); err != nil {
		return err
	}
	s.lines = append(s.lines, e.Line)
	s.head = e.Hash
	return nil
}

// check refuses an Entry that does not follow a chain whose next seq and
// head hash are next and head: a LinkFunc's bug, never stored.
func (e *Entry) check(next uint64, head string) error {
	if e.Seq != next || e.Prev != head || e.Hash == "" || len(e.Line) == 0 {
		return fmt.Errorf("audit: the record linked as %d after %.16q does not follow the chain's head (%d, %.16q)", e.Seq, e.Prev, next, head)
	}
	return nil
}

// Read calls f with the lines from seq from.
func (s *MemoryStore) Read(ctx context.Context, from uint64, f func([]byte) error) error {
	s.mu.Lock()
	lines := s.lines // lines are appended, never changed
	s.mu.Unlock()
	for i := from; i < uint64(len(lines)); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f(lines[i]); err != nil {
			return err
		}
	}
	return nil
}
