// Package interceptor serves wasmhooks chains as MCP interceptors (SEP-1763
// as refined by SEP-2624): every interceptor is a sandboxed, metered WASM
// hook, bound into package chain by a fixed mapping.
//
// # Mapping
//
//   - A validator is a guard binding, a mutator a transformer binding.
//   - An MCP request is the call of a tool: point tool.before, with "tool"
//     the event (such as "tools/call") and "arguments" the payload (the
//     request's params, an object). A response is point tool.after, with
//     "result" the payload. The payload is thus each point's primary
//     field, the one a hook reads and a mutator's modify replaces. The
//     context also carries "mcp": {event, phase, sessionId, server}.
//   - Order follows the SEP's trust boundaries. Request: mutate, then
//     validate: one chain run, whose own order puts transformers before
//     guards. Response: validate, then mutate: two chain runs, the guards'
//     first, and the transformers' only if no guard blocked.
//   - Mutators are ordered by priorityHint for the phase (lower first),
//     ties alphabetically by name; validators, whose priorityHint the SEP
//     ignores, alphabetically. The bindings go into the chain's
//     configuration in that order, so its tie-break by position is the
//     alphabetical one.
//   - failOpen (default false) is the binding's fail policy: open or
//     closed, never the chain's per-point default.
//   - mode "audit" is chain.ModeAudit: the binding runs, its would-be
//     decision and change go to the trace and the audit log, and it never
//     blocks or changes the traffic.
//   - An interceptor's binding is named after it (characters outside
//     [A-Za-z0-9._-] become '_'): the same name in every chain it is in,
//     so its key-value scope (tenant, hook) is one across phases.
package interceptor

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Descriptor is an interceptor as configured: the SEP's descriptor (in the
// conformance suite's form: events and phases) and the hook behind it.
type Descriptor struct {
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Type is "validation" or "mutation".
	Type string `json:"type"`
	// Events are lifecycle events ("tools/call") or wildcards ("*",
	// "*/request", "*/response", "tools/*").
	Events []string `json:"events"`
	// Phases is "request", "response" or "both" (empty means both).
	Phases string `json:"phases,omitempty"`
	// Mode is "active" (empty; "enforce" is read as active) or "audit".
	Mode string `json:"mode,omitempty"`
	// FailOpen lets traffic through when the hook fails. Default false:
	// fail closed.
	FailOpen     bool          `json:"failOpen,omitempty"`
	PriorityHint *PriorityHint `json:"priorityHint,omitempty"`

	// Module names the hook's module in Config.Modules.
	Module string `json:"module"`
	// Settings, Grants and Limits are the binding's (chain.Binding).
	Settings map[string]any `json:"settings,omitempty"`
	Grants   []string       `json:"grants,omitempty"`
	Limits   runtime.Limits `json:"-"`
}

// Config is an interceptor server's configuration.
type Config struct {
	// Modules maps a module name to its bytes.
	Modules map[string][]byte
	// Interceptors are listed in this order.
	Interceptors []Descriptor
}

// hasPhase reports whether d hooks phase.
func (d *Descriptor) hasPhase(phase string) bool {
	return d.Phases == "" || d.Phases == PhaseBoth || d.Phases == phase
}

func (d *Descriptor) phases() []string {
	switch d.Phases {
	case PhaseRequest, PhaseResponse:
		return []string{d.Phases}
	}
	return []string{PhaseRequest, PhaseResponse}
}

// matches reports whether d hooks event in phase.
func (d *Descriptor) matches(event, phase string) bool {
	if !d.hasPhase(phase) {
		return false
	}
	for _, e := range d.Events {
		if eventMatches(e, event, phase) {
			return true
		}
	}
	return false
}

// eventMatches reports whether the hooked event pattern covers event in
// phase ("" matches any phase: the list filter).
func eventMatches(pattern, event, phase string) bool {
	switch {
	case pattern == "*" || pattern == event:
		return true
	case pattern == "*/request" || pattern == "*/response":
		return phase == "" || pattern == "*/"+phase
	case strings.HasSuffix(pattern, "/*"):
		return strings.HasPrefix(event, strings.TrimSuffix(pattern, "*"))
	}
	return false
}

var bindingBad = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// BindingName is the name of the binding of the interceptor name.
func BindingName(name string) string { return bindingBad.ReplaceAllString(name, "_") }

// Point is the hook point of an MCP phase, and PayloadField the context
// field that carries the payload there.
func Point(phase string) (point, payloadField string) {
	if phase == PhaseResponse {
		return "tool.after", "result"
	}
	return "tool.before", "arguments"
}

// check validates the descriptors and normalises them (legacy "enforce").
func check(cfg *Config) error {
	var problems []string
	names := map[string]bool{}
	bindings := map[string]string{}
	for i := range cfg.Interceptors {
		d := &cfg.Interceptors[i]
		what := fmt.Sprintf("interceptor %d (%q)", i, d.Name)
		if d.Name == "" {
			problems = append(problems, what+": a name is required")
			continue
		}
		if names[d.Name] {
			problems = append(problems, what+": duplicate name")
		}
		names[d.Name] = true
		b := BindingName(d.Name)
		if other, ok := bindings[b]; ok {
			problems = append(problems, fmt.Sprintf("%s: binds as %q, as %q does", what, b, other))
		}
		bindings[b] = d.Name
		if d.Type != TypeValidation && d.Type != TypeMutation {
			problems = append(problems, fmt.Sprintf("%s: type %q (want validation or mutation)", what, d.Type))
		}
		if len(d.Events) == 0 {
			problems = append(problems, what+": at least one event is required")
		}
		switch d.Phases {
		case "", PhaseRequest, PhaseResponse, PhaseBoth:
		default:
			problems = append(problems, fmt.Sprintf("%s: phases %q (want request, response or both)", what, d.Phases))
		}
		switch d.Mode {
		case "", ModeActive, ModeAudit:
		case "enforce":
			d.Mode = ModeActive
		default:
			problems = append(problems, fmt.Sprintf("%s: mode %q (want active or audit)", what, d.Mode))
		}
		if _, ok := cfg.Modules[d.Module]; !ok {
			problems = append(problems, fmt.Sprintf("%s: unknown module %q", what, d.Module))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("interceptor: configuration refused: %s", strings.Join(problems, "; "))
	}
	return nil
}

// ordered returns the interceptors among list that hook event in phase, of
// type typ ("" for both), in the order they run: mutators by priorityHint
// for the phase, then name; validators by name.
func ordered(list []*Descriptor, typ, phase string) []*Descriptor {
	var out []*Descriptor
	for _, d := range list {
		if typ == "" || d.Type == typ {
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		pa, pb := priority(a, phase), priority(b, phase)
		if pa != pb {
			return pa < pb
		}
		return a.Name < b.Name
	})
	return out
}

func priority(d *Descriptor, phase string) int32 {
	if d.Type != TypeMutation {
		return 0
	}
	return d.PriorityHint.For(phase)
}

// Stages returns the runs a chain execution of the interceptors list (those
// that hook the event) makes in phase, in order: request, one run (the
// chain puts its transformers before its guards); response, the validators'
// run, then the mutators'.
func Stages(list []*Descriptor, phase string) [][]*Descriptor {
	if phase == PhaseResponse {
		var out [][]*Descriptor
		for _, typ := range []string{TypeValidation, TypeMutation} {
			if s := ordered(list, typ, phase); len(s) > 0 {
				out = append(out, s)
			}
		}
		return out
	}
	all := append(ordered(list, TypeMutation, phase), ordered(list, TypeValidation, phase)...)
	if len(all) == 0 {
		return nil
	}
	return [][]*Descriptor{all}
}

// Binding is the chain binding of d in phase. active forces active mode
// (interceptor/invoke reports what the hook decides, whatever its mode).
func Binding(d *Descriptor, phase string, active bool) chain.Binding {
	point, _ := Point(phase)
	b := chain.Binding{
		Name: BindingName(d.Name), Module: d.Module, Point: point,
		Phase: chain.Guard, Priority: int(priority(d, phase)),
		Settings: d.Settings, Grants: d.Grants, Limits: d.Limits, Fail: chain.FailClosed,
	}
	if d.Type == TypeMutation {
		b.Phase = chain.Transformer
	}
	if d.FailOpen {
		b.Fail = chain.FailOpen
	}
	if d.Mode == ModeAudit && !active {
		b.Mode = chain.ModeAudit
	}
	return b
}

// describe is d as interceptors/list puts it on the wire.
func describe(d *Descriptor) Interceptor {
	it := Interceptor{
		Name: d.Name, Version: d.Version, Description: d.Description, Type: d.Type,
		FailOpen: d.FailOpen, PriorityHint: d.PriorityHint,
	}
	if d.Mode == ModeAudit {
		it.Mode = ModeAudit
	}
	for _, p := range d.phases() {
		it.Hooks = append(it.Hooks, Hook{Events: append([]string(nil), d.Events...), Phase: p})
	}
	return it
}
