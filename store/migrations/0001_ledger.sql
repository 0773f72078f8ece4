-- The credit ledger. Amounts are integers in the platform's credit unit;
-- times are Unix nanoseconds.
CREATE TABLE ledger_accounts (
    account {{bytes}} PRIMARY KEY,
    balance {{int}} NOT NULL CHECK (balance >= 0),      -- cached sum of ledger_entries.amount
    pending {{int}} NOT NULL CHECK (pending >= 0 AND pending <= balance) -- cached sum of open holds
);
CREATE TABLE ledger_entries (
    id         {{id}}, -- rows are never deleted, so ids are never reused
    account    {{bytes}} NOT NULL REFERENCES ledger_accounts (account),
    kind       TEXT NOT NULL CHECK (kind IN ('grant', 'adjust', 'charge')),
    amount     {{int}} NOT NULL CHECK (amount <> 0),
    hold_id    {{int}},
    idem_key   {{bytes}},
    note       TEXT NOT NULL DEFAULT '',
    created_at {{int}} NOT NULL
);
-- Unique among non-NULL keys; a partial index skips the NULLs of unkeyed rows.
CREATE UNIQUE INDEX ledger_entries_key ON ledger_entries (idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE ledger_holds (
    id          {{id}}, -- rows are never deleted, so ids are never reused
    account     {{bytes}} NOT NULL REFERENCES ledger_accounts (account),
    amount      {{int}} NOT NULL CHECK (amount > 0),
    idem_key    {{bytes}},
    owner       {{bytes}} NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('open', 'settled', 'released', 'swept')),
    charged     {{int}} NOT NULL DEFAULT 0 CHECK (charged >= 0 AND charged <= amount),
    created_at  {{int}} NOT NULL,
    resolved_at {{int}}
);
CREATE UNIQUE INDEX ledger_holds_key ON ledger_holds (idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX ledger_holds_open ON ledger_holds (owner, id) WHERE state = 'open';
CREATE TABLE ledger_owners (
    owner       {{bytes}} PRIMARY KEY,
    lease_until {{int}} NOT NULL
);
