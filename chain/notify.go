package chain

import "github.com/wasmhooks/wasmhooks/abi"

// Notification is a hook's notify (ABI 1.2): the traffic went on unchanged,
// and the hook asks the platform to tell a human. Seed 000's permission
// levels are allow (continue), notify, ask and deny (block).
type Notification struct {
	// Binding notified, in Phase.
	Binding string `json:"binding"`
	Phase   Phase  `json:"phase"`
	// Reason and UserMessage are the hook's own words: untrusted, like
	// Payload, and to be shown as text, never interpreted.
	Reason      string `json:"reason,omitempty"`
	UserMessage string `json:"user_message,omitempty"`
	// Payload is the decision's payload, as the hook gave it.
	Payload map[string]any `json:"payload,omitempty"`
	// Audit is the hash of the step's audit record (its decision is
	// "notify").
	Audit string `json:"audit"`
}

// notification returns the notification of a step that applied a notify.
func notification(b *bound, step *Step, dec *abi.Decision) Notification {
	n := Notification{Binding: b.Name, Phase: b.Phase, Audit: step.Audit}
	if dec != nil {
		n.Reason, n.UserMessage, n.Payload = dec.Reason, dec.UserMessage, dec.Payload
	}
	return n
}
