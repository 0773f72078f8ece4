package api

import "encoding/json"

// The documents of the routes the operator console reads (they are API
// routes like any other, for any client).

// MeDoc is the caller's key: what the console shows after sign-in.
type MeDoc struct {
	KeyID  string `json:"key_id"`
	Role   Role   `json:"role"`
	Tenant string `json:"tenant"`
}

// UsageDoc is a tenant's credit and usage.
type UsageDoc struct {
	Tenant string `json:"tenant"`
	// Available and Pending are the credit (CreditDoc's).
	Available int64 `json:"available"`
	Pending   int64 `json:"pending"`
	// Granted, Adjusted and Charged sum the ledger's entries of the
	// tenant (Charged as a positive amount; a sum past the int64 range is
	// the nearest bound, store.LedgerUsage); Charges counts the charges.
	Granted  int64 `json:"granted"`
	Adjusted int64 `json:"adjusted"`
	Charged  int64 `json:"charged"`
	Charges  int64 `json:"charges"`
	// Runs counts the runs posted with a run id (their outcomes are kept).
	Runs int64 `json:"runs"`
	// ApprovalsPending and ApprovalsResolved count the tenant's approvals.
	ApprovalsPending  int64 `json:"approvals_pending"`
	ApprovalsResolved int64 `json:"approvals_resolved"`
	// AuditRecords counts the tenant's audit records.
	AuditRecords int64 `json:"audit_records"`
}

// RecordDoc is an audit record with its verification status: Verified is
// "verified" (its hash and its MAC under the host key check), "unkeyed"
// (its hash checks; it has no MAC, as in an unkeyed chain: anyone could
// have written it) or "failed" (Problem says why). Linked says whether its
// Prev is the hash of the record before it in the index: "yes", "no", or
// "unknown" (that record is not in the index).
type RecordDoc struct {
	Record   json.RawMessage `json:"record"`
	Verified string          `json:"verified"`
	Linked   string          `json:"linked"`
	Problem  string          `json:"problem,omitempty"`
}

// RunDoc is a run as the console shows it: the outcomes it has had (the
// first, when it was posted with a run id, then each resolution of its
// approvals, in order; the last one's trace holds every step), its
// approvals, and its audit records with their verification status.
type RunDoc struct {
	Tenant    string            `json:"tenant"`
	Run       string            `json:"run"`
	Outcomes  []json.RawMessage `json:"outcomes"`
	Approvals []json.RawMessage `json:"approvals"`
	Audit     []RecordDoc       `json:"audit"`
}

// HookDoc is a module a tenant's chain names: its pinned version, the
// version's signatures each with whether it verifies under its publisher's
// key, and the module's validation report.
type HookDoc struct {
	Name string `json:"name"` // the configuration's name for the module
	Ref  string `json:"ref"`  // publisher/name@version#sha256:DIGEST
	// Version is the published version, nil when it is not (any more)
	// what the pin names (Problem says why).
	Version    *VersionDoc     `json:"version,omitempty"`
	Signatures []SignatureView `json:"signatures"`
	Signed     bool            `json:"signed"`
	Report     json.RawMessage `json:"report,omitempty"`
	Problem    string          `json:"problem,omitempty"`
}

// SignatureView is a signature and whether it verifies.
type SignatureView struct {
	KeyID string `json:"key_id"`
	Valid bool   `json:"valid"`
}
