package capability

import (
	"context"
	"maps"

	"github.com/wasmhooks/wasmhooks/abi"
)

// Capability is one effect a hook may ask for by name. It declares
// everything about itself: its name, a JSON Schema for its payload, the gates
// that guard it, its worst-case cost and how to execute it.
//
// A Capability is a plain value. Once registered its functions are called
// concurrently by many goroutines, so Cost and Execute must be safe for
// concurrent use.
type Capability struct {
	// Name is what a hook passes to host_call: 1 to 128 bytes of
	// [a-z0-9_.-], such as "llm.run". Required.
	Name string

	// Description says in one or two sentences what the capability does,
	// for hook authors and for listings.
	Description string

	// Schema is the JSON Schema (draft 2020-12 unless "$schema" says
	// otherwise) every payload must satisfy, as a JSON document. It is
	// compiled once, by Register; "{}" (or "true") accepts any JSON value,
	// and the runner then skips the validator. References to other
	// documents are refused. Required.
	Schema string

	// Gates are checked in order after validation and before Execute.
	// Each may hold something (a credit reservation) that the runner
	// settles or releases exactly once.
	Gates []Gate

	// Cost returns the worst-case credit of a call with this payload, the
	// amount a CreditGate reserves. It sees only payloads that passed the
	// schema. Nil means free (cost zero). A negative cost is a capability
	// bug and fails the call.
	Cost func(payload any) int64

	// Execute performs the effect. It must honour ctx and must not keep req
	// or its payload after it returns. Returning an *abi.Error (possibly
	// wrapped) with status INVALID_REQUEST, DENIED, INSUFFICIENT_CREDIT,
	// CAPABILITY_FAILED, QUOTA_EXCEEDED or RATE_LIMITED passes that status
	// and its message to the hook; any other error becomes CAPABILITY_FAILED
	// with the message "capability NAME failed", and its text goes only to
	// the operator's log. Required.
	Execute func(ctx context.Context, req *Request) (*Result, error)
}

// Request is what Execute, Cost's caller and the gates see of one host call.
// A Request is owned by the runner and valid only during the call; it is not
// safe for concurrent mutation.
type Request struct {
	// Capability is the capability's name.
	Capability string
	// Caller identifies the hook; the hook can neither see nor choose it.
	Caller abi.Caller
	// Payload is the parsed payload: map[string]any, []any, string,
	// json.Number, bool or nil, exactly as abi.ParseJSON returned it and
	// as the schema validated it. Execute must treat it as read-only.
	Payload any
	// Seq numbers the host calls of one invocation from 1.
	Seq int
	// IdempotencyKey is unique to this host call ("invocation/seq"), or
	// empty when the caller has no invocation id. Ledgers use it so a
	// replayed call never holds credit twice.
	IdempotencyKey string
	// Cost is the worst-case cost Capability.Cost returned for Payload.
	Cost int64
}

// Result is what Execute returns: the value the hook receives and what the
// call consumed. It is not safe for concurrent mutation.
type Result struct {
	// Value is encoded with abi.Marshal and returned to the hook. It must
	// be a JSON-encodable value; values from abi.ParseJSON always are.
	Value any
	// Usage is what the call actually consumed.
	Usage Usage
	// FollowUps is work for the platform to do after the call (a usage
	// event, a notification, a job). The runner hands each to the
	// Dispatcher with the call's identity and idempotency key, at least
	// once, only if the call completed and was settled (status OK or
	// RESULT_TOO_LARGE): the follow-ups of a call that failed, was refused
	// or could not be billed are never dispatched. See Dispatcher.
	FollowUps []FollowUp
}

// Usage is what one call consumed. It is a plain value and is not safe for
// concurrent mutation of Units.
type Usage struct {
	// Credit is the credit actually consumed. The runner settles it
	// against the reservation: at most the reserved amount is charged and
	// the rest is recorded as uncharged. Negative values count as zero.
	Credit int64
	// Units are capability-specific counters, such as "input_tokens".
	// Optional; copied into the usage record.
	Units map[string]int64
}

// clone returns a copy of u whose Units map is not shared.
func (u Usage) clone() Usage {
	u.Units = maps.Clone(u.Units)
	return u
}
