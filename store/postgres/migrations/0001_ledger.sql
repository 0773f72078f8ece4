-- The credit ledger. Amounts are integers in the platform's credit unit;
-- times are Unix nanoseconds.
CREATE TABLE ledger_accounts (
    account BYTEA PRIMARY KEY,
    balance BIGINT NOT NULL CHECK (balance >= 0),      -- cached sum of ledger_entries.amount
    pending BIGINT NOT NULL CHECK (pending >= 0 AND pending <= balance) -- cached sum of open holds
);
CREATE TABLE ledger_entries (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account    BYTEA NOT NULL REFERENCES ledger_accounts (account),
    kind       TEXT NOT NULL CHECK (kind IN ('grant', 'adjust', 'charge')),
    amount     BIGINT NOT NULL CHECK (amount <> 0),
    hold_id    BIGINT,
    idem_key   BYTEA,
    note       TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);
-- Unique among non-NULL keys; a partial index skips the NULLs of unkeyed rows.
CREATE UNIQUE INDEX ledger_entries_key ON ledger_entries (idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE ledger_holds (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account     BYTEA NOT NULL REFERENCES ledger_accounts (account),
    amount      BIGINT NOT NULL CHECK (amount > 0),
    idem_key    BYTEA,
    owner       BYTEA NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('open', 'settled', 'released', 'swept')),
    charged     BIGINT NOT NULL DEFAULT 0 CHECK (charged >= 0 AND charged <= amount),
    created_at  BIGINT NOT NULL,
    resolved_at BIGINT
);
CREATE UNIQUE INDEX ledger_holds_key ON ledger_holds (idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX ledger_holds_open ON ledger_holds (owner, id) WHERE state = 'open';
CREATE TABLE ledger_owners (
    owner       BYTEA PRIMARY KEY,
    lease_until BIGINT NOT NULL
);
