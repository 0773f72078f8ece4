// Package storetest finds the databases the store's tests run against.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// PostgresEnv names the environment variable holding the connection URL of
// the Postgres server tests use.
const PostgresEnv = "WASMHOOKS_TEST_POSTGRES"

// RequirePostgres skips t, saying how to start a server, when PostgresEnv is
// unset; under CI=true it fails t instead, so CI never passes by skipping.
func RequirePostgres(t testing.TB) {
	t.Helper()
	if os.Getenv(PostgresEnv) != "" {
		return
	}
	const how = PostgresEnv + " is unset: start a throwaway server with `make postgres` " +
		"and export the URL it prints (or run `make test-postgres`)"
	if os.Getenv("CI") == "true" {
		t.Fatal(how)
	}
	t.Skip(how)
}

// PostgresURL returns the URL of a fresh, empty schema on the test server,
// dropped when t ends. With PostgresEnv unset it skips t, saying how to start
// a server; under CI=true it fails t instead, so CI never passes by skipping.
func PostgresURL(t testing.TB) string {
	t.Helper()
	RequirePostgres(t)
	base := os.Getenv(PostgresEnv)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		admin.Close()
		t.Fatalf("postgres at %s: %v", PostgresEnv, err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
		admin.Close()
	})
	q := u.Query()
	q.Set("search_path", schema)
	// Each test's connections carry its schema's name, so that a test
	// that looks through pg_stat_activity (or ends a backend it finds
	// there) sees only its own, not those of tests running beside it in
	// the same database.
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
