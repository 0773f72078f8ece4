// Package postgres opens the store on a Postgres database (through
// github.com/jackc/pgx/v5): several processes, on several machines, share
// one platform's state.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/wasmhooks/wasmhooks/store"
)

// MaxConns bounds the connections one process opens.
const MaxConns = 16

// migrationLock is the pg_advisory_lock key that serialises migrations
// (the bytes "wasmhook" as a big-endian int64).
const migrationLock = 0x7761736d686f6f6b

// columnTypes fill the placeholders of the schema's DDL.
var columnTypes = store.ColumnTypes{Bytes: "BYTEA", Int: "BIGINT", ID: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"}

// Migrations returns the schema migrations this binary carries.
func Migrations() ([]store.Migration, error) {
	return store.Migrations(columnTypes)
}

// Open connects to the database at url (postgres://user@host:port/db?...)
// and migrates its schema.
func Open(ctx context.Context, url string) (*store.DB, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, store.Unavailable("open", err)
	}
	db.SetMaxOpenConns(MaxConns)
	db.SetMaxIdleConns(MaxConns)
	return store.New(ctx, db, dialect{}, columnTypes, db.PingContext)
}

var _ = stdlib.GetDefaultDriver // registers the "pgx" driver

type dialect struct{}

func (dialect) Name() string { return "postgres" }

func (dialect) Rebind(q string) string { return q }

func (dialect) ForUpdate() string { return " FOR UPDATE" }

func pgCode(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func (dialect) IsUniqueViolation(err error) bool { return pgCode(err) == "23505" }

func (dialect) IsCheckViolation(err error) bool { return pgCode(err) == "23514" }

func (dialect) WritableCTE() bool { return true }

// IsRetryable: serialization_failure, deadlock_detected.
func (dialect) IsRetryable(err error) bool {
	c := pgCode(err)
	return c == "40001" || c == "40P01"
}

// Migrate holds a session advisory lock while fn runs in a transaction on
// the same connection, so one process at a time migrates.
func (dialect) Migrate(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock))
	return store.InTx(ctx, conn, fn)
}

var _ store.Notifier = dialect{}

// Notify implements store.Notifier with pg_notify, delivered at commit.
func (dialect) Notify(ctx context.Context, ex store.Execer, channel, payload string) error {
	_, err := ex.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
	return err
}

// Listen implements store.Notifier: one connection taken from the pool
// LISTENs on channels and waits for notifications; it is discarded, not
// returned to the pool, when Listen ends, so no pooled connection stays
// subscribed.
func (dialect) Listen(ctx context.Context, db *sql.DB, channels []string, ready func(), f func(channel, payload string)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var lerr error
	_ = conn.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		for _, ch := range channels {
			if _, lerr = c.Exec(ctx, `LISTEN `+pgx.Identifier{ch}.Sanitize()); lerr != nil {
				return driver.ErrBadConn
			}
		}
		ready()
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				lerr = err
				return driver.ErrBadConn
			}
			f(n.Channel, n.Payload)
		}
	})
	return lerr
}
