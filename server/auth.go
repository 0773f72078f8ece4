package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/wasmhooks/wasmhooks/server/api"
)

// A revoked or rotated-away key's hash stays here, so that
// WASMHOOKS_ADMIN_KEY cannot bring it back at the next start (bootstrap).
func init() {
	schema = append(schema, `CREATE TABLE IF NOT EXISTS serve_revoked_keys (
		hash TEXT PRIMARY KEY,
		revoked TEXT NOT NULL)`)
}

func validRole(r Role) bool {
	switch r {
	case RoleAdmin, RolePublisher, RoleOperator, RoleRuntime:
		return true
	}
	return false
}

// KeyPrefix starts every API key the server makes: 32 random bytes in
// base64url follow it.
const KeyPrefix = "whk_"

// MinAdminKeyBytes is the shortest WASMHOOKS_ADMIN_KEY accepted.
const MinAdminKeyBytes = 32

// Principal is the authenticated caller of a request.
type Principal struct {
	KeyID  string
	Role   Role
	Tenant string // the tenant, or the publisher for a publisher key; "" for admin
	hash   string // the key's hash, as authenticated (keyLive)
}

// newKey makes a new API key. An API key has 256 bits from crypto/rand, so it
// is stored as its plain sha256 (hashKey): a slow password hash (bcrypt,
// argon2) defends low-entropy secrets against guessing, and there is nothing
// to guess here; a plain digest also lets the lookup be one indexed read,
// so no comparison of secrets happens in Go.
func newKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func hashKey(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// insertKey stores key's hash with its role and tenant, and returns its id.
func (s *Server) insertKey(ctx context.Context, key string, role Role, tenant, name string) (string, error) {
	id := "key_" + randomID(8)
	_, err := s.db.ExecContext(ctx, `INSERT INTO serve_keys (hash, id, role, tenant, name, created) VALUES (?, ?, ?, ?, ?, ?)`,
		hashKey(key), id, string(role), tenant, name, now())
	return id, err
}

// newStoredKey makes a new key (newKey) and stores it (insertKey): the key,
// to show once, and its id.
func (s *Server) newStoredKey(ctx context.Context, role Role, tenant, name string) (key, id string, err error) {
	if key, err = newKey(); err != nil {
		return "", "", err
	}
	if id, err = s.insertKey(ctx, key, role, tenant, name); err != nil {
		return "", "", err
	}
	return key, id, nil
}

// bootstrap makes sure an admin key exists: adminKey's if given (its hash is
// added if missing), else, when there is no admin key at all, a new one,
// returned so that the caller prints it once. It is stored only hashed.
func (s *Server) bootstrap(ctx context.Context, adminKey string) (string, error) {
	if adminKey != "" {
		if len(adminKey) < MinAdminKeyBytes {
			return "", errors.New("server: the admin key must be at least 32 bytes")
		}
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_revoked_keys WHERE hash = ?`, hashKey(adminKey)).Scan(&n); err != nil {
			return "", err
		}
		if n > 0 {
			return "", errors.New("server: WASMHOOKS_ADMIN_KEY was revoked or rotated; unset it (the admin keys in the database stay) or give a new one")
		}
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_keys WHERE hash = ?`, hashKey(adminKey)).Scan(&n); err != nil {
			return "", err
		}
		if n == 0 {
			_, err := s.insertKey(ctx, adminKey, RoleAdmin, "", "bootstrap")
			return "", err
		}
		return "", nil
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_keys WHERE role = ?`, string(RoleAdmin)).Scan(&n); err != nil {
		return "", err
	}
	if n > 0 {
		return "", nil
	}
	key, _, err := s.newStoredKey(ctx, RoleAdmin, "", "bootstrap")
	return key, err
}

// authenticate finds the key of the request's Authorization: Bearer header
// (api.BearerToken: one such header, the scheme's case ignored). An address that failed to authenticate too often (failLimiter) is 429
// before its key is read.
func (s *Server) authenticate(r *http.Request) (*Principal, *Problem) {
	if len(r.Header.Values("Authorization")) == 0 {
		return nil, problem(http.StatusUnauthorized, CodeUnauthenticated, "an API key is required: Authorization: Bearer KEY")
	}
	addr, at := clientAddr(r), time.Now()
	if blocked, wait := s.authFails.blocked(addr, at); blocked {
		return nil, authLimited(wait)
	}
	key, refused := api.BearerToken(r.Header)
	if refused == "" && len(key) > 256 {
		refused = "an API key is at most 256 bytes"
	}
	if refused != "" {
		s.authFails.fail(addr, at)
		return nil, problem(http.StatusUnauthorized, CodeUnauthenticated, "%s", refused)
	}
	hash := hashKey(key)
	p, ok, gen := s.keys.get(hash, at)
	if ok {
		return &p, nil
	}
	var role string
	err := s.db.QueryRowContext(r.Context(), `SELECT id, role, tenant FROM serve_keys WHERE hash = ?`, hash).Scan(&p.KeyID, &role, &p.Tenant)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		s.authFails.fail(addr, at)
		return nil, problem(http.StatusUnauthorized, CodeUnauthenticated, "unknown API key")
	case err != nil:
		return nil, s.internal(err)
	}
	p.Role = Role(role)
	p.hash = hash
	s.keys.put(hash, gen, p, at)
	return &p, nil
}

// keyLive reports whether p's key is still the one the request
// authenticated with: neither revoked nor rotated since. A request that
// waits (a long poll, an event stream: up to MaxWait) asks again before it
// answers, so a key revoked meanwhile receives nothing more.
func (s *Server) keyLive(ctx context.Context, p *Principal) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_keys WHERE id = ? AND hash = ?`, p.KeyID, p.hash).Scan(&n)
	return n > 0, err
}

// keyGone is the problem of a request whose key was revoked or rotated
// while it waited.
func keyGone() *Problem {
	return problem(http.StatusUnauthorized, CodeUnauthenticated, "the API key was revoked or rotated while the request waited")
}

// authLimited is the problem of an address past its failed-authentication
// budget; RetryAfter is its Retry-After.
func authLimited(wait time.Duration) *Problem {
	p := problem(http.StatusTooManyRequests, CodeAuthLimited, "too many failed authentications from this address; retry in %s", wait.Round(time.Second))
	p.RetryAfter = int(math.Ceil(wait.Seconds()))
	return p
}
