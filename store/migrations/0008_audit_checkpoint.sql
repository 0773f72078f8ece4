-- The checkpoint (audit.Checkpoint) of each audit chain as its last
-- verification left it: the records it verified, the last one's hash, and
-- the MAC of the two under the chain's checkpoint key, which the database
-- does not hold. A verification checks the chain against it (records cut
-- from the end, the chain rewritten before it) and goes on from it,
-- reading only the records after it; it is replaced only by one counting
-- more records. It is kept apart from audit_chains, which every append
-- rewrites.
CREATE TABLE audit_checkpoints (
    chain   {{bytes}} PRIMARY KEY REFERENCES audit_chains (chain),
    records {{int}} NOT NULL CHECK (records >= 0),
    head    TEXT NOT NULL,
    mac     TEXT NOT NULL
);
