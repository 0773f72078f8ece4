-- The credit ledger. Amounts are integers in the platform's credit unit;
-- times are Unix nanoseconds.
CREATE TABLE ledger_accounts (
    account BLOB PRIMARY KEY,
    balance INTEGER NOT NULL CHECK (balance >= 0),      -- cached sum of ledger_entries.amount
    pending INTEGER NOT NULL CHECK (pending >= 0 AND pending <= balance) -- cached sum of open holds
);
CREATE TABLE ledger_entries (
    id         INTEGER PRIMARY KEY, -- rowid; rows are never deleted, so ids are never reused
    account    BLOB NOT NULL REFERENCES ledger_accounts (account),
    kind       TEXT NOT NULL CHECK (kind IN ('grant', 'adjust', 'charge')),
    amount     INTEGER NOT NULL CHECK (amount <> 0),
    hold_id    INTEGER,
    idem_key   BLOB,
    note       TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);
-- Unique among non-NULL keys; a partial index skips the NULLs of unkeyed rows.
CREATE UNIQUE INDEX ledger_entries_key ON ledger_entries (idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE ledger_holds (
    id          INTEGER PRIMARY KEY, -- rowid; rows are never deleted, so ids are never reused
    account     BLOB NOT NULL REFERENCES ledger_accounts (account),
    amount      INTEGER NOT NULL CHECK (amount > 0),
    idem_key    BLOB,
    owner       BLOB NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('open', 'settled', 'released', 'swept')),
    charged     INTEGER NOT NULL DEFAULT 0 CHECK (charged >= 0 AND charged <= amount),
    created_at  INTEGER NOT NULL,
    resolved_at INTEGER
);
CREATE UNIQUE INDEX ledger_holds_key ON ledger_holds (idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX ledger_holds_open ON ledger_holds (owner, id) WHERE state = 'open';
CREATE TABLE ledger_owners (
    owner       BLOB PRIMARY KEY,
    lease_until INTEGER NOT NULL
);
