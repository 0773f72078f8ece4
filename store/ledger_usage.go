package store

import (
	"context"
)

// LedgerUsage sums an account's ledger entries by kind.
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
	rows, err := l.db.sql.QueryContext(ctx, l.db.q(`SELECT kind, CAST(COALESCE(SUM(amount), 0) AS BIGINT), COUNT(*) FROM ledger_entries WHERE account = $1 GROUP BY kind`), []byte(account))
	if err != nil {
		return u, Unavailable("ledger usage", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var sum, n int64
		if err := rows.Scan(&kind, &sum, &n); err != nil {
			return u, Unavailable("ledger usage", err)
		}
		switch kind {
		case entryGrant:
			u.Granted += sum
		case entryAdjust:
			u.Adjusted += sum
		case entryCharge:
			u.Charged -= sum
			u.Charges += n
		}
	}
	if err := rows.Err(); err != nil {
		return u, Unavailable("ledger usage", err)
	}
	return u, nil
}
