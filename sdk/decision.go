package sdk

import (
	"errors"
	"fmt"
	"maps"

	"github.com/wasmhooks/wasmhooks/abi"
)

// Decision is what a handler tells the host to do with the traffic. Build one
// with Continue, Modify, ModifyFields, ModifyPrimary, Block or Ask, and
// refine it with the With... methods, each of which returns a changed copy:
//
//	return sdk.Block("prompt injection").WithUserMessage("Sorry, I can't help with that.")
//
// The zero Decision is Continue(). A Decision is an immutable value, safe to
// copy and to share between goroutines.
type Decision struct {
	action abi.Action
	// fields are the changed context fields of a modify; never mutated
	// after the constructor copied them.
	fields map[string]any
	// primary is set by ModifyPrimary: the field is resolved against the
	// invocation's point when the decision is encoded.
	primary      bool
	primaryValue any

	reason          string
	userMessage     string
	doNotReplyAgain bool
	// ABI 1.2 (decision_words.go): never mutated after WithPending
	// copied it.
	pending      map[string]any
	shortCircuit bool
}

// Continue lets the traffic through unchanged.
func Continue() Decision { return Decision{action: abi.ActionContinue} }

// Modify lets the traffic through with context field changed to value. Only
// the point's changeable fields may be changed ("outgoing" at
// message.outbound, "result" at tool.after, ...); any other field makes the
// host reject the decision as a hook failure.
func Modify(field string, value any) Decision {
	return Decision{action: abi.ActionModify, fields: map[string]any{field: value}}
}

// ModifyFields is Modify for several fields at once. The map is copied. An
// empty map is an invalid decision: a modify must change something.
func ModifyFields(fields map[string]any) Decision {
	return Decision{action: abi.ActionModify, fields: maps.Clone(fields)}
}

// ModifyPrimary is Modify of the point's primary text field, whatever the
// point (see Invocation.PrimaryField). Like the "transform" decision of older
// hook systems, it lets one handler serve several points. At a point without
// a primary field the hook fails.
func ModifyPrimary(value any) Decision {
	return Decision{action: abi.ActionModify, primary: true, primaryValue: value}
}

// Block stops the traffic. reason is for the agent and the audit log; add a
// message for the end user with WithUserMessage.
func Block(reason string) Decision {
	return Decision{action: abi.ActionBlock, reason: reason}
}

// Ask holds the traffic until a human approves it. reason says what needs
// approval.
func Ask(reason string) Decision {
	return Decision{action: abi.ActionAsk, reason: reason}
}

// WithReason returns d with its reason, for the agent and the audit log, set
// to reason.
func (d Decision) WithReason(reason string) Decision {
	d.reason = reason
	return d
}

// WithUserMessage returns d with a message to show the end user.
func (d Decision) WithUserMessage(msg string) Decision {
	d.userMessage = msg
	return d
}

// DoNotReplyAgain returns d asking the platform to suppress further automatic
// replies in the conversation (an anti-loop signal).
func (d Decision) DoNotReplyAgain() Decision {
	d.doNotReplyAgain = true
	return d
}

// errNoPrimary is returned by encode for ModifyPrimary at a point without a
// primary field.
var errNoPrimary = errors.New("ModifyPrimary at a point without a primary text field")

// canonical returns the canonical decision document for a hook running at
// point.
func (d Decision) canonical(point string) (*abi.Decision, error) {
	c := &abi.Decision{
		Action:          d.action,
		Reason:          d.reason,
		UserMessage:     d.userMessage,
		DoNotReplyAgain: d.doNotReplyAgain,
		Pending:         d.pending,
		ShortCircuit:    d.shortCircuit,
	}
	if c.Action == "" {
		c.Action = abi.ActionContinue
	}
	if c.Action == abi.ActionModify {
		c.Context = d.fields
		if d.primary {
			p, _ := lookupPoint(point)
			if p.Primary == "" {
				return nil, fmt.Errorf("%w (point %q)", errNoPrimary, point)
			}
			c.Context = map[string]any{p.Primary: d.primaryValue}
		}
	}
	return c, nil
}

// encode returns the canonical JSON encoding of d for a hook running at
// point. It does not check the decision against the point: the host does, and
// it is the authority on which fields a point lets a hook change.
func (d Decision) encode(point string) ([]byte, error) {
	c, err := d.canonical(point)
	if err != nil {
		return nil, err
	}
	b, err := c.Encode()
	if err != nil {
		return nil, fmt.Errorf("encoding the decision: %w", err)
	}
	return b, nil
}
