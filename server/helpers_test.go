package server_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/postgres"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

const adminKey = "test-admin-key-0123456789abcdef0123456789"

// serverDBEnv, set to "postgres", runs the platforms of the server's tests
// on Postgres (a fresh schema on the server at WASMHOOKS_TEST_POSTGRES per
// data directory) instead of a SQLite file in it.
const serverDBEnv = "WASMHOOKS_TEST_SERVER_DB"

var (
	pgMu sync.Mutex
	pgAt = map[string]string{} // data directory -> its Postgres schema's URL
)

// postgresAt returns the URL of the Postgres schema standing for the data
// directory dir, made (and dropped when t ends) the first time.
func postgresAt(t *testing.T, dir string) string {
	t.Helper()
	pgMu.Lock()
	defer pgMu.Unlock()
	if u, ok := pgAt[dir]; ok {
		return u
	}
	u := storetest.PostgresURL(t)
	pgAt[dir] = u
	t.Cleanup(func() {
		pgMu.Lock()
		delete(pgAt, dir)
		pgMu.Unlock()
	})
	return u
}

// q rewrites a statement written with $1, $2... for the tests' database
// (SQLite spells them ?1, ?2...): raw queries in the server's tests go
// through it, so the suite runs on both (serverDBEnv).
func q(query string) string {
	if os.Getenv(serverDBEnv) == "postgres" {
		return query
	}
	return strings.ReplaceAll(query, "$", "?")
}

// platform is a server over a real loopback HTTP listener, on a fresh
// SQLite file (or Postgres schema: serverDBEnv).
type platform struct {
	srv   *server.Server
	hs    *httptest.Server
	db    *sql.DB
	admin *client.Client
}

func newPlatform(t *testing.T) *platform {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return newPlatformAt(t, t.TempDir(), key)
}

// newPlatformAt starts a platform on the data in dir, under the host key.
func newPlatformAt(t *testing.T, dir string, key []byte) *platform {
	t.Helper()
	return newPlatformWith(t, dir, key, nil)
}

// newPlatformWith is newPlatformAt with the server's options changed by
// tweak (if not nil) before the server starts.
func newPlatformWith(t *testing.T, dir string, key []byte, tweak func(*server.Options)) *platform {
	t.Helper()
	ctx := context.Background()
	var (
		db  *store.DB
		err error
	)
	if os.Getenv(serverDBEnv) == "postgres" {
		db, err = postgres.Open(ctx, postgresAt(t, dir))
	} else {
		db, err = sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return startPlatform(t, db, key, tweak)
}

// startPlatform starts a server on db, under the host key, on a loopback
// listener of its own.
func startPlatform(t testing.TB, db *store.DB, key []byte, tweak func(*server.Options)) *platform {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	opts := server.Options{DB: db, Runtime: rt, HostKey: key, AdminKey: adminKey,
		MaxBodyBytes: 64 << 10, ExpiryInterval: 100 * time.Millisecond}
	if tweak != nil {
		tweak(&opts)
	}
	srv, err := server.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Drain()
		hs.Close()
		srv.Close(context.Background())
	})
	return &platform{srv: srv, hs: hs, db: db.SQL(), admin: client.New(hs.URL, adminKey)}
}

func (p *platform) key(t testing.TB, role server.Role, tenant string) *client.Client {
	t.Helper()
	k, err := p.admin.CreateKey(context.Background(), role, tenant)
	if err != nil {
		t.Fatal(err)
	}
	return client.New(p.hs.URL, k.Key)
}

// count returns the rows of a server table.
func (p *platform) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := p.db.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func policyWasm(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/guests/policy.wasm")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func chainConfig(pin string) []byte {
	return []byte(`{
  "modules": {"policy": "` + pin + `"},
  "bindings": [
    {"name": "no-secrets", "module": "policy", "point": "message.outbound", "phase": "guard",
     "settings": {"when": "SECRET", "decide": {"action": "block", "reason": "mentions a secret"}}},
    {"name": "approve-shell", "module": "policy", "point": "tool.before", "phase": "guard",
     "settings": {"when": "shell.exec", "decide": {"action": "ask", "reason": "shell needs a human"}}}
  ]
}`)
}

// publishPolicy uploads the policy guest as pubco's policy 1.0.0 with the
// publisher pub and returns its pin.
func publishPolicy(t *testing.T, pub *client.Client) string {
	t.Helper()
	ctx := context.Background()
	mod, err := pub.UploadModule(ctx, "pubco", policyWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := pub.Publish(ctx, "pubco", "policy", "1.0.0", mod.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return client.Pin(v)
}

// expiringChainConfig is chainConfig with the shell approval expiring
// after 200ms, denied.
func expiringChainConfig(pin string) []byte {
	return []byte(strings.Replace(string(chainConfig(pin)), `"reason": "shell needs a human"}}`,
		`"reason": "shell needs a human"}}, "approval": {"timeout": "200ms", "on_expiry": "deny"}`, 1))
}
