-- The run of each audit record (audit.Entry.Run; '' for a record of no
-- run), a copy of the line's, so that one run's records are found by index
-- instead of by reading the chain (the console's run page). Records stored
-- before this migration have run NULL: they are found by their lines, and
-- the partial index keeps that scan to them.
ALTER TABLE audit_records ADD COLUMN run TEXT;
CREATE INDEX audit_records_run ON audit_records (chain, run, seq);
CREATE INDEX audit_records_legacy ON audit_records (chain, seq) WHERE run IS NULL;
