package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strconv"

	"github.com/wasmhooks/wasmhooks/runtime"
)

// MinKeyBytes is the shortest key a keyed chain accepts: 32 bytes, the size
// of the HMAC-SHA256 it keys.
const MinKeyBytes = 32

// keys are the keys a chain's key gives: one for records' MACs, one for
// checkpoints', so that neither can stand for the other.
type keys struct {
	record, check []byte
}

func deriveKeys(key []byte) (*keys, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("audit: the key has %d bytes, want at least %d", len(key), MinKeyBytes)
	}
	return &keys{record: mac(key, []byte("wasmhooks audit record key v1")), check: mac(key, []byte("wasmhooks audit checkpoint key v1"))}, nil
}

func mac(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// recordMAC returns the MAC of r (whose MAC field must be empty): of its
// stored form without MAC and Hash.
func recordMAC(key []byte, r *Record) (string, error) {
	rb, body, err := storedBody(r)
	if err != nil {
		return "", err
	}
	defer releaseBody(rb, body)
	return hex.EncodeToString(mac(key, body)), nil
}

// encodeKeyed is encode for a keyed chain: it sets r.MAC to the MAC of r's
// stored form without MAC and Hash, and returns the stored line and hash,
// from one encoding of the record.
//
// hm, if not nil, is an HMAC-SHA256 under key to reuse (the caller's, not
// shared).
func encodeKeyed(r *Record, key []byte, hm hash.Hash) ([]byte, string, error) {
	rb := recordBufs.Get().(*recordBuf)
	body, ok := appendRecord(rb.b[:0], r, &rb.memo)
	if !ok {
		recordBufs.Put(rb)
		mac, err := recordMAC(key, r)
		if err != nil {
			return nil, "", err
		}
		r.MAC = mac
		return encode(r)
	}
	if hm == nil {
		hm = hmac.New(sha256.New, key)
	}
	hm.Reset()
	hm.Write(body)
	var sumb [sha256.Size]byte
	var m [2 * sha256.Size]byte
	hex.Encode(m[:], hm.Sum(sumb[:0]))
	r.MAC = string(m[:])
	// What appendRecord writes with the MAC set: it is the last field.
	body = append(body[:len(body)-1], `,"mac":"`...)
	body = append(body, m[:]...)
	body = append(body, `"}`...)
	sum := sha256.Sum256(body)
	var hb [2 * sha256.Size]byte
	hex.Encode(hb[:], sum[:])
	out := make([]byte, 0, len(body)+len(`,"hash":""`)+len(hb)+1)
	out = append(out, body[:len(body)-1]...)
	out = append(out, `,"hash":"`...)
	out = append(out, hb[:]...)
	out = append(out, `"}`...)
	putRecordBuf(rb, body)
	return out, string(hb[:]), nil
}

// checkRecord checks the MAC of record i, r.
func (k *keys) checkRecord(i int, r *Record) error {
	if r.MAC == "" {
		return &VerifyError{Index: i, Seq: r.Seq, Reason: "the record has no mac: it was not written by a sink holding the key (forged, or written without the key)"}
	}
	c := *r
	c.MAC, c.Hash = "", ""
	want, err := recordMAC(k.record, &c)
	if err != nil {
		return &VerifyError{Index: i, Seq: r.Seq, Reason: err.Error()}
	}
	if !hmac.Equal([]byte(want), []byte(r.MAC)) {
		return &VerifyError{Index: i, Seq: r.Seq, Reason: "the record's mac does not verify under the key (it was forged or changed, and its hashes recomputed)"}
	}
	return nil
}

// checkLine checks the MAC of a stored line (whose shape lineHash checked)
// on its bytes. A keyed line is `{...,"prev":"P","mac":"M","hash":"H"}`: the
// MAC is of `{...,"prev":"P"}`.
func (k *keys) checkLine(i int, seq uint64, line []byte) error {
	const (
		hashSuffix = len(`,"hash":"`) + 64 + len(`"}`)
		macField   = `,"mac":"`
		macSuffix  = len(macField) + 64 + len(`"`)
	)
	x := line[:len(line)-hashSuffix] // `{...,"prev":"P","mac":"M"`
	if len(x) < macSuffix+1 || string(x[len(x)-macSuffix:len(x)-macSuffix+len(macField)]) != macField || x[len(x)-1] != '"' {
		return &VerifyError{Index: i, Seq: seq, Reason: "the record has no mac: it was not written by a sink holding the key (forged, or written without the key)"}
	}
	claimed := x[len(x)-macSuffix+len(macField) : len(x)-1]
	unmaced := append(append([]byte(nil), x[:len(x)-macSuffix]...), '}')
	want := hex.EncodeToString(mac(k.record, unmaced))
	if !hmac.Equal([]byte(want), claimed) {
		return &VerifyError{Index: i, Seq: seq, Reason: "the record's mac does not verify under the key (it was forged or changed, and its hashes recomputed)"}
	}
	return nil
}

// Checkpoint is the head of a keyed chain, MACed under its key, to keep
// apart from the log (another file, another host, a log shipper): a log that
// does not hold its checkpoint's records, the last of them with its head,
// was cut or rewritten. Records after them verify by their MACs.
type Checkpoint struct {
	// Records is how many records the chain held (the next record's Seq).
	Records uint64 `json:"records"`
	// Head is the Hash of the last of them ("" for none).
	Head string `json:"head"`
	// MAC is the hex HMAC-SHA256 of the two under the chain's checkpoint
	// key.
	MAC string `json:"mac"`
}

func (k *keys) checkpoint(records uint64, head string) Checkpoint {
	return Checkpoint{Records: records, Head: head, MAC: hex.EncodeToString(mac(k.check, checkpointBody(records, head)))}
}

func checkpointBody(records uint64, head string) []byte {
	return []byte("wasmhooks audit checkpoint v1\n" + strconv.FormatUint(records, 10) + "\n" + head)
}

// NewCheckpoint returns the checkpoint of a chain of records records whose
// last hash is head, under key.
func NewCheckpoint(key []byte, records uint64, head string) (Checkpoint, error) {
	k, err := deriveKeys(key)
	if err != nil {
		return Checkpoint{}, err
	}
	return k.checkpoint(records, head), nil
}

// ErrCheckpoint is wrapped by the errors of a checkpoint that does not
// verify or cannot be read.
var ErrCheckpoint = errors.New("audit: checkpoint")

// Check reports whether c was made under key.
func (c *Checkpoint) Check(key []byte) error {
	k, err := deriveKeys(key)
	if err != nil {
		return err
	}
	want := k.checkpoint(c.Records, c.Head)
	if !hmac.Equal([]byte(want.MAC), []byte(c.MAC)) {
		return fmt.Errorf("%w: its mac does not verify under the key (forged, changed, or made under another key)", ErrCheckpoint)
	}
	return nil
}

// ReadCheckpoint reads the checkpoint file at path. It does not check its
// MAC: Check or VerifyOptions does.
//
// The file must be a regular file of at most 4 KiB (a FileSink writes 256
// bytes): a FIFO or a link to /dev/zero planted in its place is refused at
// once rather than read for ever.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	b, err := runtime.ReadFileLimit(path, maxCheckpointFileBytes, "checkpoint_bytes")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCheckpoint, path, err)
	}
	return &c, nil
}

// maxCheckpointFileBytes bounds the checkpoint file ReadCheckpoint reads.
const maxCheckpointFileBytes = 4 << 10

// checkpointBytes is the size a FileSink writes its checkpoint file at: the
// JSON padded with spaces, so each one overwrites the last in place.
const checkpointBytes = 255

// encodeCheckpoint is c as a FileSink stores it: its JSON padded to
// checkpointBytes, and a newline.
func encodeCheckpoint(c Checkpoint) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if len(b) > checkpointBytes {
		return nil, fmt.Errorf("audit: checkpoint of %d bytes", len(b))
	}
	out := make([]byte, checkpointBytes+1)
	copy(out, b)
	for i := len(b); i < checkpointBytes; i++ {
		out[i] = ' '
	}
	out[checkpointBytes] = '\n'
	return out, nil
}

// WriteCheckpoint writes c to path atomically (a new temporary file of a
// random name, O_EXCL, renamed over it: a name planted next to path is never
// written through), with fsync when sync is set.
func WriteCheckpoint(path string, c Checkpoint, sync bool) error {
	b, err := encodeCheckpoint(c)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err = f.Chmod(0o600); err == nil {
		_, err = f.Write(b)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
