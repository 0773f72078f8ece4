package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/store"
)

// benchAuditAppend: benchCallers goroutines append keyed records to one
// tenant's chain through a TenantLogs; reports records per second.
func benchAuditAppend(b *testing.B, driver string) {
	logs, err := store.TenantAudit(benchDB(b, driver), auditKey)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	benchParallel(b, "records/s", func(i int) error {
		r := &audit.Record{Time: time.Now().UTC(), Run: fmt.Sprint(i), Tenant: "acme", Point: "tool.before",
			Binding: "b", Phase: "guard", Module: "abc", Decision: "continue", By: "hook"}
		return logs.Append(ctx, r)
	})
}

func BenchmarkAuditAppend8CallersSQLite(b *testing.B)   { benchAuditAppend(b, "sqlite") }
func BenchmarkAuditAppend8CallersPostgres(b *testing.B) { benchAuditAppend(b, "postgres") }
