package abi

import "sort"

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
	},
	"message.outbound": {
		Name: "message.outbound", Description: "the agent's reply on its way to the user",
		Fields: []string{"incoming", "outgoing", "conversation", "user"}, Changeable: []string{"outgoing"}, Primary: "outgoing",
	},
	"tool.before": {
		Name: "tool.before", Description: "a tool call the agent is about to make",
		Fields: []string{"tool", "arguments"}, Changeable: []string{"arguments"}, Primary: "arguments",
	},
	"tool.after": {
		Name: "tool.after", Description: "a tool's result on its way back to the agent",
		Fields: []string{"tool", "arguments", "result"}, Changeable: []string{"result"}, Primary: "result",
	},
	"llm.before": {
		Name: "llm.before", Description: "a request about to be sent to a model",
		Fields: []string{"model", "prompt", "messages"}, Changeable: []string{"prompt", "messages"}, Primary: "prompt",
	},
	"llm.after": {
		Name: "llm.after", Description: "a model's response",
		Fields: []string{"model", "prompt", "response"}, Changeable: []string{"response"}, Primary: "response",
	},
	"context.assemble": {
		Name: "context.assemble", Description: "the context window being assembled for the next model call",
		Fields: []string{"items", "tokens"}, Changeable: []string{"items"}, Primary: "",
	},
	"compaction": {
		Name: "compaction", Description: "older context being compacted into a summary",
		Fields: []string{"items", "summary"}, Changeable: []string{"summary"}, Primary: "summary",
	},
	"memory.read": {
		Name: "memory.read", Description: "a long-term memory entry being read into the context",
		Fields: []string{"key", "value"}, Changeable: []string{"value"}, Primary: "value",
	},
	"memory.write": {
		Name: "memory.write", Description: "a long-term memory entry being written",
		Fields: []string{"key", "value"}, Changeable: []string{"value"}, Primary: "value",
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
