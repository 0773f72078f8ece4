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
	// Phases lists the chain phases a binding at the point may run in
	// ("observer", "transformer", "guard"); nil means all three. A
	// notification point (something already happened) allows observers
	// only. See AllowsPhase.
	Phases []string
	// Fail is the fail policy ("open" or "closed") of a transformer at
	// the point that does not set one; empty means closed. Observers
	// default to open and guards to closed at every point.
	Fail string
}

// The phases a Point may allow: the values of chain.Phase.
const (
	PhaseObserver    = "observer"
	PhaseTransformer = "transformer"
	PhaseGuard       = "guard"
)

// AllowsPhase reports whether a binding at the point may run in phase.
func (p Point) AllowsPhase(phase string) bool {
	if p.Phases == nil {
		return phase == PhaseObserver || phase == PhaseTransformer || phase == PhaseGuard
	}
	for _, ph := range p.Phases {
		if ph == phase {
			return true
		}
	}
	return false
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

// observersOnly is the Phases of a notification point.
var observersOnly = []string{PhaseObserver}

// The hook points of ABI v1. ABI.md documents each point's context.
var points = map[string]Point{
	"message.inbound": {
		Name: "message.inbound", Description: "a user's message on its way to the agent",
		Fields: []string{"incoming", "conversation", "user"}, Changeable: []string{"incoming"}, Primary: "incoming",
		Types: map[string]FieldType{"incoming": FieldText, "conversation": FieldText, "user": FieldText},
		Fail:  "open",
	},
	"message.outbound": {
		Name: "message.outbound", Description: "the agent's reply on its way to the user",
		Fields: []string{"incoming", "outgoing", "conversation", "user"}, Changeable: []string{"outgoing"}, Primary: "outgoing",
		Types: map[string]FieldType{"incoming": FieldText, "outgoing": FieldText, "conversation": FieldText, "user": FieldText},
		Fail:  "closed",
	},
	"tool.before": {
		Name: "tool.before", Description: "a tool call the agent is about to make",
		Fields: []string{"tool", "arguments"}, Changeable: []string{"arguments"}, Primary: "arguments",
		Types: map[string]FieldType{"tool": FieldText, "arguments": FieldArguments},
		Fail:  "closed",
	},
	"tool.after": {
		Name: "tool.after", Description: "a tool's result on its way back to the agent",
		Fields: []string{"tool", "arguments", "result"}, Changeable: []string{"result"}, Primary: "result",
		Types: map[string]FieldType{"tool": FieldText, "arguments": FieldArguments, "result": FieldAny},
		Fail:  "open",
	},
	"llm.before": {
		Name: "llm.before", Description: "a request about to be sent to a model",
		Fields: []string{"model", "prompt", "messages"}, Changeable: []string{"prompt", "messages"}, Primary: "prompt",
		Types: map[string]FieldType{"model": FieldText, "prompt": FieldText, "messages": FieldMessages},
		Fail:  "closed",
	},
	"llm.after": {
		Name: "llm.after", Description: "a model's response",
		Fields: []string{"model", "prompt", "response"}, Changeable: []string{"response"}, Primary: "response",
		Types: map[string]FieldType{"model": FieldText, "prompt": FieldText, "response": FieldText},
		Fail:  "open",
	},
	"context.assemble": {
		Name: "context.assemble", Description: "the context window being assembled for the next model call",
		Fields: []string{"items", "tokens"}, Changeable: []string{"items"}, Primary: "",
		Types: map[string]FieldType{"items": FieldMessages, "tokens": FieldInteger},
		Fail:  "open",
	},
	"compaction": {
		Name: "compaction", Description: "older context being compacted into a summary",
		Fields: []string{"items", "summary"}, Changeable: []string{"summary"}, Primary: "summary",
		Types: map[string]FieldType{"items": FieldMessages, "summary": FieldText},
		Fail:  "open",
	},
	"memory.read": {
		Name: "memory.read", Description: "a long-term memory entry being read into the context",
		Fields: []string{"key", "value"}, Changeable: []string{"value"}, Primary: "value",
		Types: map[string]FieldType{"key": FieldText, "value": FieldText},
		Fail:  "open",
	},
	"memory.write": {
		Name: "memory.write", Description: "a long-term memory entry being written",
		Fields: []string{"key", "value"}, Changeable: []string{"value"}, Primary: "value",
		Types: map[string]FieldType{"key": FieldText, "value": FieldText},
		Fail:  "closed",
	},

	// Since 1.2: the lifecycle events of seed 000's event bus, as
	// notification points (observers only), and skelegent's exit check
	// and steering rules (seed 001).
	"session.created": {
		Name: "session.created", Description: "a new session was created",
		Fields: []string{"session", "user"},
		Types:  map[string]FieldType{"session": FieldText, "user": FieldText}, Phases: observersOnly,
	},
	"session.forked": {
		Name: "session.forked", Description: "a session was forked (branched) from another",
		Fields: []string{"session", "parent", "user"},
		Types:  map[string]FieldType{"session": FieldText, "parent": FieldText, "user": FieldText}, Phases: observersOnly,
	},
	"session.ended": {
		Name: "session.ended", Description: "a session ended",
		Fields: []string{"session", "user"},
		Types:  map[string]FieldType{"session": FieldText, "user": FieldText}, Phases: observersOnly,
	},
	"tool.gap": {
		Name: "tool.gap", Description: "the agent asked for a tool it does not have",
		Fields: []string{"tool", "arguments"},
		Types:  map[string]FieldType{"tool": FieldText, "arguments": FieldArguments}, Phases: observersOnly,
	},
	"tool.failed": {
		Name: "tool.failed", Description: "a tool call failed",
		Fields: []string{"tool", "arguments", "error"},
		Types:  map[string]FieldType{"tool": FieldText, "arguments": FieldArguments, "error": FieldText}, Phases: observersOnly,
	},
	"llm.failed": {
		Name: "llm.failed", Description: "a model call failed",
		Fields: []string{"model", "error"},
		Types:  map[string]FieldType{"model": FieldText, "error": FieldText}, Phases: observersOnly,
	},
	"agent.created": {
		Name: "agent.created", Description: "an agent was created at runtime (a dynamic agent)",
		Fields: []string{"agent", "parent", "definition"},
		Types:  map[string]FieldType{"agent": FieldText, "parent": FieldText, "definition": FieldAny}, Phases: observersOnly,
	},
	"context.overflow": {
		Name: "context.overflow", Description: "the context window is exhausted",
		Fields: []string{"tokens", "limit"},
		Types:  map[string]FieldType{"tokens": FieldInteger, "limit": FieldInteger}, Phases: observersOnly,
	},
	"skill.injected": {
		Name: "skill.injected", Description: "skills were injected into the context",
		Fields: []string{"skills", "tokens"},
		Types:  map[string]FieldType{"skills": FieldAny, "tokens": FieldInteger}, Phases: observersOnly,
	},
	"compaction.triggered": {
		Name: "compaction.triggered", Description: "context compaction started",
		Fields: []string{"items", "tokens"},
		Types:  map[string]FieldType{"items": FieldMessages, "tokens": FieldInteger}, Phases: observersOnly,
	},
	"compaction.completed": {
		Name: "compaction.completed", Description: "context compaction finished",
		Fields: []string{"summary", "tokens_before", "tokens_after"},
		Types:  map[string]FieldType{"summary": FieldText, "tokens_before": FieldInteger, "tokens_after": FieldInteger}, Phases: observersOnly,
	},
	"loop.exit": {
		Name: "loop.exit", Description: "the agent loop is about to end its turn (the exit check); a block halts it",
		Fields: []string{"response", "iterations"},
		Types:  map[string]FieldType{"response": FieldText, "iterations": FieldInteger},
		Phases: []string{PhaseObserver, PhaseGuard},
	},
	"steering.inject": {
		Name: "steering.inject", Description: "steering messages about to be injected into the running loop",
		Fields: []string{"messages"}, Changeable: []string{"messages"},
		Types: map[string]FieldType{"messages": FieldMessages},
		Fail:  "open",
	},
	// Since 1.3: streaming points (ABI.md, "Streaming"). The host runs
	// them over a hold-back window of a reply that arrives in chunks
	// (chain.Stream): the primary field holds the window, offset the
	// characters of the reply released before it, final whether the
	// window ends the reply.
	"llm.output.stream": {
		Name: "llm.output.stream", Description: "a window of a model's streamed response, before any of it is released",
		Fields: []string{"model", "prompt", "response", "offset", "final"}, Changeable: []string{"response"}, Primary: "response",
		Types: map[string]FieldType{"model": FieldText, "prompt": FieldText, "response": FieldText, "offset": FieldInteger, "final": FieldAny},
		Fail:  "open",
	},
	"message.outbound.stream": {
		Name: "message.outbound.stream", Description: "a window of the agent's streamed reply, before any of it reaches the user",
		Fields: []string{"incoming", "outgoing", "conversation", "user", "offset", "final"}, Changeable: []string{"outgoing"}, Primary: "outgoing",
		Types: map[string]FieldType{"incoming": FieldText, "outgoing": FieldText, "conversation": FieldText, "user": FieldText, "offset": FieldInteger, "final": FieldAny},
		Fail:  "closed",
	},
	"steering.skip": {
		Name: "steering.skip", Description: "steering messages were skipped, not injected",
		Fields: []string{"messages"},
		Types:  map[string]FieldType{"messages": FieldMessages}, Phases: observersOnly,
	},
}

// StreamPoints maps each streaming point (ABI.md, "Streaming") to the point
// that carries the same traffic whole: a hook's decision on a whole message
// at a streaming point is what chain.Stream's released text equals.
var StreamPoints = map[string]string{
	"llm.output.stream":       "llm.after",
	"message.outbound.stream": "message.outbound",
}

// IsStreamPoint reports whether name is a streaming point: its context has
// the fields "offset" (integer) and "final" (boolean) besides a primary
// text field, and chain.Stream runs it over a hold-back window.
func IsStreamPoint(name string) bool {
	_, ok := StreamPoints[name]
	return ok
}

// LookupPoint returns the point named name.
func LookupPoint(name string) (Point, bool) {
	p, ok := points[name]
	return p, ok
}

// Points returns every point of ABI v1 (the built-in points), sorted by name.
func Points() []Point {
	out := make([]Point, 0, len(points))
	for _, p := range points {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
