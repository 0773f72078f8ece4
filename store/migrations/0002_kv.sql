-- The kv store. A scope is (tenant, hook), chosen by the host from the
-- call's caller; expires_at is Unix nanoseconds, NULL for never.
CREATE TABLE kv_scopes (
    tenant {{bytes}} NOT NULL,
    hook   {{bytes}} NOT NULL,
    PRIMARY KEY (tenant, hook)
);
CREATE TABLE kv_values (
    tenant     {{bytes}} NOT NULL,
    hook       {{bytes}} NOT NULL,
    key        {{bytes}} NOT NULL,
    value      {{bytes}} NOT NULL,
    expires_at {{int}},
    PRIMARY KEY (tenant, hook, key),
    FOREIGN KEY (tenant, hook) REFERENCES kv_scopes (tenant, hook)
);
CREATE INDEX kv_values_expiry ON kv_values (expires_at) WHERE expires_at IS NOT NULL;
