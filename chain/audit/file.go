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

// FileSink is a Log over a FileStore, with its checkpoints in a file of
// their own (FileOptions.Checkpoint): one JSON-lines file, one compact
// record per line. Opening an existing file continues its chain from its
// last record. It is safe for concurrent use by multiple goroutines of one
// process; a second FileSink over the same file is refused (ErrFileInUse)
// while the first is open.
type FileSink struct {
	*Log
	store *FileStore
	ckpt  *fileCheckpoints // nil without FileOptions.Checkpoint
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
	if opts.Key != nil {
		if _, err := deriveKeys(opts.Key); err != nil {
			return nil, err
		}
	} else if opts.Checkpoint != "" {
		return nil, fmt.Errorf("audit: FileOptions.Checkpoint needs FileOptions.Key")
	}
	st, err := OpenFileStore(path, opts.Sync)
	if err != nil {
		return nil, err
	}
	s := &FileSink{store: st}
	lo := LogOptions{Key: opts.Key}
	if opts.Checkpoint != "" {
		s.ckpt = &fileCheckpoints{path: opts.Checkpoint, sync: opts.Sync}
		lo.Checkpoints = s.ckpt
	}
	if s.Log, err = NewLog(context.Background(), st, lo); err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Close closes the files.
func (s *FileSink) Close() error {
	err := s.store.Close()
	if s.ckpt != nil {
		if cerr := s.ckpt.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// fileCheckpoints keeps a checkpoint in a file, each overwriting the last
// in place (encodeCheckpoint pads them to one size).
type fileCheckpoints struct {
	path   string
	sync   bool
	mu     sync.Mutex // guards f, closed
	f      *os.File   // opened on the first Save
	closed bool       // by Close: every Save after it fails
}

// Load reads the checkpoint file; a missing or empty one holds none.
// Anything but a regular file (a FIFO, a device) is left to ReadCheckpoint,
// which refuses it.
func (c *fileCheckpoints) Load() (*Checkpoint, error) {
	fi, err := os.Stat(c.path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && fi.Mode().IsRegular() && fi.Size() == 0) {
		return nil, nil // a new log, or one whose first open stopped before its checkpoint was written
	}
	return ReadCheckpoint(c.path)
}

// Save overwrites the checkpoint file. A crash in the middle of it leaves a
// checkpoint that does not verify: OpenFile then refuses the log until it is
// verified and the checkpoint rewritten.
func (c *fileCheckpoints) Save(cp Checkpoint) error {
	b, err := encodeCheckpoint(cp)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("audit: checkpoint file %s: %w", c.path, os.ErrClosed)
	}
	if c.f == nil {
		if c.f, err = os.OpenFile(c.path, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return err
		}
	}
	if _, err := c.f.WriteAt(b, 0); err != nil {
		return err
	}
	if c.sync {
		return c.f.Sync()
	}
	return nil
}

// Close closes the file; a Save after it fails.
func (c *fileCheckpoints) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.f == nil {
		return nil
	}
	err := c.f.Close()
	c.f = nil
	return err
}

// ErrFileInUse is wrapped by the error of OpenFileStore (and OpenFile) for a
// file another FileStore holds open, in this process or another: two
// writers appending to one file would fork its chain.
var ErrFileInUse = errors.New("audit: the file is open in another FileStore (another process, or this one)")

// FileStore is a Store in a JSON-lines file, one stored record per line. It
// is safe for concurrent use within one process. It holds an exclusive
// advisory lock (flock) on the file while open, so a second FileStore over
// it, in any process, is refused with ErrFileInUse (on systems without
// flock, nothing refuses it: do not open one file twice).
type FileStore struct {
	path string
	sync bool
	mu   sync.Mutex // guards the fields below; held over Append's link
	f    *os.File
	next uint64
	head string
	last []byte
	size int64 // bytes written, complete lines only
}

// OpenFileStore opens (or creates) the JSON-lines file at path. A file whose
// last line is not a record with a valid hash (a write torn by a crash,
// say) is refused: repair it first, since appending after it would hide the
// damage. With sync, every Append calls fsync before it returns.
func OpenFileStore(path string, sync bool) (*FileStore, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, ErrFileInUse) {
			return nil, fmt.Errorf("%w: %s", err, path)
		}
		return nil, fmt.Errorf("audit: locking %s: %w", path, err)
	}
	s := &FileStore{path: path, sync: sync, f: f}
	last, n, err := lastLine(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: reading %s: %w", path, err)
	}
	if last != nil {
		seq, h, err := parseLine(last)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("audit: %s: line %d: %v; the file needs repair before the chain can continue", path, n, err)
		}
		s.next, s.head, s.last = seq+1, h, last
	}
	if s.size, err = f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// Head returns the next Seq and the last line.
func (s *FileStore) Head(context.Context) (uint64, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next, s.last, nil
}

// Append links a record at the next seq and writes its line, holding the
// store.
func (s *FileStore) Append(_ context.Context, link LinkFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return errors.New("audit: file store closed")
	}
	e, err := link(s.next, s.last)
	if err != nil {
		return err
	}
	if err := e.check(s.next, s.head); err != nil {
		return err
	}
	n, err := s.f.Write(append(e.Line, '\n'))
	if err != nil {
		return fmt.Errorf("audit: writing record %d: %w", e.Seq, err)
	}
	if s.sync {
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("audit: syncing record %d: %w", e.Seq, err)
		}
	}
	s.next, s.head, s.last = e.Seq+1, e.Hash, e.Line
	s.size += int64(n)
	return nil
}

// Read calls f with the lines from seq from (blank lines skipped), up to
// the end of the file when Read began.
func (s *FileStore) Read(ctx context.Context, from uint64, f func([]byte) error) error {
	s.mu.Lock()
	size := s.size
	s.mu.Unlock()
	file, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(io.LimitReader(file, size))
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	for i := uint64(0); sc.Scan(); {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if i >= from {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := f(line); err != nil {
				return err
			}
		}
		i++
	}
	return sc.Err()
}

// Close closes the file.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
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
	v, err := newLineVerifier(opts)
	if err != nil {
		return 0, err
	}
	return v.end(eachLine(path, v.line))
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
