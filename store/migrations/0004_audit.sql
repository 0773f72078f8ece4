-- Audit chains (audit.Store), one per name (a tenant, with TenantLogs).
-- audit_chains holds each chain's head: the seq its next record gets and
-- the last record's hash; an append locks this row, so writers of one chain
-- take turns and the database, not a process, assigns sequence numbers.
-- The primary key of audit_records is the backstop: never two records with
-- one seq in a chain. Lines are the stored records, hashed and MACed as
-- bytes; prev and hash are copies of theirs, for queries.
CREATE TABLE audit_chains (
    chain {{bytes}} PRIMARY KEY,
    next  {{int}} NOT NULL CHECK (next >= 0),
    head  TEXT NOT NULL
);
CREATE TABLE audit_records (
    chain {{bytes}} NOT NULL REFERENCES audit_chains (chain),
    seq   {{int}} NOT NULL CHECK (seq >= 0),
    prev  TEXT NOT NULL,
    hash  TEXT NOT NULL,
    line  {{bytes}} NOT NULL,
    PRIMARY KEY (chain, seq)
);
