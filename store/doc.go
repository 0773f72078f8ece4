// Package store keeps the runtime's state durable in a SQL database: the
// credit ledger (capability.Ledger), the kv store (builtin.KVStore), pending
// approvals (chain.ApprovalStore), audit chains (audit.Store, one per
// tenant with TenantAudit) and modules by digest (runtime.ModuleStore), on
// SQLite (package store/sqlite, one file, no server) or Postgres (package
// store/postgres, several processes and machines on one database).
//
// The library packages declare the interfaces and never import this one
// (internal/archtest checks it); a platform opens a database and hands the
// store's implementations to the runner:
//
//	db, err := sqlite.Open(ctx, "state.db") // or postgres.Open(ctx, url)
//	ledger := store.NewLedger(db, store.LedgerOptions{})
//	go ledger.KeepAlive(ctx, 0) // renews this process's lease on its holds
//
// Every change is one database transaction whose conditions are checked by
// the database (conditional updates, row locks, unique keys), never by a
// process mutex, so any number of processes may share a database. Schema
// migrations are embedded in the binary and applied at Open, by one process
// at a time; a database whose schema is newer than the binary is refused with
// ErrSchemaTooNew. Failures carry a stable code (*Error). DB.Notify and
// DB.Listen carry hints between the processes sharing a Postgres database
// (LISTEN and NOTIFY, delivered at commit); SQLite carries none, and its
// readers poll.
package store
