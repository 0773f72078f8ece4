package interceptor

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/wasmhooks/wasmhooks/server/api"
)

// MinHTTPTokenBytes is the shortest HTTPOptions.Token that CheckHTTPToken
// accepts: 32 bytes, the bound `wasmhooks serve` puts on its admin key, so
// that a token cannot be guessed and failed attempts need no limiter.
const MinHTTPTokenBytes = 32

// CheckHTTPToken reports why token cannot be HTTPOptions.Token: empty,
// shorter than MinHTTPTokenBytes, or holding a control character, which no
// header carries (every request would be refused). The error never holds
// the token.
func CheckHTTPToken(token string) error {
	ctl := strings.IndexFunc(token, func(r rune) bool { return r < 0x20 || r == 0x7f })
	switch {
	case token == "":
		return errors.New("the token is empty")
	case len(token) < MinHTTPTokenBytes:
		return fmt.Errorf("the token is %d bytes, shorter than %d", len(token), MinHTTPTokenBytes)
	case ctl >= 0:
		return fmt.Errorf("the token holds a control character (byte %d), which no header carries", ctl)
	}
	return nil
}

// BearerAuth is next served only to the requests that carry token
// (Authorization: Bearer TOKEN); any other is answered 401 as HTTPOptions.Token
// says, before next sees it. An empty token is next itself. A command that
// routes several paths wraps its whole mux in it, so that no answer (a 404,
// a redirect) goes to a client without the token.
func BearerAuth(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearerAuth(w, r, want) {
			next.ServeHTTP(w, r)
		}
	})
}

// bearerAuth answers a request that does not carry token (api.BearerToken:
// one Authorization header, Bearer TOKEN) with 401 and reports false; the
// request then reached nothing else. The tokens are compared as their
// SHA-256 digests in constant time, so neither the token's bytes nor its
// length show in the time taken.
func bearerAuth(w http.ResponseWriter, r *http.Request, want [sha256.Size]byte) bool {
	got, refused := api.BearerToken(r.Header)
	if refused != "" {
		unauthenticated(w, `Bearer realm="wasmhooks mcp"`, refused)
		return false
	}
	g := sha256.Sum256([]byte(got))
	if subtle.ConstantTimeCompare(g[:], want[:]) != 1 {
		unauthenticated(w, `Bearer realm="wasmhooks mcp", error="invalid_token"`, "the bearer token is not this server's")
		return false
	}
	return true
}

// unauthenticated writes a 401 with the problem document `wasmhooks serve`
// answers an unauthenticated request with (api.Problem, code
// api.CodeUnauthenticated) and the challenge of RFC 6750, and closes the
// connection without waiting for the request's body: net/http would otherwise read
// (up to 256 KiB of) an unread body before answering, with no deadline, so
// a client without the token that declared a body and never sent it held
// its connection and goroutine for ever.
func unauthenticated(w http.ResponseWriter, challenge, detail string) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now()) // not every ResponseWriter can
	w.Header().Set("Connection", "close")
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(api.NewProblem(http.StatusUnauthorized, api.CodeUnauthenticated, detail))
}
