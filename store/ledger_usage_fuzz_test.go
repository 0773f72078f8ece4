package store_test

import (
	"context"
	"encoding/binary"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/postgres"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// FuzzLedgerUsage runs a sequence of grants, adjustments and charges
// (reserve then settle) of any amounts on one account of a durable ledger
// (SQLite; Postgres too with WASMHOOKS_TEST_POSTGRES set) against a model:
// a refused entry changes nothing, the balance is the model's, and Usage
// (a tenant's GET .../usage) never fails and gives the exact sums of the
// entries, or the int64 bound nearest to a sum past the range. Each op is 9
// bytes: a kind (grant, adjust, charge: its value mod 3) and a big-endian
// amount.
func FuzzLedgerUsage(f *testing.F) {
	ctx := context.Background()
	ledgers := map[string]*store.Ledger{}
	db, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "state.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	ledgers["sqlite"] = store.NewLedger(db, store.LedgerOptions{})
	if os.Getenv(storetest.PostgresEnv) != "" {
		pg, err := postgres.Open(ctx, storetest.PostgresURL(f))
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { pg.Close() })
		ledgers["postgres"] = store.NewLedger(pg, store.LedgerOptions{})
	}

	op := func(kind byte, amount int64) []byte {
		return binary.BigEndian.AppendUint64([]byte{kind}, uint64(amount))
	}
	seq := func(ops ...[]byte) []byte {
		var b []byte
		for _, o := range ops {
			b = append(b, o...)
		}
		return b
	}
	const big62 = 1 << 62
	f.Add(seq(op(0, 100), op(2, 30), op(1, -20), op(1, 5)))
	f.Add(seq(op(0, math.MaxInt64), op(0, 1), op(1, math.MinInt64), op(1, -math.MaxInt64)))
	// The sums past the range with the balance inside it: grants adjusted
	// away and granted again (Usage failed with SQLite's "integer
	// overflow", a 500 from GET .../usage).
	f.Add(seq(op(0, big62), op(1, -big62), op(0, big62), op(1, -big62), op(0, big62), op(1, -big62)))
	f.Add(seq(op(0, math.MaxInt64), op(2, math.MaxInt64), op(0, math.MaxInt64), op(2, math.MaxInt64)))
	f.Add(seq(op(1, 7), op(2, 0), op(0, -1), op(2, 8)))

	var n int
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 9*64 {
			return
		}
		n++
		for name, l := range ledgers {
			account := "fuzz-" + strconv.Itoa(n)
			var balance int64
			sums := map[string]*big.Int{"grant": new(big.Int), "adjust": new(big.Int), "charge": new(big.Int)}
			var charges int64
			for i := 0; i+9 <= len(ops); i += 9 {
				kind, amount := ops[i]%3, int64(binary.BigEndian.Uint64(ops[i+1:]))
				key := account + "-" + strconv.Itoa(i)
				switch kind {
				case 0:
					if err := l.Grant(ctx, account, amount, key); err == nil {
						if amount <= 0 || balance > math.MaxInt64-amount {
							t.Fatalf("%s: grant of %d to %d accepted", name, amount, balance)
						}
						balance += amount
						sums["grant"].Add(sums["grant"], big.NewInt(amount))
					}
				case 1:
					if err := l.Adjust(ctx, account, amount, key, "fuzz"); err == nil {
						if amount == 0 || balance+amount < 0 || amount > 0 && balance > math.MaxInt64-amount {
							t.Fatalf("%s: adjustment of %d to %d accepted", name, amount, balance)
						}
						balance += amount
						sums["adjust"].Add(sums["adjust"], big.NewInt(amount))
					}
				case 2:
					id, err := l.Reserve(ctx, account, amount, key)
					if err != nil {
						break
					}
					if amount <= 0 || amount > balance {
						t.Fatalf("%s: reservation of %d of %d accepted", name, amount, balance)
					}
					charged, err := l.Settle(ctx, id, amount)
					if err != nil || charged != amount {
						t.Fatalf("%s: settling %d: %d, %v", name, amount, charged, err)
					}
					balance -= charged
					sums["charge"].Add(sums["charge"], big.NewInt(charged))
					charges++
				}
				if avail, pending, err := l.Balance(ctx, account); err != nil || avail != balance || pending != 0 {
					t.Fatalf("%s: op %d: balance %d pending %d (%v), want %d", name, i/9, avail, pending, err, balance)
				}
			}
			u, err := l.Usage(ctx, account)
			want := store.LedgerUsage{Granted: clamp(sums["grant"]), Adjusted: clamp(sums["adjust"]), Charged: clamp(sums["charge"]), Charges: charges}
			if err != nil || u != want {
				t.Fatalf("%s: usage %+v (%v), want %+v", name, u, err, want)
			}
		}
	})
}

// clamp is x, or the int64 bound nearest to it.
func clamp(x *big.Int) int64 {
	if x.IsInt64() {
		return x.Int64()
	}
	if x.Sign() > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}
