package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// benchAuditAppend: benchCallers goroutines append keyed records to one
// tenant's chain through a TenantLogs; reports records per second.
func benchAuditAppend(b *testing.B, driver string) {
	var tg target
	switch driver {
	case "sqlite":
		tg = target{"sqlite", filepath.Join(b.TempDir(), "bench.db")}
	default:
		if os.Getenv(storetest.PostgresEnv) == "" {
			b.Skip(storetest.PostgresEnv + " is unset (make postgres)")
		}
		tg = target{"postgres", storetest.PostgresURL(b)}
	}
	db, err := openDSN(context.Background(), tg.driver, tg.dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	logs, err := store.TenantAudit(db, auditKey)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range benchCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < b.N; i += benchCallers {
				r := &audit.Record{Time: time.Now().UTC(), Run: fmt.Sprint(i), Tenant: "acme", Point: "tool.before",
					Binding: "b", Phase: "guard", Module: "abc", Decision: "continue", By: "hook"}
				if err := logs.Append(ctx, r); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

func BenchmarkAuditAppend8CallersSQLite(b *testing.B)   { benchAuditAppend(b, "sqlite") }
func BenchmarkAuditAppend8CallersPostgres(b *testing.B) { benchAuditAppend(b, "postgres") }
