package server

import (
	"context"
	"database/sql"
	"fmt"
)

// The server's own tables, beside the store's (ledger, kv) in the same
// database. They are created here, with CREATE TABLE IF NOT EXISTS, because
// the store package does not keep tenants, keys, modules, versions,
// signatures, bindings or run results yet; when it does, these move there as
// migrations. Every table is prefixed serve_.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS serve_tenants (
		id TEXT PRIMARY KEY,
		require_signatures INTEGER NOT NULL DEFAULT 0,
		created TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_keys (
		hash TEXT PRIMARY KEY,
		id TEXT NOT NULL UNIQUE,
		role TEXT NOT NULL,
		tenant TEXT NOT NULL,
		name TEXT NOT NULL,
		created TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_modules (
		digest TEXT PRIMARY KEY,
		wasm BLOB NOT NULL,
		report TEXT NOT NULL,
		created TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_uploads (
		publisher TEXT NOT NULL,
		digest TEXT NOT NULL REFERENCES serve_modules(digest),
		PRIMARY KEY (publisher, digest))`,
	`CREATE TABLE IF NOT EXISTS serve_versions (
		publisher TEXT NOT NULL,
		name TEXT NOT NULL,
		version TEXT NOT NULL,
		digest TEXT NOT NULL REFERENCES serve_modules(digest),
		manifest_digest TEXT NOT NULL,
		created TEXT NOT NULL,
		PRIMARY KEY (publisher, name, version))`,
	`CREATE TABLE IF NOT EXISTS serve_signing_keys (
		id TEXT PRIMARY KEY,
		publisher TEXT NOT NULL,
		public_key BLOB NOT NULL,
		created TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_signatures (
		publisher TEXT NOT NULL,
		name TEXT NOT NULL,
		version TEXT NOT NULL,
		key_id TEXT NOT NULL REFERENCES serve_signing_keys(id),
		signature BLOB NOT NULL,
		PRIMARY KEY (publisher, name, version, key_id))`,
	`CREATE TABLE IF NOT EXISTS serve_bindings (
		tenant TEXT PRIMARY KEY REFERENCES serve_tenants(id),
		config TEXT NOT NULL,
		updated TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_runs (
		tenant TEXT NOT NULL,
		run TEXT NOT NULL,
		outcome TEXT NOT NULL,
		PRIMARY KEY (tenant, run))`,
	`CREATE TABLE IF NOT EXISTS serve_approvals (
		id TEXT PRIMARY KEY,
		tenant TEXT NOT NULL,
		run TEXT NOT NULL,
		status TEXT NOT NULL,
		view TEXT NOT NULL,
		outcome TEXT,
		expires INTEGER NOT NULL,
		created TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_audit (
		tenant TEXT NOT NULL,
		seq INTEGER NOT NULL,
		record TEXT NOT NULL,
		PRIMARY KEY (tenant, seq))`,
	`CREATE INDEX IF NOT EXISTS serve_approvals_tenant ON serve_approvals (tenant, status)`,
	`CREATE INDEX IF NOT EXISTS serve_approvals_expires ON serve_approvals (status, expires)`,
	// A record's predecessor, for the console's link check (getRun).
	`CREATE INDEX IF NOT EXISTS serve_audit_seq ON serve_audit (seq)`,
}

func migrate(ctx context.Context, db *sql.DB) error {
	for _, q := range schema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("server: schema: %w", err)
		}
	}
	return nil
}
