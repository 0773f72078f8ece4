-- Modules by content (runtime.ModuleStore): digest is the hex sha256 of
-- wasm, checked on every put and get; info is the validation report
-- (runtime.ModuleInfo, JSON).
CREATE TABLE modules (
    digest TEXT PRIMARY KEY,
    wasm   {{bytes}} NOT NULL,
    size   {{int}} NOT NULL CHECK (size >= 0),
    info   {{bytes}} NOT NULL
);
