-- The credit ledger. Amounts are integers in the platform's credit unit;
-- times are Unix nanoseconds.
CREATE TABLE ledger_accounts (
    account BLOB PRIMARY KEY,
    balance INTEGER NOT NULL CHECK (balance >= 0),      -- cached sum of ledger_entries.amount
    pending INTEGER NOT NULL CHECK (pending >= 0 AND pending <= balance) -- cached sum of open holds
);
CREATE TABLE ledger_entries (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    account    BLOB NOT NULL REFERENCES ledger_accounts (account),
    kind       TEXT NOT NULL CHECK (kind IN ('grant', 'adjust', 'charge')),
    amount     INTEGER NOT NULL CHECK (amount <> 0),
    hold_id    INTEGER,
    idem_key   BLOB UNIQUE,
    note       TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);
CREATE INDEX ledger_entries_account ON ledger_entries (account);
CREATE TABLE ledger_holds (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account     BLOB NOT NULL REFERENCES ledger_accounts (account),
    amount      INTEGER NOT NULL CHECK (amount > 0),
    idem_key    BLOB UNIQUE,
    owner       BLOB NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('open', 'settled', 'released', 'swept')),
    charged     INTEGER NOT NULL DEFAULT 0 CHECK (charged >= 0 AND charged <= amount),
    created_at  INTEGER NOT NULL,
    resolved_at INTEGER
);
CREATE INDEX ledger_holds_open ON ledger_holds (owner, id) WHERE state = 'open';
CREATE TABLE ledger_owners (
    owner       BLOB PRIMARY KEY,
    lease_until INTEGER NOT NULL
);
