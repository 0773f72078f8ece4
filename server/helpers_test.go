package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
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
	srv    *server.Server
	hs     *httptest.Server
	db     *sql.DB
	rebind func(string) string // the database's placeholders for $1, $2...
	admin  *client.Client
}

// q rewrites a statement written with $1, $2... for p's database: a raw
// query of a test that may run on a node of a cluster (always Postgres)
// whatever serverDBEnv says.
func (p *platform) q(query string) string { return p.rebind(query) }

func newPlatform(t *testing.T) *platform {
	t.Helper()
	return newPlatformWith(t, t.TempDir(), hostKey(), nil)
}

// newPlatformTweaked is newPlatform with the server's options changed by
// tweak before the server starts.
func newPlatformTweaked(t *testing.T, tweak func(*server.Options)) *platform {
	t.Helper()
	return newPlatformWith(t, t.TempDir(), hostKey(), tweak)
}

// hostKey returns a fresh random host key.
func hostKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return key
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
	return startPlatform(t, platformDB(t, dir), key, tweak)
}

// platformDB opens the database of the data in dir: its SQLite file, or
// its Postgres schema (serverDBEnv).
func platformDB(t *testing.T, dir string) *store.DB {
	t.Helper()
	if os.Getenv(serverDBEnv) == "postgres" {
		return postgresTarget.OpenAt(t, postgresAt(t, dir))
	}
	return openSQLite(t, dir)
}

// The tests' databases: SQLite files and Postgres schemas.
var (
	sqliteTarget   = storetest.Target{Open: sqlite.Open}
	postgresTarget = storetest.Target{Open: postgres.Open}
)

// openSQLite opens the SQLite file state.db in dir (made if missing),
// closed when t ends.
func openSQLite(t testing.TB, dir string) *store.DB {
	t.Helper()
	return sqliteTarget.OpenAt(t, filepath.Join(dir, "state.db"))
}

// newRuntime returns a runtime with the default configuration, closed when
// t ends.
func newRuntime(t testing.TB) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(context.Background(), runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

// startPlatform starts a server on db, under the host key, on a loopback
// listener of its own.
func startPlatform(t testing.TB, db *store.DB, key []byte, tweak func(*server.Options)) *platform {
	t.Helper()
	ctx := context.Background()
	opts := server.Options{DB: db, Runtime: newRuntime(t), HostKey: key, AdminKey: adminKey,
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
	return &platform{srv: srv, hs: hs, db: db.SQL(), rebind: db.Dialect().Rebind, admin: client.New(hs.URL, adminKey)}
}

// stopPlatform stops p's server as serve does at shutdown.
func stopPlatform(t *testing.T, p *platform) {
	t.Helper()
	p.srv.Drain()
	p.hs.Close()
	if err := p.srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// key makes an API key of role for tenant and returns a client with it.
func (p *platform) key(t testing.TB, role server.Role, tenant string) *client.Client {
	t.Helper()
	c, _ := p.keyDoc(t, role, tenant)
	return c
}

// keyDoc is key that returns the key's document (its id) as well.
func (p *platform) keyDoc(t testing.TB, role server.Role, tenant string) (*client.Client, *server.KeyDoc) {
	t.Helper()
	k, err := p.admin.CreateKey(context.Background(), role, tenant)
	if err != nil {
		t.Fatal(err)
	}
	return client.New(p.hs.URL, k.Key), k
}

// createTenant creates the tenant id on p with the admin key, requiring
// signatures if signed.
func (p *platform) createTenant(t testing.TB, id string, signed bool) {
	t.Helper()
	if err := p.admin.CreateTenant(context.Background(), id, signed); err != nil {
		t.Fatal(err)
	}
}

// newOperator creates the tenant id on p and returns an operator key of
// it, with the key's document.
func newOperator(t testing.TB, p *platform, id string) (*client.Client, *server.KeyDoc) {
	t.Helper()
	p.createTenant(t, id, false)
	return p.keyDoc(t, server.RoleOperator, id)
}

// tenantKeys is a tenant of a platform with the keys the tests use: the
// publisher pubco's, and the tenant's operator and runtime keys.
type tenantKeys struct {
	id          string
	pub, op, rt *client.Client
	rtDoc       *server.KeyDoc // the runtime key's document
	admin       *client.Client // the platform's
}

// newTenant creates the tenant id on p (requiring signatures if signed)
// and the keys of tenantKeys.
func newTenant(t testing.TB, p *platform, id string, signed bool) tenantKeys {
	t.Helper()
	p.createTenant(t, id, signed)
	a := tenantKeys{id: id, pub: p.key(t, server.RolePublisher, "pubco"), op: p.key(t, server.RoleOperator, id), admin: p.admin}
	a.rt, a.rtDoc = p.keyDoc(t, server.RoleRuntime, id)
	return a
}

// bind binds the chain configuration cfg for the tenant with its operator
// key.
func (a tenantKeys) bind(t testing.TB, cfg []byte) {
	t.Helper()
	if _, err := a.op.BindChain(context.Background(), a.id, cfg); err != nil {
		t.Fatal(err)
	}
}

// grant grants the tenant amount credit with the idempotency key key.
func (a tenantKeys) grant(t testing.TB, amount int64, key string) {
	t.Helper()
	if _, err := a.admin.GrantCredit(context.Background(), a.id, amount, key); err != nil {
		t.Fatal(err)
	}
}

// newAsking is the tenant acme bound to chainConfig of the policy guest.
func newAsking(t testing.TB, p *platform) tenantKeys {
	t.Helper()
	return newBound(t, p, chainConfig)
}

// newBound is the tenant acme bound to config(pin) of the policy guest
// published.
func newBound(t testing.TB, p *platform, config func(pin string) []byte) tenantKeys {
	t.Helper()
	a := newTenant(t, p, "acme", false)
	a.bind(t, config(publishPolicy(t, a.pub)))
	return a
}

// pending runs ctxDoc's tool at tool.before and returns the approval id.
func (a tenantKeys) pending(t testing.TB, run string, ctxDoc map[string]any) string {
	t.Helper()
	out, err := a.rt.Run(context.Background(), a.id, "tool.before", ctxDoc, run)
	if err != nil || out.Verdict != "pending" || out.Approval == nil {
		t.Fatalf("pending: %+v %v", out, err)
	}
	return out.Approval.ID
}

// count returns the rows of a server table.
func (p *platform) count(t *testing.T, table string) int {
	t.Helper()
	return queryValue[int](t, p, `SELECT COUNT(*) FROM `+table)
}

// queryValue returns the one value of the one row that query (written with
// $1, $2...) returns on p's database; an error (no row too) fails t.
func queryValue[T any](t testing.TB, p *platform, query string, args ...any) T {
	t.Helper()
	var v T
	if err := p.db.QueryRow(p.q(query), args...).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// exec runs a statement written with $1, $2... on p's database (as an
// attacker, or a node that died, could have written it); an error fails t.
func (p *platform) exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := p.db.Exec(p.q(query), args...); err != nil {
		t.Fatal(err)
	}
}

// httpGet is httpDo of a GET without a body.
func httpGet(t *testing.T, url, key string, header http.Header) (int, []byte, http.Header) {
	t.Helper()
	return httpDo(t, "GET", url, key, header, "")
}

// httpDo sends a request with header, key (if not empty) and a JSON body
// (if not empty), and returns the response's status, body and headers.
func httpDo(t *testing.T, method, url, key string, header http.Header, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// guestWasm reads the test guest name (policy, scripted) of
// ../testdata/guests.
func guestWasm(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/guests/" + name + ".wasm")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func policyWasm(t testing.TB) []byte {
	t.Helper()
	return guestWasm(t, "policy")
}

// The bindings of chainConfig, of the module "policy" (the policy guest):
// noSecrets blocks a message that mentions SECRET, approveShell asks a
// human for shell.exec.
const (
	noSecrets = `{"name": "no-secrets", "module": "policy", "point": "message.outbound", "phase": "guard",
     "settings": {"when": "SECRET", "decide": {"action": "block", "reason": "mentions a secret"}}}`
	approveShell = `{"name": "approve-shell", "module": "policy", "point": "tool.before", "phase": "guard",
     "settings": {"when": "shell.exec", "decide": {"action": "ask", "reason": "shell needs a human"}}}`
)

// chainConfig is the chain of noSecrets and approveShell, the policy guest
// pinned to pin.
func chainConfig(pin string) []byte {
	return []byte(`{
  "modules": {"policy": "` + pin + `"},
  "bindings": [
    ` + noSecrets + `,
    ` + approveShell + `
  ]
}`)
}

// publishPolicy uploads the policy guest as pubco's policy 1.0.0 with the
// publisher pub and returns its pin.
func publishPolicy(t testing.TB, pub *client.Client) string {
	t.Helper()
	return client.Pin(publishGuest(t, pub, "policy", "policy"))
}

// publishGuest uploads the test guest (guestWasm) as pubco's module name
// 1.0.0 with the publisher pub and returns the version.
func publishGuest(t testing.TB, pub *client.Client, guest, name string) *server.VersionDoc {
	t.Helper()
	ctx := context.Background()
	mod, err := pub.UploadModule(ctx, "pubco", guestWasm(t, guest))
	if err != nil {
		t.Fatal(err)
	}
	v, err := pub.Publish(ctx, "pubco", name, "1.0.0", mod.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// expiringChainConfig is chainConfig with the shell approval expiring
// after 200ms, denied.
func expiringChainConfig(pin string) []byte {
	return []byte(strings.Replace(string(chainConfig(pin)), `"reason": "shell needs a human"}}`,
		`"reason": "shell needs a human"}}, "approval": {"timeout": "200ms", "on_expiry": "deny"}`, 1))
}

// addSigned adds a fresh signing key to publisher with its key pub and
// signs publisher's name 1.0.0 with it; it returns the key's id and public
// half.
func addSigned(t testing.TB, pub *client.Client, publisher, name string) (string, ed25519.PublicKey) {
	t.Helper()
	ctx := context.Background()
	pk, sk, _ := ed25519.GenerateKey(rand.Reader)
	kid, err := pub.AddSigningKey(ctx, publisher, pk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Sign(ctx, publisher, name, "1.0.0", kid, sk); err != nil {
		t.Fatal(err)
	}
	return kid, pk
}

// newPublicKey returns the public half of a fresh ed25519 key.
func newPublicKey(t testing.TB) ed25519.PublicKey {
	t.Helper()
	k, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// waited is what a client waiting for an approval's outcome received: the
// outcome or the error, and, from a stream, its events ("name:status").
type waited struct {
	out    *client.Outcome
	err    error
	events []string
}

// waiting is a client's wait for an approval of acme's outcome, running in
// a goroutine.
type waiting struct {
	done    chan waited
	started chan struct{} // closed at the stream's status event
}

// waitStream waits up to secs for approval id's outcome over its event
// stream with cl.
func waitStream(ctx context.Context, cl *client.Client, id string, secs int) *waiting {
	w := &waiting{done: make(chan waited, 1), started: make(chan struct{})}
	go func() {
		var events []string
		o, err := cl.WaitResult(ctx, "acme", id, secs, func(e client.Event) {
			events = append(events, e.Name+":"+e.Result.Status)
			if e.Name == server.EventStatus {
				close(w.started)
			}
		})
		w.done <- waited{o, err, events}
	}()
	return w
}

// waitPoll waits up to secs for approval id's outcome by long poll with cl.
func waitPoll(ctx context.Context, cl *client.Client, id string, secs int) *waiting {
	w := &waiting{done: make(chan waited, 1), started: make(chan struct{})}
	go func() {
		o, err := cl.Result(ctx, "acme", id, secs)
		w.done <- waited{out: o, err: err}
	}()
	return w
}

// streamWaiting makes acme bound (newAsking) with an approval pending for
// run (ctxDoc at tool.before), and its runtime key waiting up to secs for
// the outcome on the approval's event stream, begun.
func streamWaiting(t *testing.T, p *platform, run string, ctxDoc map[string]any, secs int) (tenantKeys, string, *waiting) {
	t.Helper()
	a := newAsking(t, p)
	id := a.pending(t, run, ctxDoc)
	w := waitStream(context.Background(), a.rt, id, secs)
	w.begun(t, 30*time.Second)
	return a, id, w
}

// begun waits up to d for the stream's status event; the wait ending
// first fails t.
func (w *waiting) begun(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case <-w.started:
	case g := <-w.done:
		t.Fatalf("the wait ended before its status event: %+v %v %v", g.out, g.err, g.events)
	case <-time.After(d):
		t.Fatal("no status event")
	}
}

// result returns what the wait received, waiting up to d for it.
func (w *waiting) result(t testing.TB, what string, d time.Duration) waited {
	t.Helper()
	select {
	case g := <-w.done:
		return g
	case <-time.After(d):
		t.Fatalf("%s: got nothing in %v", what, d)
		return waited{}
	}
}

// eventually calls try, every interval, until it returns nil; if it still
// returns an error after d, t fails with what and that error.
func eventually(t testing.TB, d, interval time.Duration, what string, try func() error) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(interval) {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// retireKey revokes (how = "revoke") or rotates (how = "rotate") the key
// id with admin.
func retireKey(t testing.TB, admin *client.Client, how, id string) {
	t.Helper()
	var err error
	switch how {
	case "revoke":
		err = admin.RevokeKey(context.Background(), id)
	case "rotate":
		_, err = admin.RotateKey(context.Background(), id)
	default:
		t.Fatalf("retire a key how? %q", how)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// revokeAdminsBut revokes, with the admin key self, every admin key but
// those keep names.
func revokeAdminsBut(t testing.TB, self *client.Client, keep ...string) {
	t.Helper()
	ctx := context.Background()
	keys, err := self.Keys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Role == server.RoleAdmin && !slices.Contains(keep, k.ID) {
			if err := self.RevokeKey(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}
