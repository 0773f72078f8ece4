// Package api holds the types of the wasmhooks platform's HTTP API (package
// server, `wasmhooks serve`) that its clients share: problems and their
// codes, roles, the documents the routes return, and the message a publisher
// signs. It imports only the standard library, so a client (package
// server/client) does not compile the runtime.
package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
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
	// RetryAfter is the answer's Retry-After in seconds (a 429's), not a
	// member of the JSON: the server sends it as the header, the client
	// reads it from there.
	RetryAfter int `json:"-"`
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail) }

// NewProblem is the problem of status with code and detail: its Type is
// code's URL under https://wasmhooks.dev/problems/, its Title status's text.
func NewProblem(status int, code, detail string) *Problem {
	return &Problem{Type: "https://wasmhooks.dev/problems/" + code, Title: http.StatusText(status), Status: status, Code: code, Detail: detail}
}

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
	CodeUnavailable       = "unavailable"        // 503: the database did not answer a check the request needs (the shared rate limit); retry (Retry-After)
	CodeRateLimited       = "rate_limited"       // 429: the key's rate limit is reached (Retry-After)
	CodeAuthLimited       = "auth_rate_limited"  // 429: too many failed authentications from the address (Retry-After)
	CodeMethodNotAllowed  = "method_not_allowed" // 405: the path exists, not with this method (Allow lists those it has)
	CodeQuotaExceeded     = "quota_exceeded"     // 403: the publisher's upload quota (or its proposed signing keys' bound) would be passed; nothing is stored
	CodeRunInProgress     = "run_in_progress"    // 409: another request (on any node) is running this run id (Retry-After)
	CodeBodyTimeout       = "body_timeout"       // 408: the body did not arrive within the server's BodyTimeout; the connection is closed
)

// Role is what an API key may do. Every route names the roles it admits.
type Role string

// The roles.
const (
	// RoleAdmin is the platform's operator: tenants, keys, credit.
	RoleAdmin Role = "admin"
	// RolePublisher is a third party that uploads, publishes and signs
	// modules; its key's tenant is the publisher's name.
	RolePublisher Role = "publisher"
	// RoleOperator is a tenant's operator: binds versions into the
	// tenant's chain, resolves approvals, reads audit and credit.
	RoleOperator Role = "operator"
	// RoleRuntime is a tenant's agent platform: posts runs, waits for
	// approvals' results.
	RoleRuntime Role = "runtime"
)

// KeyDoc is a new API key: Key is shown here once and stored only hashed.
type KeyDoc struct {
	ID     string `json:"id"`
	Key    string `json:"key"`
	Role   Role   `json:"role"`
	Tenant string `json:"tenant"`
}

// KeyInfo is an API key as listed: never its secret, which is stored only
// hashed.
type KeyInfo struct {
	ID      string `json:"id"`
	Role    Role   `json:"role"`
	Tenant  string `json:"tenant"`
	Name    string `json:"name"`
	Created string `json:"created"`
}

// SigningKeyDoc is a publisher's ed25519 public key. A key its publisher
// registered counts for require_signatures only once an admin approved it
// (Approved): the publisher's API key alone cannot make a signature
// trusted (SECURITY.md).
type SigningKeyDoc struct {
	ID        string `json:"id"`
	Publisher string `json:"publisher"`
	PublicKey []byte `json:"public_key"`
	Approved  bool   `json:"approved"`
	Created   string `json:"created"`
}

// SigningKeyID is the id of the ed25519 public key pub: "ed25519:" and the
// first 8 bytes of its sha256 in hex.
func SigningKeyID(pub []byte) string {
	s := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(s[:8])
}

// AuditVerifyDoc is the verification of a tenant's audit chain, with the
// platform's key: every record's hash and MAC, and each linked to the one
// before, and each the tenant's, against the chain's checkpoint kept in the
// database and the one the request gave (?checkpoint=). Records counts the
// chain's records the answer vouches for, from 0: those before From by the
// checkpoint it started from (read by an earlier verification), those after
// it read now; when Verified is false, Seq is the first broken or missing
// record, Cause says which and Error why.
//
// A verification is full (from record 0) when asked (?full=true) or when
// the chain has no checkpoint yet; otherwise it reads the chain from the
// older of the two checkpoints on (From; the record before it is checked
// against the checkpoint's head): records cut from the end are found, a
// record rewritten before From only by a full one.
type AuditVerifyDoc struct {
	Tenant   string  `json:"tenant"`
	Records  int     `json:"records"`
	Verified bool    `json:"verified"`
	Seq      *uint64 `json:"seq,omitempty"`
	Error    string  `json:"error,omitempty"`
	// Full says the verification read the chain from record 0.
	Full bool `json:"full"`
	// From is the first record it verified after the checkpoint it
	// started from (the checkpoint's record count; 0 when Full).
	From uint64 `json:"from"`
	// Read counts the records it read.
	Read int `json:"read"`
	// Cause, when Verified is false, is one of the AuditCause values.
	Cause string `json:"cause,omitempty"`
	// Checkpoint, when Verified, is the chain's checkpoint at its end as
	// verified (kept in the database too, unless the chain is empty or the
	// write failed, which the server logs): pass it back as ?checkpoint=
	// (its JSON, at most server.MaxVerifyCheckpointBytes) to have the next
	// verification check that the chain still holds it, whatever the
	// database says by then.
	Checkpoint *AuditCheckpoint `json:"checkpoint,omitempty"`
}

// The causes of a failed verification (AuditVerifyDoc.Cause).
const (
	// AuditCauseRecord: record Seq's hash, MAC or link is wrong, it is
	// another tenant's, or it is not the head a checkpoint says (the chain
	// was rewritten).
	AuditCauseRecord = "record"
	// AuditCauseMissing: records are missing from Seq on (cut from the
	// chain's end, or deleted).
	AuditCauseMissing = "missing"
	// AuditCauseCheckpoint: the checkpoint kept in the database does not
	// verify under the key (it was changed there); nothing was verified.
	AuditCauseCheckpoint = "checkpoint"
)

// AuditCheckpoint is a checkpoint of an audit chain: how many records it
// held, the last one's hash, and the MAC of the two under the platform's
// key (the JSON of chain/audit.Checkpoint).
type AuditCheckpoint struct {
	Records uint64 `json:"records"`
	Head    string `json:"head"`
	MAC     string `json:"mac"`
}

// CreditDoc is a tenant's credit.
type CreditDoc struct {
	Tenant    string `json:"tenant"`
	Available int64  `json:"available"`
	Pending   int64  `json:"pending"`
}

// ModuleDoc is an uploaded module: its digest (hex sha256) and validation
// report (runtime.ModuleInfo's JSON).
type ModuleDoc struct {
	Digest string          `json:"digest"`
	Report json.RawMessage `json:"report"`
}

// VersionDoc is a published version.
type VersionDoc struct {
	Ref            string         `json:"ref"` // publisher/name@version
	Publisher      string         `json:"publisher"`
	Name           string         `json:"name"`
	Version        string         `json:"version"`
	Digest         string         `json:"digest"`
	ManifestDigest string         `json:"manifest_digest"`
	Signatures     []SignatureDoc `json:"signatures"`
}

// SignatureDoc is a signature of a version by one of its publisher's keys.
type SignatureDoc struct {
	KeyID     string `json:"key_id"`
	Signature []byte `json:"signature"`
}

// SigningMessage is what a publisher signs with ed25519 for the version ref
// ("publisher/name@version"): the version, the module's digest (hex sha256
// of its bytes) and its manifest's digest (VersionDoc.ManifestDigest), so a
// signature holds for one version of one module with one manifest, and for
// nothing else.
func SigningMessage(ref, digest, manifestDigest string) []byte {
	return []byte("wasmhooks version signature v1\n" + ref + "\n" + digest + "\n" + manifestDigest + "\n")
}

// ApprovalView is what the API shows of an approval: not the paused run's
// sealed state, which stays in the approval store.
type ApprovalView struct {
	ID          string         `json:"id"`
	Run         string         `json:"run"`
	Status      string         `json:"status"` // pending or resolved
	Point       string         `json:"point"`
	Binding     string         `json:"binding"`
	Reason      string         `json:"reason,omitempty"`
	UserMessage string         `json:"user_message,omitempty"`
	Proposed    map[string]any `json:"proposed"`
	Pending     map[string]any `json:"pending,omitempty"`
	Editable    []string       `json:"editable"`
	Created     time.Time      `json:"created"`
	Expires     time.Time      `json:"expires"`
}

// ResultDoc is an approval's result: Status is pending, resolved (Outcome
// is the resumed run's) or unrecorded: it was resolved, but the node that
// resumed the run stopped (or its database failed) before recording the
// outcome, and none will come; the tenant's audit chain has the resolution.
type ResultDoc struct {
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Outcome json.RawMessage `json:"outcome,omitempty"`
}
