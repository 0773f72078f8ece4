package audit

import (
	"context"
	"errors"
	"os"
	"testing"
)

// TestCheckpointBehindTheLog: a checkpoint older than its log (the process
// died between a record's write and the checkpoint's, the checkpoint's write
// failed after the record's, or it is a copy shipped elsewhere earlier, as
// SECURITY.md advises) made OpenFile refuse the log for ever and
// VerifyFileWith report it broken, though every record past the checkpoint
// carries a MAC only the key's holder can make. Such a log verifies and
// opens (the checkpoint catches up); a log cut short of its checkpoint, or
// rewritten before it, is still refused.
func TestCheckpointBehindTheLog(t *testing.T) {
	path, cpPath, _ := keyedLog(t, 3)
	old, err := ReadCheckpoint(cpPath)
	if err != nil {
		t.Fatal(err)
	}
	// Two records written with the key, the checkpoint left behind.
	s := openFile(t, path, FileOptions{Key: testKey})
	fill(t, s, 2)
	s.Close()
	if n, err := VerifyFileWith(path, VerifyOptions{Key: testKey, Checkpoint: old}); err != nil || n != 5 {
		t.Fatalf("VerifyFileWith against an older checkpoint = %d, %v; want 5, nil", n, err)
	}
	s, err = OpenFile(path, FileOptions{Key: testKey, Checkpoint: cpPath})
	if err != nil {
		t.Fatalf("OpenFile with a checkpoint behind the log: %v", err)
	}
	fill(t, s, 1)
	s.Close()
	now, err := ReadCheckpoint(cpPath)
	if err != nil || now.Records != 6 {
		t.Fatalf("checkpoint after reopening: %+v, %v; want 6 records", now, err)
	}
	if n, err := VerifyFileWith(path, VerifyOptions{Key: testKey, Checkpoint: now}); err != nil || n != 6 {
		t.Fatalf("VerifyFileWith = %d, %v", n, err)
	}

	// A checkpoint naming a record the log does not hold at its place: the
	// log was rewritten before it (or the checkpoint is another log's).
	forged, err := NewCheckpoint(testKey, 3, "00"+old.Head[2:])
	if err != nil {
		t.Fatal(err)
	}
	var ve *VerifyError
	if _, err := VerifyFileWith(path, VerifyOptions{Key: testKey, Checkpoint: &forged}); !errors.As(err, &ve) {
		t.Errorf("a checkpoint whose head is not the log's record = %v, want a *VerifyError", err)
	}
	if err := WriteCheckpoint(cpPath, forged, false); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path, FileOptions{Key: testKey, Checkpoint: cpPath}); err == nil {
		t.Error("OpenFile accepted a checkpoint whose head is not the log's record")
	}
	// A log cut short of its checkpoint is refused, as before.
	ahead, _ := NewCheckpoint(testKey, 7, now.Head)
	if _, err := VerifyFileWith(path, VerifyOptions{Key: testKey, Checkpoint: &ahead}); !errors.As(err, &ve) {
		t.Errorf("a log cut short of its checkpoint = %v", err)
	}
	os.Remove(cpPath)
}

// TestCheckpointWriteFailureKeepsTheRecord: when the checkpoint cannot be
// written after a record is, Append's error says the record was stored (a
// *CheckpointError), so a caller does not treat it as lost (the chain put a
// resolved approval back as pending although its resolution was in the log,
// so it could be resolved again). The next OpenFile catches the checkpoint up.
func TestCheckpointWriteFailureKeepsTheRecord(t *testing.T) {
	path, cpPath, _ := keyedLog(t, 2)
	s := openFile(t, path, FileOptions{Key: testKey, Checkpoint: cpPath})
	s.ckpt.Close() // every checkpoint write now fails
	err := s.Append(context.Background(), rec(9))
	var ce *CheckpointError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCheckpoint) || ce.Seq != 2 {
		t.Fatalf("Append with a failing checkpoint = %v, want a *CheckpointError for seq 2", err)
	}
	s.ckpt = nil
	s.Close()
	if n, err := VerifyFileWith(path, VerifyOptions{Key: testKey}); err != nil || n != 3 {
		t.Fatalf("the record was not stored: %d, %v", n, err)
	}
	s, err = OpenFile(path, FileOptions{Key: testKey, Checkpoint: cpPath})
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	s.Close()
	if c, err := ReadCheckpoint(cpPath); err != nil || c.Records != 3 {
		t.Fatalf("checkpoint %+v, %v; want 3 records", c, err)
	}
}
