package abi

import (
	"fmt"
	"sort"
	"strings"
)

// Action is the word of a canonical decision.
type Action string

// The actions of a canonical decision.
const (
	ActionContinue Action = "continue"
	ActionModify   Action = "modify"
	ActionBlock    Action = "block"
	ActionAsk      Action = "ask"
	// ActionNotify continues unchanged and tells a human: the platform
	// receives the decision's reason and payload (since ABI 1.2; seed
	// 000's permission level "notify").
	ActionNotify Action = "notify"
)

// Valid reports whether a is one of the actions.
func (a Action) Valid() bool {
	switch a {
	case ActionContinue, ActionModify, ActionBlock, ActionAsk, ActionNotify:
		return true
	}
	return false
}

// Shape names the wire shape a decision arrived in.
type Shape string

// The decision shapes the host accepts. See ABI.md.
const (
	// ShapeCanonical is {"action": ..., "context": {...}, ...}.
	ShapeCanonical Shape = "canonical"
	// ShapeTopLevel is seed 004's {"action": "modify", "outgoing": ...}.
	ShapeTopLevel Shape = "top-level"
	// ShapeOutcome is seed 003's {"decision": allow|block|transform, ...},
	// possibly with the legacy "abort" beside it.
	ShapeOutcome Shape = "outcome"
	// ShapeLegacy is {"abort": bool, "reason": ...}.
	ShapeLegacy Shape = "legacy"
	// ShapeGuardrail is seed 002's {"action": "allow" | "rewrite" |
	// "require_approval", ...} (since ABI 1.2; decision_words.go).
	ShapeGuardrail Shape = "guardrail"
)

// Decision is the canonical decision document.
type Decision struct {
	// Action is what the host should do.
	Action Action `json:"action"`
	// Context holds the changed context fields of a modify, and nothing
	// for the other actions.
	Context map[string]any `json:"context,omitempty"`
	// Payload is a notify's message for the human it tells (any object,
	// passed through; since ABI 1.2), and nothing for the other actions.
	Payload map[string]any `json:"payload,omitempty"`
	// Reason is for the agent and the audit log.
	Reason string `json:"reason,omitempty"`
	// UserMessage is shown to the end user.
	UserMessage string `json:"user_message,omitempty"`
	// DoNotReplyAgain asks the platform to suppress further automatic
	// replies in the conversation.
	DoNotReplyAgain bool `json:"do_not_reply_again,omitempty"`
	// Pending is what an ask puts before the approver beside the traffic
	// (seed 002's requireApproval(pending)); ask only, since ABI 1.2.
	Pending map[string]any `json:"pending,omitempty"`
	// ShortCircuit, on a continue, ends the run with success and skips the
	// bindings after this one (seed 000's MiddlewareResult::ShortCircuit);
	// since ABI 1.2. The chain applies it from guards only.
	ShortCircuit bool `json:"short_circuit,omitempty"`
	// Shape is the wire shape the decision was decoded from; it is not
	// part of the canonical encoding.
	Shape Shape `json:"-"`
}

// Encode returns the canonical JSON encoding of the decision.
func (d *Decision) Encode() ([]byte, error) { return Marshal(d) }

// DecisionError reports a decision document that is not a valid output. It is
// a hook failure, never read as a continue.
type DecisionError struct {
	Reason string
	Err    error
}

func (e *DecisionError) Error() string { return errorText("invalid decision", e.Reason, e.Err) }

func (e *DecisionError) Unwrap() error { return e.Err }

func decisionErrorf(format string, args ...any) error {
	return &DecisionError{Reason: fmt.Sprintf(format, args...)}
}

var (
	canonicalKeys = map[string]bool{"action": true, "context": true, "reason": true, "user_message": true, "do_not_reply_again": true, "pending": true, "short_circuit": true}
	outcomeKeys   = map[string]bool{"decision": true, "abort": true, "reason": true, "transformed_body": true, "do_not_reply_again": true}
	legacyKeys    = map[string]bool{"abort": true, "reason": true}
)

// DecodeDecision parses a hook's output strictly and normalises any of the
// four accepted shapes into a canonical Decision for a hook running at point.
// A modify may set only the point's changeable fields. Any other action or
// decision word, a field of the wrong type, or a mix of shapes is an error.
func DecodeDecision(data []byte, point Point, lim JSONLimits) (*Decision, error) {
	// Most decisions are canonical: a scanner decodes those without the
	// document tree (decision_fast.go). It hands anything else, and every
	// error, to the tree path.
	if d, ok := decodeDecisionFast(data, point, lim); ok {
		return d, nil
	}
	return decodeDecisionTree(data, point, lim)
}

// decodeDecisionTree is DecodeDecision by way of the document tree: it
// decodes every shape and words every error.
func decodeDecisionTree(data []byte, point Point, lim JSONLimits) (*Decision, error) {
	m, reason, err := parseObject(data, lim)
	if reason != "" {
		return nil, &DecisionError{Reason: reason, Err: err}
	}
	_, hasAction := m["action"]
	_, hasDecision := m["decision"]
	_, hasAbort := m["abort"]
	var d *Decision
	switch {
	case hasAction && (hasDecision || hasAbort):
		return nil, decisionErrorf(`"action" cannot be mixed with "decision" or "abort"`)
	case hasAction:
		d, err = decodeCanonical(m)
	case hasDecision:
		d, err = decodeOutcome(m, point)
	case hasAbort:
		d, err = decodeLegacy(m)
	default:
		return nil, decisionErrorf(`no "action", "decision" or "abort" field`)
	}
	if err != nil {
		return nil, err
	}
	if d.Action == ActionModify {
		for _, k := range sortedMapKeys(d.Context) {
			if !point.CanChange(k) {
				return nil, decisionErrorf("modify of %q, which point %s does not allow (changeable: %s)", k, point.Name, strings.Join(point.Changeable, ", "))
			}
		}
	}
	if d.Shape == ShapeTopLevel {
		// The canonical form nests each changed field one level deeper,
		// inside "context". It must still be a document the same limits
		// accept, or the canonical form would not be a fixed point.
		maxDepth := lim.withDefaults().MaxDepth
		for _, k := range sortedMapKeys(d.Context) {
			if 2+nesting(d.Context[k]) > maxDepth {
				return nil, decisionErrorf("modify of %q nests deeper than %d once moved into \"context\"", k, maxDepth)
			}
		}
	}
	return d, nil
}

// nesting returns how deeply v nests arrays and objects: 0 for a scalar,
// 1 for a flat array or object.
func nesting(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			n = max(n, nesting(e))
		}
	case []any:
		for _, e := range v {
			n = max(n, nesting(e))
		}
	default:
		return 0
	}
	return n + 1
}

func decodeCommon(d *Decision, m map[string]any) error {
	if r, ok := m["reason"]; ok && r != nil {
		s, ok := r.(string)
		if !ok {
			return decisionErrorf(`"reason" must be a string`)
		}
		d.Reason = s
	}
	if r, ok := m["user_message"]; ok && r != nil {
		s, ok := r.(string)
		if !ok {
			return decisionErrorf(`"user_message" must be a string`)
		}
		d.UserMessage = s
	}
	if r, ok := m["do_not_reply_again"]; ok && r != nil {
		b, ok := r.(bool)
		if !ok {
			return decisionErrorf(`"do_not_reply_again" must be a boolean`)
		}
		d.DoNotReplyAgain = b
	}
	return nil
}

func decodeCanonical(m map[string]any) (*Decision, error) {
	word, ok := m["action"].(string)
	if !ok {
		return nil, decisionErrorf(`"action" must be a string`)
	}
	if guardrailWords[word] {
		return decodeGuardrail(m, word)
	}
	d := &Decision{Action: Action(word), Shape: ShapeCanonical}
	if !d.Action.Valid() {
		return nil, decisionErrorf("unknown action %q (want continue, modify, block, ask, notify, allow, rewrite or require_approval)", word)
	}
	if err := decodeCommon(d, m); err != nil {
		return nil, err
	}
	if d.Action == ActionNotify {
		if p, ok := m["payload"]; ok && p != nil {
			obj, ok := p.(map[string]any)
			if !ok {
				return nil, decisionErrorf(`"payload" must be an object`)
			}
			d.Payload = obj
		}
	}
	if err := decodeAdded(d, m); err != nil {
		return nil, err
	}
	var extra []string
	for k := range m {
		if !canonicalKeys[k] && (k != "payload" || d.Action != ActionNotify) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	cv, hasContext := m["context"]
	switch {
	case len(extra) > 0 && d.Action != ActionModify:
		return nil, decisionErrorf("unexpected field %q in a decision with action %q", extra[0], d.Action)
	case len(extra) > 0 && hasContext:
		return nil, decisionErrorf(`modify sets fields both in "context" and at the top level (%q)`, extra[0])
	case len(extra) > 0:
		d.Shape = ShapeTopLevel
		d.Context = make(map[string]any, len(extra))
		for _, k := range extra {
			d.Context[k] = m[k]
		}
	case hasContext && d.Action != ActionModify:
		if c, ok := cv.(map[string]any); !ok || len(c) > 0 {
			return nil, decisionErrorf(`"context" is only allowed with modify`)
		}
	case hasContext:
		c, ok := cv.(map[string]any)
		if !ok {
			return nil, decisionErrorf(`"context" must be an object`)
		}
		d.Context = c
	}
	if d.Action == ActionModify && len(d.Context) == 0 {
		return nil, decisionErrorf("modify changes no field")
	}
	return d, nil
}

func decodeOutcome(m map[string]any, point Point) (*Decision, error) {
	if k, ok := unexpectedKey(m, outcomeKeys); ok {
		return nil, decisionErrorf("unexpected field %q in a decision/abort outcome", k)
	}
	word, ok := m["decision"].(string)
	if !ok {
		return nil, decisionErrorf(`"decision" must be a string`)
	}
	d := &Decision{Shape: ShapeOutcome}
	if err := decodeCommon(d, m); err != nil {
		return nil, err
	}
	wantAbort := false
	switch word {
	case "allow":
		d.Action = ActionContinue
	case "block":
		d.Action = ActionBlock
		wantAbort = true
	case "transform":
		body, ok := m["transformed_body"].(string)
		if !ok {
			return nil, decisionErrorf(`transform needs a string "transformed_body"`)
		}
		if point.Primary == "" {
			return nil, decisionErrorf("transform at point %s, which has no primary text field", point.Name)
		}
		d.Action = ActionModify
		d.Context = map[string]any{point.Primary: body}
	default:
		return nil, decisionErrorf("unknown decision %q (want allow, block or transform)", word)
	}
	if word != "transform" {
		if _, ok := m["transformed_body"]; ok {
			return nil, decisionErrorf(`"transformed_body" is only allowed with transform`)
		}
	}
	if a, ok := m["abort"]; ok {
		b, ok := a.(bool)
		if !ok {
			return nil, decisionErrorf(`"abort" must be a boolean`)
		}
		if b != wantAbort {
			return nil, decisionErrorf(`"abort": %t contradicts "decision": %q`, b, word)
		}
	}
	return d, nil
}

func decodeLegacy(m map[string]any) (*Decision, error) {
	if k, ok := unexpectedKey(m, legacyKeys); ok {
		return nil, decisionErrorf("unexpected field %q in a legacy abort outcome", k)
	}
	b, ok := m["abort"].(bool)
	if !ok {
		return nil, decisionErrorf(`"abort" must be a boolean`)
	}
	d := &Decision{Action: ActionContinue, Shape: ShapeLegacy}
	if b {
		d.Action = ActionBlock
	}
	if err := decodeCommon(d, m); err != nil {
		return nil, err
	}
	return d, nil
}

// unexpectedKey returns the first key of m, in sorted order, that allowed
// does not hold.
func unexpectedKey(m map[string]any, allowed map[string]bool) (string, bool) {
	for _, k := range sortedMapKeys(m) {
		if !allowed[k] {
			return k, true
		}
	}
	return "", false
}
