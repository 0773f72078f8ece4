package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Problem is an RFC 9457 problem detail, as every error response carries it
// (Content-Type application/problem+json). Code is one of the stable codes
// below, or a code of the runtime or the chain (runtime.Code, the chain's
// approval codes) when the refusal came from there.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	// Report is the validation report of a refused module, when there is one.
	Report any `json:"report,omitempty"`
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail) }

// Stable problem codes of the server itself.
const (
	CodeUnauthenticated   = "unauthenticated"    // 401: no key, or a key not known
	CodeForbidden         = "forbidden"          // 403: the key's role may not use the route
	CodeNotFound          = "not_found"          // 404: no such object (or not the key's)
	CodeMalformedJSON     = "malformed_json"     // 400: the body is not the JSON the route takes
	CodeInvalidRequest    = "invalid_request"    // 400/422: well-formed but not valid
	CodeBodyTooLarge      = "body_too_large"     // 413: the body passed the route's limit
	CodeUnsupportedMedia  = "unsupported_media"  // 415: wrong Content-Type
	CodeConflict          = "conflict"           // 409: exists already (a version, a tenant)
	CodeUnknownVersion    = "unknown_version"    // 422: a binding names a version not published
	CodeDigestMismatch    = "digest_mismatch"    // 422: a binding's pin is not the version's digest
	CodeSignatureRequired = "signature_required" // 422: the tenant requires a valid signature
	CodeBadSignature      = "bad_signature"      // 422: a signature does not verify
	CodeInvalidConfig     = "invalid_config"     // 422: the chain refused the configuration
	CodeNoChain           = "no_chain"           // 409: the tenant has bound nothing yet
	CodeShuttingDown      = "shutting_down"      // 503: the server is draining
	CodeTimeout           = "timeout"            // 504: a run outlived the request
	CodeInternal          = "internal"           // 500: see the server's log
)

func problem(status int, code, format string, args ...any) *Problem {
	return &Problem{Type: "https://wasmhooks.dev/problems/" + code, Title: http.StatusText(status), Status: status, Code: code, Detail: fmt.Sprintf(format, args...)}
}

func writeProblem(w http.ResponseWriter, p *Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// readBody reads at most limit bytes of r's body: a longer body is
// body_too_large, and nothing of it is used.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Problem) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, problem(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", limit)
	case err != nil:
		return nil, problem(http.StatusBadRequest, CodeMalformedJSON, "reading the body: %v", err)
	}
	return b, nil
}

// decodeJSON reads a JSON body of at most limit bytes into v: unknown fields
// and trailing data are refused.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *Problem {
	b, p := readBody(w, r, limit)
	if p != nil {
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return problem(http.StatusBadRequest, CodeMalformedJSON, "%v", err)
	}
	if dec.More() {
		return problem(http.StatusBadRequest, CodeMalformedJSON, "data after the JSON value")
	}
	return nil
}
