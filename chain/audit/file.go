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

// FileOptions configures a FileSink. The zero value appends without fsync.
type FileOptions struct {
	// Sync calls fsync after every record, so a record Append returned
	// for survives a crash of the machine. It costs a disk flush per
	// verdict. False leaves flushing to the operating system.
	Sync bool
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
}

// OpenFile opens (or creates) the JSON-lines file at path for appending and
// reads its last record to continue the chain. A file whose last line is not
// a record (a write torn by a crash, say) is refused: repair it first, since
// appending after it would hide the damage.
func OpenFile(path string, opts FileOptions) (*FileSink, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	s := &FileSink{f: f, sync: opts.Sync}
	last, n, err := lastLine(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: reading %s: %w", path, err)
	}
	if last != nil {
		var r Record
		if err := json.Unmarshal(last, &r); err != nil || r.Hash == "" {
			f.Close()
			return nil, fmt.Errorf("audit: %s: line %d is not an audit record; the file needs repair before the chain can continue", path, n)
		}
		s.l.next, s.l.head = r.Seq+1, r.Hash
	}
	return s, nil
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
	return nil
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
	prev, seq, n := "", uint64(0), 0
	err := eachLine(path, func(i int, line []byte) error {
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
		prev, seq = head.Hash, head.Seq+1
		n++
		return nil
	})
	return n, err
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
