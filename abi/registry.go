package abi

import (
	"fmt"
	"regexp"
	"sort"
)

// MaxRegisteredPoints bounds the points one PointRegistry adds to the
// built-in ones: every point is a map entry and a column of configuration
// checks, and a platform that needs more is generating them.
const MaxRegisteredPoints = 256

// MaxPointFields bounds the context fields of a registered point.
const MaxPointFields = 64

// PlatformPointPrefix starts the name of every point a platform registers
// (ABI.md, "Platform points"). No built-in point starts with it, now or in a
// later minor version, so a platform's point never clashes with one, and a
// manifest can list a platform's point before the host knows it.
const PlatformPointPrefix = "x."

// platformPointRE is the form of a platform point's name: "x." then one or
// more dot-separated lower-case segments, at most 64 bytes in all.
var platformPointRE = regexp.MustCompile(`^x(\.[a-z0-9][a-z0-9_-]*)+$`)

var fieldNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// IsPlatformPointName reports whether name has the form of a platform
// point's name: "x.", then dot-separated segments of lower-case letters,
// digits, '_' and '-' (each starting with a letter or digit), at most 64
// bytes. It says nothing of whether a platform registered it.
func IsPlatformPointName(name string) bool {
	return len(name) <= 64 && platformPointRE.MatchString(name)
}

// PointError reports a point a PointRegistry refuses.
type PointError struct {
	// Point is the refused point's name (as given).
	Point string
	// Reason says what is wrong with it.
	Reason string
}

func (e *PointError) Error() string {
	return fmt.Sprintf("abi: point %q refused: %s", e.Point, e.Reason)
}

// PointRegistry is the set of hook points a host runs hooks at: the built-in
// points of this ABI version plus the points a platform registered. It is
// immutable once made; a nil *PointRegistry holds the built-in points only.
type PointRegistry struct {
	own map[string]Point
}

// NewPointRegistry returns a registry with the built-in points and ps. Each
// of ps must have a platform point's name (IsPlatformPointName), distinct
// from the others; a description; at most MaxPointFields fields, each named
// by lower-case letters, digits and '_' (at most 64) and typed in Types (and
// Types nothing else); changeable fields among its fields, and at least one
// if transformers may run there; a primary field, if any, that is
// changeable and may hold a string; phases among observer,
// transformer and guard (nil: all three); and a fail policy of "", "open" or
// "closed". A refused point is a *PointError. The registry keeps its own
// copies.
func NewPointRegistry(ps ...Point) (*PointRegistry, error) {
	if len(ps) > MaxRegisteredPoints {
		return nil, &PointError{Point: ps[MaxRegisteredPoints].Name, Reason: fmt.Sprintf("more than %d registered points (abi.MaxRegisteredPoints)", MaxRegisteredPoints)}
	}
	r := &PointRegistry{own: make(map[string]Point, len(ps))}
	for _, p := range ps {
		if err := checkPlatformPoint(p); err != nil {
			return nil, err
		}
		if _, dup := r.own[p.Name]; dup {
			return nil, &PointError{Point: p.Name, Reason: "registered twice"}
		}
		r.own[p.Name] = clonePoint(p)
	}
	return r, nil
}

func checkPlatformPoint(p Point) error {
	bad := func(format string, args ...any) error {
		return &PointError{Point: p.Name, Reason: fmt.Sprintf(format, args...)}
	}
	if _, builtin := points[p.Name]; builtin {
		return bad("a built-in point has this name")
	}
	if !IsPlatformPointName(p.Name) {
		return bad(`a platform point's name is "x." then dot-separated segments of a-z, 0-9, '_' and '-', at most 64 bytes (x.acme.deploy, say)`)
	}
	if p.Description == "" {
		return bad("no description")
	}
	if len(p.Fields) > MaxPointFields {
		return bad("%d fields, more than %d (abi.MaxPointFields)", len(p.Fields), MaxPointFields)
	}
	seen := map[string]bool{}
	for _, f := range p.Fields {
		if !fieldNameRE.MatchString(f) {
			return bad("field %q: a field name is 1-64 lower-case letters, digits and '_', starting with a letter", f)
		}
		if seen[f] {
			return bad("field %q listed twice", f)
		}
		if canonicalKeys[f] || outcomeKeys[f] || f == "payload" {
			// A top-level modify of it would read as the decision's own key.
			return bad("field %q is a decision document's key", f)
		}
		seen[f] = true
		switch t := p.Types[f]; t {
		case FieldText, FieldInteger, FieldMessages, FieldArguments, FieldAny:
		case "":
			return bad("field %q has no type in Types", f)
		default:
			return bad("field %q: unknown type %q (want string, integer, messages, arguments or any)", f, t)
		}
	}
	if len(p.Types) != len(p.Fields) {
		for f := range p.Types {
			if !seen[f] {
				return bad("Types has %q, which is not one of Fields", f)
			}
		}
	}
	changeable := map[string]bool{}
	for _, c := range p.Changeable {
		if !seen[c] {
			return bad("changeable field %q is not one of Fields", c)
		}
		if changeable[c] {
			return bad("changeable field %q listed twice", c)
		}
		changeable[c] = true
	}
	if p.Primary != "" {
		if !changeable[p.Primary] {
			return bad("primary field %q is not changeable", p.Primary)
		}
		// A transform sets the primary field to a string.
		if t := p.Types[p.Primary]; t != FieldText && t != FieldArguments && t != FieldAny {
			return bad("primary field %q is %s; a transform sets it to a string", p.Primary, t)
		}
	}
	if p.Phases != nil && len(p.Phases) == 0 {
		return bad("Phases is empty (nil allows every phase)")
	}
	phases := map[string]bool{}
	for _, ph := range p.Phases {
		switch ph {
		case PhaseObserver, PhaseTransformer, PhaseGuard:
		default:
			return bad("unknown phase %q (want observer, transformer or guard)", ph)
		}
		if phases[ph] {
			return bad("phase %q listed twice", ph)
		}
		phases[ph] = true
	}
	if p.AllowsPhase(PhaseTransformer) && len(p.Changeable) == 0 {
		return bad("transformers may run here but no field is changeable (list Changeable, or leave transformer out of Phases)")
	}
	switch p.Fail {
	case "", "open", "closed":
	default:
		return bad("unknown fail policy %q (want open or closed)", p.Fail)
	}
	return nil
}

func clonePoint(p Point) Point {
	p.Fields = append([]string(nil), p.Fields...)
	p.Changeable = append([]string(nil), p.Changeable...)
	if p.Phases != nil {
		p.Phases = append([]string(nil), p.Phases...)
	}
	types := make(map[string]FieldType, len(p.Types))
	for k, v := range p.Types {
		types[k] = v
	}
	p.Types = types
	return p
}

// Lookup returns the point named name: a built-in point, or one r
// registered.
func (r *PointRegistry) Lookup(name string) (Point, bool) {
	if p, ok := points[name]; ok {
		return p, true
	}
	if r == nil {
		return Point{}, false
	}
	p, ok := r.own[name]
	return p, ok
}

// Points returns the built-in points and those r registered, sorted by
// name.
func (r *PointRegistry) Points() []Point {
	out := Points()
	if r == nil {
		return out
	}
	for _, p := range r.own {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Registered returns the points r registered (not the built-in ones),
// sorted by name.
func (r *PointRegistry) Registered() []Point {
	if r == nil {
		return nil
	}
	out := make([]Point, 0, len(r.own))
	for _, p := range r.own {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
