package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/store"
)

// auditKey keys the audit chains of these tests.
var auditKey = []byte("store audit test key: 32 bytes or more")

// The shape of each audit child: goroutines appending records each, to the
// chain of tenant acme and, every other record, of tenant beta.
const (
	auditGoroutines = 8
	auditRecords    = 25
)

// auditChild prints "ready", waits for a line on stdin, then appends
// through a TenantLogs from auditGoroutines goroutines; prints "ok".
func auditChild(ctx context.Context, db *store.DB) error {
	logs, err := store.TenantAudit(db, auditKey)
	if err != nil {
		return err
	}
	if err := awaitGo(); err != nil {
		return err
	}
	err = inParallel(auditGoroutines, func(g int) error {
		for i := range auditRecords {
			tenant := "acme"
			if i%2 == 1 {
				tenant = "beta"
			}
			r := &audit.Record{Time: time.Now().UTC(), Run: fmt.Sprintf("run-%d-%d-%d", os.Getpid(), g, i), Tenant: tenant,
				Point: "tool.before", Binding: "b", Phase: "guard", Module: "abc", Decision: "continue", By: "hook"}
			if err := logs.Append(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Println("ok")
	return nil
}

// twoProcessesAppendOneAuditChain: two OS processes of 8 goroutines each
// append to the chains of two tenants at once; each chain verifies (keyed)
// from the store with every record once: no fork, no gap.
func twoProcessesAppendOneAuditChain(t *testing.T, tg target) {
	ctx := context.Background()
	db := tg.open(t)
	cs := startTogether(t, 2, "audit", tg)
	for i, c := range cs {
		if lines := c.Finish(t); len(lines) != 1 || lines[0] != "ok" {
			t.Fatalf("process %d printed %q", i, lines)
		}
	}
	odd := auditRecords / 2 // beta's, of each goroutine's
	for tenant, per := range map[string]int{"acme": len(cs) * auditGoroutines * (auditRecords - odd), "beta": len(cs) * auditGoroutines * odd} {
		n, err := audit.VerifyStore(ctx, store.NewAuditStore(db, tenant), audit.VerifyOptions{Key: auditKey})
		if err != nil {
			t.Fatalf("%s: %v", tenant, err)
		}
		if n != per {
			t.Fatalf("%s: %d records, want %d", tenant, n, per)
		}
		runs := map[string]bool{}
		err = store.NewAuditStore(db, tenant).Read(ctx, 0, func(line []byte) error {
			var r audit.Record
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			if runs[r.Run] {
				return fmt.Errorf("run %s recorded twice", r.Run)
			}
			runs[r.Run] = true
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tenant, err)
		}
	}
}
