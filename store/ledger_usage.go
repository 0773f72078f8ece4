package store

import (
	"context"
	"math"
	"math/big"
)

// LedgerUsage sums an account's ledger entries by kind. A sum past the
// int64 range (grants adjusted away and granted again, say: the balance
// stays in range, the sums of its entries need not) is the nearest bound,
// math.MaxInt64 or math.MinInt64.
type LedgerUsage struct {
	// Granted sums the grants; Adjusted the adjustments (either sign).
	Granted, Adjusted int64
	// Charged sums the charges (settled holds), as a positive amount;
	// Charges counts them.
	Charged, Charges int64
}

// Usage sums account's entries: what it was granted, adjusted and
// charged. An account never credited has zero usage.
func (l *Ledger) Usage(ctx context.Context, account string) (LedgerUsage, error) {
	var u LedgerUsage
	// Each amount is summed as its high and low 32 bits, sums that cannot
	// overflow (SQLite's SUM fails on an overflow, Postgres's CAST), put
	// together in Go.
	rows, err := l.db.sql.QueryContext(ctx, l.db.q(`SELECT kind, CAST(COALESCE(SUM(amount >> 32), 0) AS BIGINT),
		CAST(COALESCE(SUM(amount & 4294967295), 0) AS BIGINT), COUNT(*) FROM ledger_entries WHERE account = $1 GROUP BY kind`), []byte(account))
	if err != nil {
		return u, Unavailable("ledger usage", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var hi, lo, n int64
		if err := rows.Scan(&kind, &hi, &lo, &n); err != nil {
			return u, Unavailable("ledger usage", err)
		}
		sum := new(big.Int).Lsh(big.NewInt(hi), 32)
		sum.Add(sum, big.NewInt(lo))
		switch kind {
		case entryGrant:
			u.Granted = clampInt64(sum)
		case entryAdjust:
			u.Adjusted = clampInt64(sum)
		case entryCharge:
			u.Charged = clampInt64(sum.Neg(sum))
			u.Charges = n
		}
	}
	if err := rows.Err(); err != nil {
		return u, Unavailable("ledger usage", err)
	}
	return u, nil
}

// clampInt64 is x, or the int64 bound nearest to it.
func clampInt64(x *big.Int) int64 {
	switch {
	case x.IsInt64():
		return x.Int64()
	case x.Sign() > 0:
		return math.MaxInt64
	}
	return math.MinInt64
}
