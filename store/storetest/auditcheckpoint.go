package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/store"
)

// ReadCounter is an audit.Store that counts in N the lines its Store's Read
// hands out: the rows a verification read.
type ReadCounter struct {
	audit.Store
	N *atomic.Int64
}

// Read implements audit.Store.
func (s ReadCounter) Read(ctx context.Context, from uint64, f func([]byte) error) error {
	return s.Store.Read(ctx, from, func(line []byte) error {
		s.N.Add(1)
		return f(line)
	})
}

// RunAuditCheckpoint checks migration 0008 (audit_checkpoints) on a
// database at version 7 holding an audit chain: after the upgrade the chain
// has no checkpoint; one saved is read back and replaced only by one
// counting more records; a verification from it reads only its last record
// and those after it; records cut from the end (the head row rewound with
// them, or not) are found with the first missing seq; a checkpoint row
// changed in the database no longer verifies under the key; two nodes
// saving at once keep the checkpoint counting the most records.
func RunAuditCheckpoint(t *testing.T, tg Target) {
	tg.require(t)
	ctx := context.Background()
	where, raw, d, ms := tg.before(t, 8)
	raw.Close()
	// The chain, written at version 7: the store's Append is version 7's.
	key := []byte("storetest audit checkpoint key, 32 bytes")
	appendN := func(t *testing.T, db *store.DB, n int) {
		t.Helper()
		log, err := audit.NewLog(ctx, store.NewAuditStore(db, "acme"), audit.LogOptions{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := log.Append(ctx, &audit.Record{Run: "r", Tenant: "acme", Decision: "continue"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	db := tg.OpenAt(t, where)
	if db.Version() != ms[len(ms)-1].Version {
		t.Fatalf("at version %d after the upgrade", db.Version())
	}
	s := store.NewAuditStore(db, "acme")
	if c, err := s.Checkpoint(ctx); err != nil || c != nil {
		t.Fatalf("a chain never verified: checkpoint %+v %v", c, err)
	}
	appendN(t, db, 5)
	n, err := audit.VerifyStore(ctx, s, audit.VerifyOptions{Key: key})
	if err != nil || n != 5 {
		t.Fatalf("verify: %d %v", n, err)
	}
	_, last, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var head struct{ Hash string }
	if err := json.Unmarshal(last, &head); err != nil {
		t.Fatal(err)
	}
	at5, err := audit.NewCheckpoint(key, 5, head.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.SaveCheckpoint(ctx, at5); err != nil || !ok {
		t.Fatalf("save: %v %v", ok, err)
	}
	older, _ := audit.NewCheckpoint(key, 4, "an older head")
	if ok, err := s.SaveCheckpoint(ctx, older); err != nil || ok {
		t.Fatalf("an older checkpoint saved over a newer: %v %v", ok, err)
	}
	if c, err := s.Checkpoint(ctx); err != nil || c == nil || *c != at5 {
		t.Fatalf("checkpoint read back: %+v %v, want %+v", c, err, at5)
	}
	// Three more records: a verification from the checkpoint reads record
	// 4 (the checkpoint's last) and the three.
	appendN(t, db, 3)
	rows := new(atomic.Int64)
	if res, err := audit.VerifyStoreFrom(ctx, ReadCounter{Store: s, N: rows}, at5, audit.VerifyOptions{Key: key}); err != nil || res.Records != 8 || res.Read != 4 || rows.Load() != 4 {
		t.Fatalf("from the checkpoint: %+v (%d rows), %v", res, rows.Load(), err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.SQL().ExecContext(ctx, d.Rebind(q), args...); err != nil {
			t.Fatal(err)
		}
	}
	// Record 6 deleted, the head row left: the store reports it missing
	// after the verifier had the records before it (in the same page).
	exec(`DELETE FROM audit_records WHERE chain = $1 AND seq = 6`, []byte("acme"))
	var ve *audit.VerifyError
	if res, err := audit.VerifyStoreFrom(ctx, s, at5, audit.VerifyOptions{Key: key}); !errors.As(err, &ve) || !ve.Missing || ve.Seq != 6 || res.Records != 6 {
		t.Fatalf("record 6 deleted, the head row left: %+v %v", res, err)
	}
	// Records 3 to 5 deleted too, the head row left: reading from the
	// checkpoint's last (4), the store finds the first missing before it.
	exec(`DELETE FROM audit_records WHERE chain = $1 AND seq >= 3 AND seq <= 5`, []byte("acme"))
	if res, err := audit.VerifyStoreFrom(ctx, s, at5, audit.VerifyOptions{Key: key}); !errors.As(err, &ve) || !ve.Missing || ve.Seq != 3 || res.Records != 3 {
		t.Fatalf("records 3 to 6 deleted, the head row left: %+v %v", res, err)
	}
	// Records from 3 on deleted and the head row rewound to record 2: the
	// checkpoint says 5, the first missing is 3.
	exec(`DELETE FROM audit_records WHERE chain = $1 AND seq >= 3`, []byte("acme"))
	var h2 string
	if err := db.SQL().QueryRowContext(ctx, d.Rebind(`SELECT hash FROM audit_records WHERE chain = $1 AND seq = 2`), []byte("acme")).Scan(&h2); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE audit_chains SET next = 3, head = $1 WHERE chain = $2`, h2, []byte("acme"))
	if _, err := audit.VerifyStoreFrom(ctx, s, at5, audit.VerifyOptions{Key: key}); !errors.As(err, &ve) || !ve.Missing || ve.Seq != 3 {
		t.Fatalf("records cut, the head row rewound: %v", err)
	}
	if _, err := audit.VerifyStore(ctx, s, audit.VerifyOptions{Key: key, Checkpoint: &at5}); !errors.As(err, &ve) || !ve.Missing || ve.Seq != 3 {
		t.Fatalf("the same, verified in full: %v", err)
	}
	// The checkpoint row changed in the database: its MAC refuses it.
	exec(`UPDATE audit_checkpoints SET records = 3, head = $1 WHERE chain = $2`, h2, []byte("acme"))
	c, err := s.Checkpoint(ctx)
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	if err := c.Check(key); !errors.Is(err, audit.ErrCheckpoint) {
		t.Fatalf("a checkpoint row rewritten: %v", err)
	}

	// Two nodes (two pools on the database) saving a new chain's
	// checkpoints at once, the first ones racing to insert its row: the
	// one kept counts the most records; then older ones saved at once are
	// all refused and move nothing back.
	exec(`INSERT INTO audit_chains (chain, next, head) VALUES ($1, 0, '')`, []byte("race"))
	nodes := []*store.AuditStore{store.NewAuditStore(db, "race"), store.NewAuditStore(tg.OpenAt(t, where), "race")}
	at := func(n int) audit.Checkpoint {
		c, err := audit.NewCheckpoint(key, uint64(n), fmt.Sprintf("head %d", n))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const racers = 16
	save := func(n func(i int) int) (saved int) {
		var (
			wg    sync.WaitGroup
			count atomic.Int64
		)
		errs := make(chan error, racers)
		for i := range racers {
			wg.Go(func() {
				ok, err := nodes[i%2].SaveCheckpoint(ctx, at(n(i)))
				if ok {
					count.Add(1)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		return int(count.Load())
	}
	if saved := save(func(i int) int { return i + 1 }); saved < 1 {
		t.Fatalf("%d saves at once: none saved", racers)
	}
	if c, err := nodes[1].Checkpoint(ctx); err != nil || c == nil || *c != at(racers) {
		t.Fatalf("after %d saves at once: %+v %v, want the checkpoint of %d records", racers, c, err, racers)
	}
	if saved := save(func(i int) int { return i%(racers-1) + 1 }); saved != 0 {
		t.Fatalf("%d older checkpoints saved over a newer", saved)
	}
	if c, err := nodes[0].Checkpoint(ctx); err != nil || c == nil || *c != at(racers) {
		t.Fatalf("after older saves at once: %+v %v", c, err)
	}
}
