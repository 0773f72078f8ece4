package abi

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Point describes a hook point: where in the agent's traffic a hook runs, the
// fields its context carries, and which of them a hook may change.
type Point struct {
	// Name is the point's name, such as "message.outbound".
	Name string
	// Description says when the point runs.
	Description string
	// Fields lists the context fields the host sends, in documentation order.
	Fields []string
	// Changeable lists the fields a modify decision may set. A modify that
	// sets any other field is an invalid output.
	Changeable []string
	// Primary is the point's primary text field: the one a seed-003
	// "transform" decision's transformed_body replaces.
	Primary string
	// Types gives the JSON type of each of Fields (ABI.md, "Hook points").
	// CheckField holds a changed value to it.
	Types map[string]FieldType
}

// FieldType is the JSON type a context field holds.
type FieldType string

// The types of context fields.
const (
	// FieldText is a string: a message, prompt, response, summary, memory
	// value, or an identifier.
	FieldText FieldType = "string"
	// FieldInteger is a JSON integer (a token count).
	FieldInteger FieldType = "integer"
	// FieldMessages is an array of {"role", "content"} objects whose role
	// and content are strings (other keys are allowed).
	FieldMessages FieldType = "messages"
	// FieldArguments is a tool's argument object, or the string a
	// transform makes of it (ABI.md, tool.before).
	FieldArguments FieldType = "arguments"
	// FieldAny is any JSON value (a tool's result).
	FieldAny FieldType = "any"
)

// CheckField reports whether v, a value as abi.ParseJSON produces it
// (json.Number for numbers), has the type of the point's field name. A field
// the point does not type is refused. A nil error means the value fits.
func (p Point) CheckField(name string, v any) error {
	t, ok := p.Types[name]
	if !ok {
		return fmt.Errorf("point %s has no field %q", p.Name, name)
	}
	if fieldHasType(t, v) {
		return nil
	}
	return fmt.Errorf("field %q at %s must be %s, not %s", name, p.Name, describeType(t), jsonKind(v))
}

func fieldHasType(t FieldType, v any) bool {
	switch t {
	case FieldAny:
		return true
	case FieldText:
		_, ok := v.(string)
		return ok
	case FieldInteger:
		switch n := v.(type) {
		case json.Number:
			_, err := n.Int64()
			return err == nil
		case int, int64, int32:
			return true
		}
		return false
	case FieldArguments:
		switch v.(type) {
		case map[string]any, string:
			return true
		}
		return false
	case FieldMessages:
		list, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				return false
			}
			role, rok := m["role"].(string)
			_, cok := m["content"].(string)
			if !rok || !cok || role == "" {
				return false
			}
		}
		return true
	}
	return false
}

func describeType(t FieldType) string {
	switch t {
	case FieldText:
		return "a string"
	case FieldInteger:
		return "an integer"
	case FieldMessages:
		return `an array of {"role", "content"} objects with string role and content`
	case FieldArguments:
		return "an object (or a string)"
	}
	return string(t)
}

// jsonKind names the JSON type of v.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int64, int32:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array (or one with an element of the wrong type)"
	}
	return fmt.Sprintf("%T", v)
}

// CanChange reports whether field is one of the point's changeable fields.
func (p Point) CanChange(field string) bool {
	for _, f := range p.Changeable {
		if f == field {
			return true
		}
	}
	return false
}

// The hook points of ABI v1. ABI.md documents each point's context.
var points = map[string]Point{
	"message.inbound": {
		Name: "message.inbound", Description: "a user's message on its way to the agent",
		Fields: []string{"incoming", "conversation", "user"}, Changeable: []string{"incoming"}, Primary: "incoming",
		Types: map[string]FieldType{"incoming": FieldText, "conversation": FieldText, "user": FieldText},
	},
	"message.outbound": {
		Name: "message.outbound", Description: "the agent's reply on its way to the user",
		Fields: []string{"incoming", "outgoing", "conversation", "user"}, Changeable: []string{"outgoing"}, Primary: "outgoing",
		Types: map[string]FieldType{"incoming": FieldText, "outgoing": FieldText, "conversation": FieldText, "user": FieldText},
	},
	"tool.before": {
		Name: "tool.before", Description: "a tool call the agent is about to make",
		Fields: []string{"tool", "arguments"}, Changeable: []string{"arguments"}, Primary: "arguments",
		Types: map[string]FieldType{"tool": FieldText, "arguments": FieldArguments},
	},
	"tool.after": {
		Name: "tool.after", Description: "a tool's result on its way back to the agent",
		Fields: []string{"tool", "arguments", "result"}, Changeable: []string{"result"}, Primary: "result",
		Types: map[string]FieldType{"tool": FieldText, "arguments": FieldArguments, "result": FieldAny},
	},
	"llm.before": {
		Name: "llm.before", Description: "a request about to be sent to a model",
		Fields: []string{"model", "prompt", "messages"}, Changeable: []string{"prompt", "messages"}, Primary: "prompt",
		Types: map[string]FieldType{"model": FieldText, "prompt": FieldText, "messages": FieldMessages},
	},
	"llm.after": {
		Name: "llm.after", Description: "a model's response",
		Fields: []string{"model", "prompt", "response"}, Changeable: []string{"response"}, Primary: "response",
		Types: map[string]FieldType{"model": FieldText, "prompt": FieldText, "response": FieldText},
	},
	"context.assemble": {
		Name: "context.assemble", Description: "the context window being assembled for the next model call",
		Fields: []string{"items", "tokens"}, Changeable: []string{"items"}, Primary: "",
		Types: map[string]FieldType{"items": FieldMessages, "tokens": FieldInteger},
	},
	"compaction": {
		Name: "compaction", Description: "older context being compacted into a summary",
		Fields: []string{"items", "summary"}, Changeable: []string{"summary"}, Primary: "summary",
		Types: map[string]FieldType{"items": FieldMessages, "summary": FieldText},
	},
	"memory.read": {
		Name: "memory.read", Description: "a long-term memory entry being read into the context",
		Fields: []string{"key", "value"}, Changeable: []string{"value"}, Primary: "value",
		Types: map[string]FieldType{"key": FieldText, "value": FieldText},
	},
	"memory.write": {
		Name: "memory.write", Description: "a long-term memory entry being written",
		Fields: []string{"key", "value"}, Changeable: []string{"value"}, Primary: "value",
		Types: map[string]FieldType{"key": FieldText, "value": FieldText},
	},
}

// LookupPoint returns the point named name.
func LookupPoint(name string) (Point, bool) {
	p, ok := points[name]
	return p, ok
}

// Points returns every point of ABI v1, sorted by name.
func Points() []Point {
	out := make([]Point, 0, len(points))
	for _, p := range points {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
