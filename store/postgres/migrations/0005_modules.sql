-- Modules by content (runtime.ModuleStore): digest is the hex sha256 of
-- wasm, checked on every put and get; info is the validation report
-- (runtime.ModuleInfo, JSON).
CREATE TABLE modules (
    digest TEXT PRIMARY KEY,
    wasm   BYTEA NOT NULL,
    size   BIGINT NOT NULL CHECK (size >= 0),
    info   BYTEA NOT NULL
);
