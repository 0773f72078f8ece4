package abi

import (
	"encoding/json"
	"fmt"
)

// Invocation is the document the host parks before calling hook_v1_handle.
type Invocation struct {
	// ABI is the ABI major version, always Major.
	ABI int `json:"abi"`
	// Point is the hook point's name.
	Point string `json:"point"`
	// Context is the traffic the hook sees; its shape depends on Point.
	Context map[string]any `json:"context"`
	// Settings are the hook's own settings, validated against its
	// settings schema.
	Settings map[string]any `json:"settings"`
	// Meta identifies the invocation.
	Meta Meta `json:"meta"`
}

// Meta identifies an invocation to the hook.
type Meta struct {
	Hook       string `json:"hook"`
	Invocation string `json:"invocation"`
	Tenant     string `json:"tenant"`
}

// Encode returns the invocation document as compact JSON. Nil Context and
// Settings encode as empty objects.
func (inv *Invocation) Encode() ([]byte, error) {
	c := *inv
	if c.ABI == 0 {
		c.ABI = Major
	}
	if c.Context == nil {
		c.Context = map[string]any{}
	}
	if c.Settings == nil {
		c.Settings = map[string]any{}
	}
	return Marshal(&c)
}

// InvocationError reports an invocation document that does not follow ABI.md.
type InvocationError struct {
	Reason string
	Err    error
}

func (e *InvocationError) Error() string { return errorText("invalid invocation", e.Reason, e.Err) }

func (e *InvocationError) Unwrap() error { return e.Err }

// DecodeInvocation parses an invocation document strictly. Unknown top-level
// fields are ignored (later minor versions add fields).
func DecodeInvocation(data []byte, lim JSONLimits) (*Invocation, error) {
	m, reason, err := parseObject(data, lim)
	if reason != "" {
		return nil, &InvocationError{Reason: reason, Err: err}
	}
	inv := &Invocation{}
	n, ok := m["abi"].(json.Number)
	if !ok {
		return nil, &InvocationError{Reason: `"abi" must be a number`}
	}
	if abi, err := n.Int64(); err != nil || abi != Major {
		return nil, &InvocationError{Reason: fmt.Sprintf(`"abi" is %s, this code speaks %d`, n, Major)}
	}
	inv.ABI = Major
	if inv.Point, ok = m["point"].(string); !ok {
		return nil, &InvocationError{Reason: `"point" must be a string`}
	}
	if inv.Context, ok = m["context"].(map[string]any); !ok {
		return nil, &InvocationError{Reason: `"context" must be an object`}
	}
	if s, present := m["settings"]; present && s != nil {
		if inv.Settings, ok = s.(map[string]any); !ok {
			return nil, &InvocationError{Reason: `"settings" must be an object`}
		}
	}
	if inv.Settings == nil {
		inv.Settings = map[string]any{}
	}
	if mv, present := m["meta"]; present && mv != nil {
		meta, ok := mv.(map[string]any)
		if !ok {
			return nil, &InvocationError{Reason: `"meta" must be an object`}
		}
		for _, f := range []struct {
			key string
			dst *string
		}{{"hook", &inv.Meta.Hook}, {"invocation", &inv.Meta.Invocation}, {"tenant", &inv.Meta.Tenant}} {
			if s, present := meta[f.key]; present {
				if *f.dst, ok = s.(string); !ok {
					return nil, &InvocationError{Reason: fmt.Sprintf(`"meta.%s" must be a string`, f.key)}
				}
			}
		}
	}
	return inv, nil
}
