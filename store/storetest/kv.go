package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/capability/builtin/kvtest"
	"github.com/wasmhooks/wasmhooks/store"
)

// RunKV runs the KVStore conformance kit (capability/builtin/kvtest) on the
// database's kv store, then what the durable store adds: bounds, expiry, a
// closed database.
func RunKV(t *testing.T, open Open) {
	ctx := context.Background()
	sc := builtin.KVScope{Tenant: "acme", Hook: "h1"}
	t.Run("conformance", func(t *testing.T) {
		kvtest.Run(t, func(t *testing.T) kvtest.Harness {
			return kvtest.Harness{Store: store.NewKV(open(t), store.KVOptions{MaxKeysPerScope: 20}), MaxKeysPerScope: 20}
		})
	})
	t.Run("bounds", func(t *testing.T) {
		kv := store.NewKV(open(t), store.KVOptions{MaxValueBytes: 16})
		for _, c := range []struct{ key, value string }{
			{"k", strings.Repeat("x", 17)}, {"", "1"}, {strings.Repeat("k", builtin.MaxKeyBytes+1), "1"},
		} {
			if err := kv.Set(ctx, sc, c.key, []byte(c.value)); !errors.Is(err, store.ErrValueTooLarge) {
				t.Errorf("Set(%d-byte key, %d-byte value): %v", len(c.key), len(c.value), err)
			}
		}
		must(t, kv.Set(ctx, sc, "k", []byte(strings.Repeat("x", 16))))
	})
	t.Run("expiry", func(t *testing.T) {
		now := time.Unix(1_000_000, 0)
		kv := store.NewKV(open(t), store.KVOptions{MaxKeysPerScope: 2, TTL: time.Minute, Now: func() time.Time { return now }})
		must(t, kv.Set(ctx, sc, "a", []byte("1")))
		must(t, kv.Set(ctx, sc, "b", []byte("2")))
		if err := kv.Set(ctx, sc, "c", []byte("3")); !errors.Is(err, builtin.ErrKVFull) {
			t.Fatalf("third key: %v", err)
		}
		now = now.Add(30 * time.Second)
		must(t, kv.Set(ctx, sc, "b", []byte("2'"))) // renews b
		now = now.Add(45 * time.Second)             // a expired, b live
		if _, ok, err := kv.Get(ctx, sc, "a"); ok || err != nil {
			t.Fatalf("expired a: %v, %v", ok, err)
		}
		if v, ok, _ := kv.Get(ctx, sc, "b"); !ok || string(v) != "2'" {
			t.Fatalf("b: %q, %v", v, ok)
		}
		must(t, kv.Set(ctx, sc, "c", []byte("3"))) // a no longer counts
		if n, err := kv.SweepExpired(ctx, now); err != nil || n != 1 {
			t.Fatalf("SweepExpired = %d, %v; want 1", n, err)
		}
	})
	t.Run("closed database is unavailable", func(t *testing.T) {
		db := open(t)
		kv := store.NewKV(db, store.KVOptions{})
		db.Close()
		if err := kv.Set(ctx, sc, "k", []byte("1")); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Set: %v", err)
		}
		if _, _, err := kv.Get(ctx, sc, "k"); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Get: %v", err)
		}
	})
}
