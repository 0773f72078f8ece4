package store

import (
	"context"
	"database/sql"
	"errors"
)

// Notifier is implemented by a Dialect whose database carries notifications
// between the processes that share it (Postgres's LISTEN and NOTIFY).
// SQLite's does not: processes sharing a file read it again instead.
type Notifier interface {
	// Notify queues payload on channel in the transaction tx (nil: at
	// once); it is delivered when tx commits, and not if it rolls back.
	Notify(ctx context.Context, ex Execer, channel, payload string) error
	// Listen holds one connection of db listening on channels and calls f
	// with each notification, in order, until ctx ends or the connection
	// fails; it returns why. ready is called once the connection listens.
	Listen(ctx context.Context, db *sql.DB, channels []string, ready func(), f func(channel, payload string)) error
}

// Execer is what a statement is executed on: a *sql.DB or a *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// ErrNoNotifications is Listen's error on a database that carries no
// notifications (SQLite).
var ErrNoNotifications = errors.New("store: this database carries no notifications between processes")

// Notify sends payload on channel to every process listening on db (Listen),
// when ex (a transaction, or db's handle) commits. On a database without
// notifications it does nothing: readers there poll.
func (db *DB) Notify(ctx context.Context, ex Execer, channel, payload string) error {
	n, ok := db.d.(Notifier)
	if !ok {
		return nil
	}
	if ex == nil {
		ex = db.sql
	}
	return n.Notify(ctx, ex, channel, payload)
}

// Listen calls f with every notification sent on channels by any process
// (Notify), until ctx ends or the connection fails, and returns why; ready,
// if not nil, is called once listening has begun (notifications sent before
// it may be missed: read the state again then). On a database without
// notifications it returns ErrNoNotifications at once.
func (db *DB) Listen(ctx context.Context, channels []string, ready func(), f func(channel, payload string)) error {
	n, ok := db.d.(Notifier)
	if !ok {
		return ErrNoNotifications
	}
	if ready == nil {
		ready = func() {}
	}
	return n.Listen(ctx, db.sql, channels, ready, f)
}
