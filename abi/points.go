package abi

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
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

// pointSpec is a built-in point as the table below writes it, each fact
// once: context lists the fields in documentation order, each "name" (a
// string) or "name:type" (the FieldType of that value), and change the
// changeable ones.
type pointSpec struct {
	name, description string
	context, change   string
	primary, fail     string
	phases            []string
}

// pointTable makes the points of specs, by name.
func pointTable(specs []pointSpec) map[string]Point {
	points := make(map[string]Point, len(specs))
	for _, s := range specs {
		p := Point{Name: s.name, Description: s.description, Primary: s.primary, Types: map[string]FieldType{},
			Phases: s.phases, Fail: s.fail}
		for _, f := range strings.Fields(s.context) {
			name, typ, typed := strings.Cut(f, ":")
			if !typed {
				typ = string(FieldText)
			}
			p.Fields = append(p.Fields, name)
			p.Types[name] = FieldType(typ)
		}
		if s.change != "" {
			p.Changeable = strings.Fields(s.change)
		}
		points[s.name] = p
	}
	return points
}

// The hook points of ABI v1. ABI.md documents each point's context.
var points = pointTable([]pointSpec{
	{name: "message.inbound", description: "a user's message on its way to the agent",
		context: "incoming conversation user", change: "incoming", primary: "incoming", fail: "open"},
	{name: "message.outbound", description: "the agent's reply on its way to the user",
		context: "incoming outgoing conversation user", change: "outgoing", primary: "outgoing", fail: "closed"},
	{name: "tool.before", description: "a tool call the agent is about to make",
		context: "tool arguments:arguments", change: "arguments", primary: "arguments", fail: "closed"},
	{name: "tool.after", description: "a tool's result on its way back to the agent",
		context: "tool arguments:arguments result:any", change: "result", primary: "result", fail: "open"},
	{name: "llm.before", description: "a request about to be sent to a model",
		context: "model prompt messages:messages", change: "prompt messages", primary: "prompt", fail: "closed"},
	{name: "llm.after", description: "a model's response",
		context: "model prompt response", change: "response", primary: "response", fail: "open"},
	{name: "context.assemble", description: "the context window being assembled for the next model call",
		context: "items:messages tokens:integer", change: "items", fail: "open"},
	{name: "compaction", description: "older context being compacted into a summary",
		context: "items:messages summary", change: "summary", primary: "summary", fail: "open"},
	{name: "memory.read", description: "a long-term memory entry being read into the context",
		context: "key value", change: "value", primary: "value", fail: "open"},
	{name: "memory.write", description: "a long-term memory entry being written",
		context: "key value", change: "value", primary: "value", fail: "closed"},

	// Since 1.2: the lifecycle events of seed 000's event bus, as
	// notification points (observers only), and skelegent's exit check
	// and steering rules (seed 001).
	{name: "session.created", description: "a new session was created",
		context: "session user", phases: observersOnly},
	{name: "session.forked", description: "a session was forked (branched) from another",
		context: "session parent user", phases: observersOnly},
	{name: "session.ended", description: "a session ended",
		context: "session user", phases: observersOnly},
	{name: "tool.gap", description: "the agent asked for a tool it does not have",
		context: "tool arguments:arguments", phases: observersOnly},
	{name: "tool.failed", description: "a tool call failed",
		context: "tool arguments:arguments error", phases: observersOnly},
	{name: "llm.failed", description: "a model call failed",
		context: "model error", phases: observersOnly},
	{name: "agent.created", description: "an agent was created at runtime (a dynamic agent)",
		context: "agent parent definition:any", phases: observersOnly},
	{name: "context.overflow", description: "the context window is exhausted",
		context: "tokens:integer limit:integer", phases: observersOnly},
	{name: "skill.injected", description: "skills were injected into the context",
		context: "skills:any tokens:integer", phases: observersOnly},
	{name: "compaction.triggered", description: "context compaction started",
		context: "items:messages tokens:integer", phases: observersOnly},
	{name: "compaction.completed", description: "context compaction finished",
		context: "summary tokens_before:integer tokens_after:integer", phases: observersOnly},
	{name: "loop.exit", description: "the agent loop is about to end its turn (the exit check); a block halts it",
		context: "response iterations:integer", phases: []string{PhaseObserver, PhaseGuard}},
	{name: "steering.inject", description: "steering messages about to be injected into the running loop",
		context: "messages:messages", change: "messages", fail: "open"},
	// Since 1.3: streaming points (ABI.md, "Streaming"). The host runs
	// them over a hold-back window of a reply that arrives in chunks
	// (chain.Stream): the primary field holds the window, offset the
	// characters of the reply released before it, final whether the
	// window ends the reply.
	{name: "llm.output.stream", description: "a window of a model's streamed response, before any of it is released",
		context: "model prompt response offset:integer final:any", change: "response", primary: "response", fail: "open"},
	{name: "message.outbound.stream", description: "a window of the agent's streamed reply, before any of it reaches the user",
		context: "incoming outgoing conversation user offset:integer final:any", change: "outgoing", primary: "outgoing", fail: "closed"},
	{name: "steering.skip", description: "steering messages were skipped, not injected",
		context: "messages:messages", phases: observersOnly},
})

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
