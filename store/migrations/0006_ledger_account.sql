-- The entries of one account, by kind: Ledger.Usage sums them (the console's
-- credit and usage page) without reading every account's entries.
CREATE INDEX ledger_entries_account ON ledger_entries (account, kind);
