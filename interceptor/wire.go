package interceptor

import (
	"encoding/json"
	"fmt"
)

// The wire types of SEP-2624 (MCP interceptors), as the conformance suite's
// fixtures pin them: what interceptors/list, interceptor/invoke and a chain
// execution put on the wire. Optional fields that hold their default are
// omitted.

// Types and phases of the SEP.
const (
	TypeValidation = "validation"
	TypeMutation   = "mutation"

	PhaseRequest  = "request"
	PhaseResponse = "response"
	PhaseBoth     = "both"

	ModeActive = "active"
	ModeAudit  = "audit"
)

// JSON-RPC error codes the SEP uses.
const (
	CodeInvalidParams = -32602 // an unknown interceptor, a bad phase or payload
	CodeInternalError = -32603 // the interceptor failed (trap, timeout, ...)
)

// PriorityHint orders mutators: lower runs first, ties alphabetically by
// name. On the wire it is a number (both phases) or {request?, response?}.
type PriorityHint struct {
	Request, Response int32
	// perPhase is whether it was given (and is written) as an object.
	perPhase bool
}

// For returns the priority in phase.
func (p *PriorityHint) For(phase string) int32 {
	if p == nil {
		return 0
	}
	if phase == PhaseResponse {
		return p.Response
	}
	return p.Request
}

// MarshalJSON writes a number when both phases share the priority.
func (p PriorityHint) MarshalJSON() ([]byte, error) {
	if !p.perPhase && p.Request == p.Response {
		return json.Marshal(p.Request)
	}
	m := map[string]int32{}
	if p.Request != 0 {
		m["request"] = p.Request
	}
	if p.Response != 0 {
		m["response"] = p.Response
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads a number or {request?, response?}.
func (p *PriorityHint) UnmarshalJSON(b []byte) error {
	var n int32
	if err := json.Unmarshal(b, &n); err == nil {
		*p = PriorityHint{Request: n, Response: n}
		return nil
	}
	var m struct {
		Request  *int32 `json:"request"`
		Response *int32 `json:"response"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("priorityHint: want a 32-bit integer or {request, response}: %w", err)
	}
	*p = PriorityHint{perPhase: true}
	if m.Request != nil {
		p.Request = *m.Request
	}
	if m.Response != nil {
		p.Response = *m.Response
	}
	return nil
}

// Hook is one entry of a listed interceptor's hooks: events in a phase.
type Hook struct {
	Events []string `json:"events"`
	Phase  string   `json:"phase"`
}

// Interceptor is an interceptor as interceptors/list describes it.
type Interceptor struct {
	Name         string         `json:"name"`
	Version      string         `json:"version,omitempty"`
	Description  string         `json:"description,omitempty"`
	Type         string         `json:"type"`
	Hooks        []Hook         `json:"hooks"`
	Mode         string         `json:"mode,omitempty"`
	FailOpen     bool           `json:"failOpen,omitempty"`
	PriorityHint *PriorityHint  `json:"priorityHint,omitempty"`
	ConfigSchema map[string]any `json:"configSchema,omitempty"`
}

// ListParams are interceptors/list's parameters.
type ListParams struct {
	// Event, if set, keeps the interceptors hooking it (wildcards
	// included).
	Event string `json:"event,omitempty"`
}

// ListResult is interceptors/list's result.
type ListResult struct {
	Interceptors []Interceptor `json:"interceptors"`
}

// InvocationContext is the context of an invocation or a chain execution.
type InvocationContext struct {
	Principal *struct {
		Type   string         `json:"type"`
		ID     string         `json:"id,omitempty"`
		Claims map[string]any `json:"claims,omitempty"`
	} `json:"principal,omitempty"`
	TraceID   string `json:"traceId,omitempty"`
	SpanID    string `json:"spanId,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	// SessionID scopes the security hooks' state: taint never crosses
	// sessions.
	SessionID string `json:"sessionId,omitempty"`
	// Server is the MCP server the traffic goes to or comes from, when
	// the gateway knows it (a wasmhooks extension; the SEP leaves it to
	// the implementation). The security hooks derive it otherwise.
	Server string `json:"server,omitempty"`
}

// InvokeParams are interceptor/invoke's parameters.
type InvokeParams struct {
	Name    string             `json:"name"`
	Event   string             `json:"event"`
	Phase   string             `json:"phase"`
	Payload any                `json:"payload"`
	Config  map[string]any     `json:"config,omitempty"`
	Timeout int64              `json:"timeoutMs,omitempty"`
	Context *InvocationContext `json:"context,omitempty"`
}

// Message is one message of a validation result.
type Message struct {
	Path     string `json:"path,omitempty"`
	Message  string `json:"message"`
	Severity string `json:"severity"`
}

// Result is a ValidationResult or a MutationResult (by Type), and an entry
// of a chain result's results.
type Result struct {
	Interceptor string         `json:"interceptor"`
	Type        string         `json:"type"`
	Phase       string         `json:"phase"`
	DurationMs  float64        `json:"durationMs"`
	Info        map[string]any `json:"info,omitempty"`
	Mode        string         `json:"mode,omitempty"` // "audit" in a chain result

	// Validation.
	Valid    *bool     `json:"valid,omitempty"`
	Severity string    `json:"severity,omitempty"`
	Messages []Message `json:"messages,omitempty"`

	// Mutation.
	Modified *bool `json:"modified,omitempty"`
	Payload  any   `json:"payload,omitempty"`
}

// ChainParams are a chain execution's parameters.
type ChainParams struct {
	Event   string             `json:"event"`
	Phase   string             `json:"phase"`
	Payload any                `json:"payload"`
	Only    []string           `json:"interceptors,omitempty"`
	Timeout int64              `json:"timeoutMs,omitempty"`
	Context *InvocationContext `json:"context,omitempty"`
}

// Chain statuses.
const (
	StatusSuccess          = "success"
	StatusValidationFailed = "validation_failed"
	StatusMutationFailed   = "mutation_failed"
	StatusTimeout          = "timeout"
)

// Summary counts validation outcomes of a chain.
type Summary struct {
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
}

// Aborted says where and why a chain stopped.
type Aborted struct {
	Interceptor string `json:"interceptor"`
	Reason      string `json:"reason"`
	Type        string `json:"type"`
}

// ChainResult is a chain execution's result.
type ChainResult struct {
	Status            string   `json:"status"`
	Event             string   `json:"event"`
	Phase             string   `json:"phase"`
	Results           []Result `json:"results"`
	FinalPayload      any      `json:"finalPayload,omitempty"`
	ValidationSummary Summary  `json:"validationSummary"`
	TotalDurationMs   float64  `json:"totalDurationMs"`
	AbortedAt         *Aborted `json:"abortedAt,omitempty"`
}

// Error is a JSON-RPC error an interceptor method answers.
type Error struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("interceptor: %s (%d)", e.Message, e.Code) }
