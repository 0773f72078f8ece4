package server

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/postgres"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// BenchmarkRateLimit is what one request's rate limit costs, by scope: the
// in-memory buckets (RateLimitNode) and the shared bucket
// (RateLimitCluster: the in-memory first check, then the upsert) on SQLite
// and on Postgres (skipped without WASMHOOKS_TEST_POSTGRES). One caller,
// 100 keys in turn, a limit never reached (every request is a write).
// BENCHMARKS.md has the figures and the command.
func BenchmarkRateLimit(b *testing.B) {
	rl := RateLimit{PerSecond: 1e9, Burst: 1 << 30}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "key_" + strconv.Itoa(i)
	}
	b.Run("memory", func(b *testing.B) {
		l := newLimiter(rl)
		for i := 0; b.Loop(); i++ {
			if ok, _ := l.allow(keys[i%len(keys)], time.Now()); !ok {
				b.Fatal("refused")
			}
		}
	})
	for _, c := range []struct {
		name string
		open func(b *testing.B) *store.DB
	}{
		{"sqlite", func(b *testing.B) *store.DB {
			return storetest.Target{Open: sqlite.Open}.OpenAt(b, filepath.Join(b.TempDir(), "state.db"))
		}},
		{"postgres", func(b *testing.B) *store.DB {
			return storetest.Target{Open: postgres.Open}.OpenAt(b, storetest.PostgresURL(b))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			db := c.open(b)
			if err := migrate(ctx, db); err != nil {
				b.Fatal(err)
			}
			l := newSharedLimiter(newSQLDB(db), rl)
			for i := 0; b.Loop(); i++ {
				if ok, _, err := l.allow(ctx, keys[i%len(keys)], time.Now()); !ok || err != nil {
					b.Fatal("refused", err)
				}
			}
		})
	}
}
