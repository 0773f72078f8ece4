// Package audit holds the chain's audit records, the hash chain that links
// them, and the sinks that store them: one record per verdict of a binding
// (allow included) and one per resolution of an approval.
//
// A Log links records (sequence number, previous hash, MAC, hash,
// checkpoints) into the chain a Store keeps as bytes; the Store assigns the
// sequence numbers, so several Logs, in one process or several, append to
// one chain without forking it. MemorySink and FileSink are a Log over
// MemoryStore and FileStore; a database store implements Store, and
// audittest checks it. VerifyStore, VerifyFileWith and VerifyWith verify;
// VerifyStoreFrom verifies a store from a checkpoint on, reading only the
// records after it.
//
// Every record carries the hash of the record before it (Prev) and its own
// (Hash): the sha256 of its stored JSON without the hash field. Verify and
// VerifyFile recompute both, so a record that was modified, inserted or
// deleted is found, and the first broken index is reported.
//
// A hash chain alone has no secret: whoever can write the log can rewrite a
// record and recompute every hash after it, or append a record with a
// correct hash, and the chain still verifies. A keyed sink (FileOptions.Key,
// NewKeyedMemorySink) also gives each record a MAC, the HMAC-SHA256 of its
// stored form under a key the writer of the log does not hold; VerifyWith
// and VerifyFileWith with the key refuse a record without a valid MAC.
// Deleting the newest records leaves a valid but shorter chain: a
// Checkpoint of the head (the record count and the last hash, MACed under
// the key) kept apart from the log catches that, and FileSink writes one
// after every record when FileOptions.Checkpoint is set. SECURITY.md says
// what an attacker who can write the log can and cannot do. See
// RATIONALE.md#why-a-hash-chained-audit-log.
package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// Record is one audit record. Its JSON encoding, compact and in field order,
// is its stored form.
type Record struct {
	// Seq numbers the records of one chain from 0.
	Seq uint64 `json:"seq"`
	// Time is when the verdict was reached, in UTC.
	Time time.Time `json:"time"`
	// Run identifies the chain run; an approval's resolution carries the
	// run it resumes.
	Run string `json:"run"`
	// Tenant, Point: what the run was for.
	Tenant string `json:"tenant"`
	Point  string `json:"point"`
	// Config is the digest of the chain configuration the verdict was
	// reached under.
	Config string `json:"config"`
	// Binding, Phase, Module: who decided. Module is the hex sha256 of the
	// hook's module.
	Binding string `json:"binding"`
	Phase   string `json:"phase"`
	Module  string `json:"module"`
	// Decision is the verdict applied to the traffic: continue, modify,
	// block or ask.
	Decision string `json:"decision"`
	// By says who reached it: "hook", "fail_policy" (after a failure),
	// "approval" (a human or an approval's expiry) or "short_circuit" (the
	// binding did not run: a guard before it short-circuited the run, as
	// Reason says).
	By string `json:"by"`
	// HookAction is what the hook itself returned, when it returned a
	// decision.
	HookAction string `json:"hook_action,omitempty"`
	// Wire is the wire shape the hook's decision came in (abi.Shape:
	// "top-level", "outcome", "legacy" or "guardrail"), so that a legacy
	// {"abort": true} is told apart from a canonical block; omitted for
	// the canonical shape and when the hook returned no decision.
	Wire string `json:"wire,omitempty"`
	// Resolution is an approval's resolution: approved, denied, edited or
	// expired.
	Resolution string `json:"resolution,omitempty"`
	// Approval is the id of the approval an ask created or a resolution
	// resolved.
	Approval string `json:"approval,omitempty"`
	// Actor is who resolved an approval, as the platform named them.
	Actor string `json:"actor,omitempty"`
	// Reason is the decision's reason (the hook's, the policy's or the
	// approver's).
	Reason string `json:"reason,omitempty"`
	// Failure is the failure the fail policy answered: a code of
	// abi.FailureCodes and a message.
	Failure *abi.Failure `json:"failure,omitempty"`
	// Ignored says which part of the hook's decision its phase did not
	// allow.
	Ignored string `json:"ignored,omitempty"`
	// Input and Output are Digest of the context before and after.
	Input  string `json:"input"`
	Output string `json:"output"`
	// Diff lists the fields a modify changed.
	Diff []Change `json:"diff,omitempty"`
	// LatencyUS is how long the hook took, in microseconds.
	LatencyUS int64 `json:"latency_us"`
	// HostCalls lists the host calls the hook made.
	HostCalls []HostCall `json:"host_calls,omitempty"`
	// CreditCharged is the credit those calls were charged.
	CreditCharged int64 `json:"credit_charged"`
	// Prev is the Hash of the record before, "" for the first.
	Prev string `json:"prev"`
	// MAC, in a keyed chain, is the hex HMAC-SHA256 under the chain's
	// record key of the record's stored form without MAC and Hash (so it
	// covers Prev, and with it the chain before). Empty in an unkeyed
	// chain.
	MAC string `json:"mac,omitempty"`
	// Hash is the hex sha256 of the record's JSON encoding without Hash
	// (see Hash). It is always the last field of the stored form.
	Hash string `json:"hash,omitempty"`
}

// Change is one field a modify changed. Before and After are Digest of the
// field's values ("" when absent). BeforeValue and AfterValue hold the values
// themselves only when the chain was configured to record them: a modify
// often exists to remove a secret, and the audit log must not keep it.
type Change struct {
	Field       string `json:"field"`
	Before      string `json:"before"`
	After       string `json:"after"`
	BeforeValue any    `json:"before_value,omitempty"`
	AfterValue  any    `json:"after_value,omitempty"`
}

// HostCall is one host call a hook made, as the runtime reported it
// (runtime.Result.Calls): Status is the code of the status the hook was
// answered, the runtime's own refusals (request_too_large,
// result_too_large, ...) included; Capability is "" for a call refused
// before its name was read. Calls past the invocation's host-call limit are
// not listed.
type HostCall struct {
	Capability string `json:"capability"`
	Status     string `json:"status"`
	Charged    int64  `json:"charged,omitempty"`
	LatencyUS  int64  `json:"latency_us"`
}

// Digest returns "sha256:" and the hex sha256 of v's canonical JSON
// (abi.Marshal: compact, object keys sorted). A nil map digests as {}.
func Digest(v any) string {
	if m, ok := v.(map[string]any); ok && m == nil {
		v = map[string]any{}
	}
	bp := getScratch()
	b, ok := abi.AppendJSON((*bp)[:0], v) // abi.Marshal's bytes
	if !ok {
		scratch.Put(bp)
		return digestMarshal(v)
	}
	d := digestOf(b)
	putScratch(bp, b)
	return d
}

// Hash returns the hash a record must carry: the hex sha256 of the record's
// JSON encoding without its hash field. The stored form of a record is that
// encoding with `,"hash":"<hash>"` added before the closing brace, so anyone
// can check a stored line by removing that suffix and hashing the rest; any
// change to the line, a field added included, changes the hash.
func Hash(r *Record) (string, error) {
	_, h, err := hashBody(r, false)
	return h, err
}

// encode returns r's stored line (without a newline) and its hash. r.Hash is
// ignored. The line is encoding/json's Marshal of r without the hash field
// (written by hand: see encode.go), with `,"hash":"<hash>"` before its
// closing brace.
func encode(r *Record) ([]byte, string, error) {
	return hashBody(r, true)
}

// lineHash checks the shape of a stored line and returns the hash its content
// has and the hash it claims.
func lineHash(line []byte) (got, claimed string, err error) {
	const suffix = len(`,"hash":"`) + 64 + len(`"}`)
	if len(line) < suffix+2 || !bytes.HasPrefix(line[len(line)-suffix:], []byte(`,"hash":"`)) || !bytes.HasSuffix(line, []byte(`"}`)) {
		return "", "", fmt.Errorf(`the line does not end with ,"hash":"<64 hex digits>"}`)
	}
	claimed = string(line[len(line)-suffix+len(`,"hash":"`) : len(line)-2])
	body := append(append([]byte(nil), line[:len(line)-suffix]...), '}')
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), claimed, nil
}

// Sink stores audit records. Append links r into the sink's chain (it sets
// Seq, Prev, MAC and Hash, and nothing else) and stores it; records are
// stored in Seq order. r stays the caller's: a Sink that keeps a record
// keeps a copy (as MemorySink does), never the pointer, since the chain
// writes a run's next record into the same Record. A Log over a Store is
// the Sink every store shares; the chain takes any. Implementations must be
// safe for concurrent use.
type Sink interface {
	Append(ctx context.Context, r *Record) error
}

// MemorySink is a Log over a MemoryStore that also keeps the records as
// appended: for tests, the CLI and embedders that ship records elsewhere.
// The zero value is an empty unkeyed sink. It is safe for concurrent use.
type MemorySink struct {
	mu      sync.Mutex // guards the fields below; held over appends, so records stay in Seq order
	store   *MemoryStore
	log     *Log
	records []Record
}

// NewMemorySink returns an empty MemorySink.
func NewMemorySink() *MemorySink { return &MemorySink{} }

// NewKeyedMemorySink returns an empty MemorySink whose records carry a MAC
// under key (at least MinKeyBytes).
func NewKeyedMemorySink(key []byte) (*MemorySink, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("audit: the key has %d bytes, want at least %d", len(key), MinKeyBytes)
	}
	s := &MemorySink{store: NewMemoryStore()}
	var err error
	if s.log, err = NewLog(context.Background(), s.store, LogOptions{Key: key}); err != nil {
		return nil, err
	}
	return s, nil
}

// init makes the zero value's unkeyed Log. The caller holds s.mu.
func (s *MemorySink) init() {
	if s.log == nil {
		s.store = NewMemoryStore()
		s.log, _ = NewLog(context.Background(), s.store, LogOptions{}) // an empty store and no key: nothing to refuse
	}
}

// Append links and keeps r.
func (s *MemorySink) Append(ctx context.Context, r *Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if err := s.log.Append(ctx, r); err != nil {
		return err
	}
	s.records = append(s.records, *r)
	return nil
}

// Records returns a copy of the records kept so far.
func (s *MemorySink) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// Store returns the store holding the records' stored lines (for
// VerifyStore).
func (s *MemorySink) Store() *MemoryStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.store
}

// Head returns the hash of the newest record ("" when empty) and the Seq the
// next record will get.
func (s *MemorySink) Head() (hash string, next uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.log.Head()
}

// Checkpoint returns a checkpoint of the sink's head, MACed under its key,
// to keep apart from the records; ok is false for an unkeyed sink.
func (s *MemorySink) Checkpoint() (c Checkpoint, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.log.Checkpoint()
}

// VerifyError reports the first record that breaks the chain.
type VerifyError struct {
	// Index is the record's position in what was verified (the line
	// number minus one, for a file; its Seq, for a store).
	Index int
	// Seq is the Seq the record claims.
	Seq uint64
	// Reason says what is wrong.
	Reason string
	// Missing says records are missing from Seq on: the chain ends before
	// a checkpoint's records (they were cut from its end), or its store
	// lacks them (a *MissingError).
	Missing bool
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("audit: record %d (seq %d): %s", e.Index, e.Seq, e.Reason)
}

// Verify checks that records form one unbroken chain: each record's hash is
// the hash of its content, each Prev is the hash of the record before, and Seq
// counts up by one. The first record must have Seq 0 and an empty Prev,
// unless records is a suffix of a chain: use VerifyFrom. It returns nil or a
// *VerifyError naming the first broken record.
func Verify(records []Record) error {
	return VerifyFrom("", 0, records)
}

// VerifyFrom is Verify for records that continue a chain whose head hash and
// next Seq are prev and seq.
func VerifyFrom(prev string, seq uint64, records []Record) error {
	for i := range records {
		r := &records[i]
		if err := check(i, prev, seq, r.Seq, r.Prev, r.Hash, func() (string, error) { return Hash(r) }); err != nil {
			return err
		}
		prev, seq = r.Hash, r.Seq+1
	}
	return nil
}

// VerifyOptions says what VerifyWith and VerifyFileWith check besides the
// hash chain.
type VerifyOptions struct {
	// Key, when set, requires every record to carry a MAC made under it:
	// a record edited, inserted or appended and its hashes recomputed by
	// someone without the key is found.
	Key []byte
	// Checkpoint, when set, is a checkpoint of the chain taken apart from
	// it (verified under Key, which it requires): the chain must hold at
	// least the records it counts, the last of them with its head, so
	// records cut from the end, or a chain rewritten before it, are found.
	// Records after it are accepted: each carries a MAC under Key, which
	// only the key's holder makes (a checkpoint is older than its log when
	// the writer stopped between a record and its checkpoint, or when it
	// is a copy shipped elsewhere earlier).
	Checkpoint *Checkpoint
	// Checkpoints are more checkpoints of the chain, each checked as
	// Checkpoint is (one kept beside the log and a copy shipped
	// elsewhere, say).
	Checkpoints []Checkpoint
	// Tenant, when set, requires every record to be the tenant's (its
	// Tenant field): a chain of TenantLogs holds one tenant's records, and
	// its records and checkpoints are MACed under the key every tenant's
	// chain shares, so a chain replaced by another tenant's records (and
	// checkpoint) verifies only with it. The error does not name the
	// tenant the record claims.
	Tenant string
}

// VerifyWith is Verify with the checks of opts.
func VerifyWith(records []Record, opts VerifyOptions) error {
	k, err := opts.keys()
	if err != nil {
		return err
	}
	prev, seq := "", uint64(0)
	e := opts.ends()
	for i := range records {
		r := &records[i]
		if err := check(i, prev, seq, r.Seq, r.Prev, r.Hash, func() (string, error) { return Hash(r) }); err != nil {
			return err
		}
		if k != nil {
			if err := k.checkRecord(i, r); err != nil {
				return err
			}
		}
		if err := checkTenant(opts.Tenant, i, r.Seq, r.Tenant); err != nil {
			return err
		}
		prev, seq = r.Hash, r.Seq+1
		e.after(seq, prev)
	}
	return e.check(len(records), seq, prev)
}

func (o *VerifyOptions) keys() (*keys, error) {
	if o.Key == nil {
		if o.Checkpoint != nil || len(o.Checkpoints) > 0 {
			return nil, fmt.Errorf("audit: a checkpoint is verified under the key: VerifyOptions.Key is required")
		}
		return nil, nil
	}
	k, err := deriveKeys(o.Key)
	if err != nil {
		return nil, err
	}
	e := o.ends()
	for i := range e.c {
		if err := e.c[i].Check(o.Key); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// checkTenant checks that record i (seq), which says it is got's, is
// want's (VerifyOptions.Tenant; "" for any tenant).
func checkTenant(want string, i int, seq uint64, got string) error {
	if want == "" || got == want {
		return nil
	}
	return &VerifyError{Index: i, Seq: seq, Reason: "the record is another tenant's: the chain's records were replaced by another chain's"}
}

// ends returns the checkpoints o checks, none of them reached yet.
func (o *VerifyOptions) ends() ends {
	var c []Checkpoint
	if o.Checkpoint != nil {
		c = append(c, *o.Checkpoint)
	}
	c = append(c, o.Checkpoints...)
	return ends{c: c, at: make([]string, len(c))}
}

// ends follows the checkpoints a verification checks: at[i] is the hash of
// the record at which the chain held as many records as c[i] counts (""
// before it).
type ends struct {
	c  []Checkpoint
	at []string
}

// after notes that the chain's next seq is seq and its head head: called
// after each record.
func (e *ends) after(seq uint64, head string) {
	for i := range e.c {
		if seq == e.c[i].Records {
			e.at[i] = head
		}
	}
}

// check checks that a chain of n records whose next seq is seq and head is
// head holds each checkpoint's records, the last of them its head. Records
// after a checkpoint's carry MACs the caller checked.
func (e *ends) check(n int, seq uint64, head string) error {
	for i := range e.c {
		c := &e.c[i]
		switch {
		case seq < c.Records:
			return cutError(n, seq, c.Records)
		case seq == c.Records && head != c.Head:
			return &VerifyError{Index: max(n-1, 0), Seq: seq - 1, Reason: "the last record's hash is not the checkpoint's head (the log was rewritten)"}
		case e.at[i] != c.Head:
			return &VerifyError{Index: max(int(c.Records)-1, 0), Seq: c.Records - 1, Reason: fmt.Sprintf("record %d's hash is not the head of the checkpoint, which counts %d records (the log was rewritten)", c.Records-1, c.Records)}
		}
	}
	return nil
}

// cutError reports a chain of n records whose next seq is seq, cut short
// of a checkpoint of records records.
func cutError(n int, seq, records uint64) *VerifyError {
	return &VerifyError{Index: n, Seq: seq, Missing: true, Reason: fmt.Sprintf("the log ends at %d records; its checkpoint says %d (records were cut from the end)", seq, records)}
}

func check(i int, prev string, seq, gotSeq uint64, gotPrev, gotHash string, hash func() (string, error)) error {
	switch {
	case gotSeq != seq:
		return &VerifyError{Index: i, Seq: gotSeq, Reason: fmt.Sprintf("seq is %d, want %d (a record was deleted or inserted)", gotSeq, seq)}
	case gotPrev != prev:
		return &VerifyError{Index: i, Seq: gotSeq, Reason: "prev does not match the hash of the record before (a record was deleted, inserted or modified)"}
	}
	h, err := hash()
	if err != nil {
		return &VerifyError{Index: i, Seq: gotSeq, Reason: err.Error()}
	}
	if h != gotHash {
		return &VerifyError{Index: i, Seq: gotSeq, Reason: "hash does not match the record's content (the record was modified)"}
	}
	return nil
}
