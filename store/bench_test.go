package store_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// benchCallers is how many goroutines share the ledger in the throughput
// benchmarks (the target is stated for 8 callers).
const benchCallers = 8

// benchDB opens the benchmark's database for driver ("sqlite" or
// "postgres"), closed when b ends; Postgres is skipped when unconfigured.
func benchDB(b *testing.B, driver string) *store.DB {
	b.Helper()
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
	return db
}

// benchParallel runs op for i in [0, b.N) spread over benchCallers
// goroutines, stopping a goroutine at its first error, and reports the
// operations per second as unit.
func benchParallel(b *testing.B, unit string, op func(i int) error) {
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range benchCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < b.N; i += benchCallers {
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), unit)
}

func benchLedger(b *testing.B, driver string) *store.Ledger {
	b.Helper()
	l := store.NewLedger(benchDB(b, driver), store.LedgerOptions{})
	if err := l.Grant(context.Background(), account, 1<<60, ""); err != nil {
		b.Fatal(err)
	}
	return l
}

// benchReserveSettle: benchCallers goroutines reserve and settle on one
// account; reports reserve+settle pairs per second.
func benchReserveSettle(b *testing.B, driver string) {
	l := benchLedger(b, driver)
	ctx := context.Background()
	benchParallel(b, "pairs/s", func(int) error {
		id, err := l.Reserve(ctx, account, 10, "")
		if err != nil {
			return err
		}
		_, err = l.Settle(ctx, id, 3)
		return err
	})
}

func BenchmarkReserveSettle8CallersSQLite(b *testing.B)   { benchReserveSettle(b, "sqlite") }
func BenchmarkReserveSettle8CallersPostgres(b *testing.B) { benchReserveSettle(b, "postgres") }

// benchHostCall: one billable host call through the runner and a CreditGate
// on ledger l; reports the median latency. Run with the memory ledger for the
// baseline: the difference is what a durable ledger adds.
func benchHostCall(b *testing.B, l capability.Ledger) {
	runner := paidEchoRunner(b, l, nil)
	caller := abi.Caller{Tenant: account, Invocation: "inv", Granted: []string{"paid.echo"}}
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		r := runner.HostCall(ctx, &abi.Call{Name: "paid.echo", Payload: []byte(`"hi"`), Seq: i + 1, Caller: caller})
		lat = append(lat, time.Since(t0))
		if r.Status != abi.StatusOK {
			b.Fatalf("%s %s", r.Status, r.Body)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
}

func BenchmarkBillableHostCallMemory(b *testing.B) {
	l := capability.NewMemoryLedger()
	if err := l.Credit(account, 1<<60); err != nil {
		b.Fatal(err)
	}
	benchHostCall(b, l)
}

func BenchmarkBillableHostCallSQLite(b *testing.B)   { benchHostCall(b, benchLedger(b, "sqlite")) }
func BenchmarkBillableHostCallPostgres(b *testing.B) { benchHostCall(b, benchLedger(b, "postgres")) }
