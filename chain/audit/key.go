package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
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
	bp := getScratch()
	body, ok := appendRecord((*bp)[:0], r)
	if ok {
		defer putScratch(bp, body)
	} else {
		scratch.Put(bp)
		var err error
		if body, err = encodeReflect(r); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(mac(key, body)), nil
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
// does not end where its newest checkpoint says was cut or extended.
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
func ReadCheckpoint(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCheckpoint, path, err)
	}
	return &c, nil
}

// WriteCheckpoint writes c to path atomically (a temporary file renamed over
// it), with fsync when sync is set.
func WriteCheckpoint(path string, c Checkpoint, sync bool) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(append(b, '\n')); err == nil && sync {
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
