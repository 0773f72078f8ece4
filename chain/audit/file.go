package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// MaxLineBytes bounds one stored record when a file is read back (16 MiB).
const MaxLineBytes = 16 << 20

// FileOptions configures a FileSink. The zero value appends an unkeyed
// chain without fsync.
type FileOptions struct {
	// Sync calls fsync after every record, so a record Append returned
	// for survives a crash of the machine. It costs a disk flush per
	// verdict. False leaves flushing to the operating system.
	Sync bool
	// Key, when set (at least MinKeyBytes), gives every record a MAC
	// under it (see Record.MAC), and OpenFile refuses a log whose last
	// record has no valid MAC, so the chain never continues from a forged
	// record. Keep it where the writer of the log cannot read it.
	Key []byte
	// Checkpoint, when set (it needs Key), is a file where the sink keeps
	// a Checkpoint of its head, rewritten after every record; keep it
	// apart from the log (another directory or volume, shipped
	// elsewhere). OpenFile refuses a log that does not hold the
	// checkpoint's records with its head (cut, or rewritten), and a
	// non-empty log without one. A log longer than its checkpoint (the
	// writer stopped between a record and its checkpoint) opens if it
	// verifies against it, every record after it MACed under Key.
	Checkpoint string
}

// FileSink appends records to a JSON-lines file, one compact record per
// line. Opening an existing file continues its chain from its last record.
// It is safe for concurrent use by multiple goroutines of one process; two
// processes must not append to the same file.
type FileSink struct {
	mu   sync.Mutex // guards f, l, err
	f    *os.File
	l    linker
	sync bool
	// ckpt is FileOptions.Checkpoint, open: each checkpoint overwrites
	// the last in place (encodeCheckpoint pads them to one size).
	ckpt *os.File
}

// OpenFile opens (or creates) the JSON-lines file at path for appending and
// reads its last record to continue the chain. A file whose last line is not
// a record (a write torn by a crash, say) is refused: repair it first, since
// appending after it would hide the damage.
//
// With FileOptions.Key, the last record must carry a valid MAC; with
// FileOptions.Checkpoint, the log must hold the checkpoint's records, the
// last of them its head (records after it, each MACed under the key, are
// the writer's own that the checkpoint missed: it catches up). A log that
// fails either is refused (an error wrapping ErrCheckpoint for the second):
// verify it (VerifyFileWith) and repair it first.
func OpenFile(path string, opts FileOptions) (*FileSink, error) {
	var k *keys
	if opts.Key != nil {
		var err error
		if k, err = deriveKeys(opts.Key); err != nil {
			return nil, err
		}
	} else if opts.Checkpoint != "" {
		return nil, fmt.Errorf("audit: FileOptions.Checkpoint needs FileOptions.Key")
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	s := &FileSink{f: f, sync: opts.Sync}
	s.l.keys = k
	if err := s.resume(path, opts); err != nil {
		f.Close()
		return nil, err
	}
	if opts.Checkpoint != "" {
		if s.ckpt, err = os.OpenFile(opts.Checkpoint, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			f.Close()
			return nil, err
		}
		if err := s.writeCheckpoint(); err != nil { // a new log's, or the same again
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// resume reads the end of the log to continue its chain, and checks it
// against the key and the checkpoint.
func (s *FileSink) resume(path string, opts FileOptions) error {
	last, n, err := lastLine(s.f)
	if err != nil {
		return fmt.Errorf("audit: reading %s: %w", path, err)
	}
	if last != nil {
		var r Record
		if err := json.Unmarshal(last, &r); err != nil || r.Hash == "" {
			return fmt.Errorf("audit: %s: line %d is not an audit record; the file needs repair before the chain can continue", path, n)
		}
		got, claimed, err := lineHash(last)
		if err != nil || got != claimed || claimed != r.Hash {
			return fmt.Errorf("audit: %s: line %d does not hash to its hash; the file needs repair before the chain can continue", path, n)
		}
		if s.l.keys != nil {
			if err := s.l.keys.checkLine(n-1, r.Seq, last); err != nil {
				return fmt.Errorf("audit: %s: line %d: %v; the chain does not continue from it", path, n, err.(*VerifyError).Reason)
			}
		}
		s.l.next, s.l.head = r.Seq+1, r.Hash
	}
	if opts.Checkpoint == "" {
		return nil
	}
	if fi, err := os.Stat(opts.Checkpoint); err == nil && fi.Size() == 0 && last == nil {
		return nil // a new log whose first open stopped before its checkpoint was written
	}
	c, err := ReadCheckpoint(opts.Checkpoint)
	switch {
	case errors.Is(err, os.ErrNotExist) && last == nil:
		return nil // a new log
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s is missing but %s holds records; the chain does not continue without it", ErrCheckpoint, opts.Checkpoint, path)
	case err != nil:
		return err
	}
	if err := c.Check(opts.Key); err != nil {
		return err
	}
	if c.Records == s.l.next && c.Head == s.l.head {
		return nil
	}
	if c.Records < s.l.next {
		// The checkpoint is behind the log: the writer stopped between a
		// record and its checkpoint. The records after it stand if the
		// whole log verifies against it (each of them MACed under the
		// key); the checkpoint then catches up.
		if _, err := VerifyFileWith(path, VerifyOptions{Key: opts.Key, Checkpoint: c}); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: %s ends at record %d (%.16s), its checkpoint at %d (%.16s): records were cut, or the log rewritten; verify and repair it first",
		ErrCheckpoint, path, s.l.next, s.l.head, c.Records, c.Head)
}

// lastLine returns the last non-empty line of f and its number (from 1).
func lastLine(f *os.File) ([]byte, int, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	var last []byte
	n, lastN := 0, 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			last = append(last[:0], sc.Bytes()...)
			lastN = n
		}
	}
	return last, lastN, sc.Err()
}

// Append links r and writes it as one line.
func (s *FileSink) Append(_ context.Context, r *Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return errors.New("audit: file sink closed")
	}
	line, err := s.l.link(r)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("audit: writing record %d: %w", r.Seq, err)
	}
	if s.sync {
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("audit: syncing record %d: %w", r.Seq, err)
		}
	}
	s.l.commit(r)
	if s.ckpt != nil {
		// The record is stored: a failure here is reported as a
		// *CheckpointError, the record stands, and the next OpenFile
		// catches the checkpoint up (the log verifies against the older
		// one).
		if err := s.writeCheckpoint(); err != nil {
			return &CheckpointError{Seq: r.Seq, Err: err}
		}
	}
	return nil
}

// CheckpointError is FileSink.Append's error when the record was stored but
// the checkpoint after it could not be written. The record stands: a caller
// must count it as stored (and report the failure). It wraps ErrCheckpoint
// and the write's error.
type CheckpointError struct {
	// Seq is the stored record's.
	Seq uint64
	// Err is the checkpoint write's error.
	Err error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("audit: record %d stored, but the checkpoint after it was not written: %v", e.Seq, e.Err)
}

// Unwrap returns ErrCheckpoint and Err.
func (e *CheckpointError) Unwrap() []error { return []error{ErrCheckpoint, e.Err} }

// writeCheckpoint overwrites the checkpoint file with the head's. A crash
// in the middle of it leaves a checkpoint that does not verify: OpenFile
// then refuses the log until it is verified and the checkpoint rewritten.
func (s *FileSink) writeCheckpoint() error {
	b, err := encodeCheckpoint(s.l.keys.checkpoint(s.l.next, s.l.head))
	if err != nil {
		return err
	}
	if _, err := s.ckpt.WriteAt(b, 0); err != nil {
		return err
	}
	if s.sync {
		return s.ckpt.Sync()
	}
	return nil
}

// Checkpoint returns a checkpoint of the sink's head; ok is false for an
// unkeyed sink.
func (s *FileSink) Checkpoint() (c Checkpoint, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.l.keys == nil {
		return Checkpoint{}, false
	}
	return s.l.keys.checkpoint(s.l.next, s.l.head), true
}

// Head returns the hash of the newest record ("" when empty) and the Seq the
// next record will get.
func (s *FileSink) Head() (hash string, next uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.head, s.l.next
}

// Close closes the file.
func (s *FileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if s.ckpt != nil {
		if cerr := s.ckpt.Close(); err == nil {
			err = cerr
		}
		s.ckpt = nil
	}
	return err
}

// ReadFile reads every record of a JSON-lines file.
func ReadFile(path string) ([]Record, error) {
	var out []Record
	err := eachLine(path, func(i int, line []byte) error {
		var r Record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&r); err != nil {
			return &VerifyError{Index: i, Reason: "not an audit record: " + err.Error()}
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// VerifyFile verifies the chain of a JSON-lines file line by line, on the
// bytes as stored: a field added to, removed from or changed in any line is
// found. It returns the number of records and nil, or a *VerifyError naming
// the first broken line (Index = line number - 1, blank lines counted).
func VerifyFile(path string) (int, error) {
	return VerifyFileWith(path, VerifyOptions{})
}

// VerifyFileWith is VerifyFile with the checks of opts: every line's MAC
// under opts.Key, and the end of the log against opts.Checkpoint.
func VerifyFileWith(path string, opts VerifyOptions) (int, error) {
	k, err := opts.keys()
	if err != nil {
		return 0, err
	}
	prev, seq, n := "", uint64(0), 0
	var atCheckpoint string
	err = eachLine(path, func(i int, line []byte) error {
		var head struct {
			Seq  uint64 `json:"seq"`
			Prev string `json:"prev"`
			Hash string `json:"hash"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			return &VerifyError{Index: i, Reason: "not an audit record: " + err.Error()}
		}
		got, claimed, err := lineHash(line)
		if err != nil {
			return &VerifyError{Index: i, Seq: head.Seq, Reason: err.Error()}
		}
		if err := check(i, prev, seq, head.Seq, head.Prev, claimed, func() (string, error) { return got, nil }); err != nil {
			return err
		}
		if k != nil {
			if err := k.checkLine(i, head.Seq, line); err != nil {
				return err
			}
		}
		prev, seq = head.Hash, head.Seq+1
		atCheckpoint = opts.atCheckpoint(seq, prev, atCheckpoint)
		n++
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, opts.checkEnd(n, seq, prev, atCheckpoint)
}

func eachLine(path string, f func(i int, line []byte) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	for i := 0; sc.Scan(); i++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := f(i, line); err != nil {
			return err
		}
	}
	return sc.Err()
}
