-- Approvals (chain.ApprovalStore). data is the approval as the chain sealed
-- it (JSON); a resolved approval keeps only its id and state, a tombstone.
-- A claim (a resume under way) has an owner, the process's random name, and
-- a lease; once the lease ends another process may claim it. Times are Unix
-- nanoseconds.
CREATE TABLE approvals (
    id          {{bytes}} PRIMARY KEY,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'done')),
    data        {{bytes}},
    expires_at  {{int}} NOT NULL,
    owner       {{bytes}},
    lease_until {{int}},
    CHECK ((state = 'done') = (data IS NULL)),
    CHECK ((state = 'claimed') = (owner IS NOT NULL AND lease_until IS NOT NULL))
);
CREATE INDEX approvals_due ON approvals (expires_at) WHERE state <> 'done';
