package abi

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func deployPoint() Point {
	return Point{
		Name: "x.acme.deploy", Description: "a deployment about to start",
		Fields: []string{"service", "version", "plan"}, Changeable: []string{"plan"}, Primary: "plan",
		Types: map[string]FieldType{"service": FieldText, "version": FieldText, "plan": FieldText},
		Fail:  "closed",
	}
}

// TestPointRegistry holds NewPointRegistry to its rules: every refused point
// is a *PointError naming it, and an accepted one is found by Lookup beside
// the built-in points.
func TestPointRegistry(t *testing.T) {
	tests := []struct {
		name   string
		change func(p *Point)
		want   string // "" accepts; else a substring of the error
	}{
		{"valid", func(p *Point) {}, ""},
		{"observers only, nothing changeable", func(p *Point) { p.Changeable, p.Primary, p.Phases = nil, "", []string{PhaseObserver} }, ""},
		{"guards and observers", func(p *Point) { p.Changeable, p.Primary, p.Phases = nil, "", []string{PhaseObserver, PhaseGuard} }, ""},
		{"built-in name", func(p *Point) { p.Name = "tool.before" }, "built-in"},
		{"no x. prefix", func(p *Point) { p.Name = "acme.deploy" }, `"x."`},
		{"bare x.", func(p *Point) { p.Name = "x." }, `"x."`},
		{"upper case", func(p *Point) { p.Name = "x.Acme" }, `"x."`},
		{"empty segment", func(p *Point) { p.Name = "x.acme..deploy" }, `"x."`},
		{"too long", func(p *Point) { p.Name = "x." + strings.Repeat("a", 63) }, `"x."`},
		{"no description", func(p *Point) { p.Description = "" }, "description"},
		{"untyped field", func(p *Point) { delete(p.Types, "version") }, "no type"},
		{"unknown type", func(p *Point) { p.Types["version"] = "float" }, "unknown type"},
		{"type of no field", func(p *Point) { p.Types["extra"] = FieldText }, "not one of Fields"},
		{"bad field name", func(p *Point) { p.Fields[0] = "Service"; p.Types["Service"] = FieldText; delete(p.Types, "service") }, "field name"},
		{"field twice", func(p *Point) { p.Fields = append(p.Fields, "plan") }, "twice"},
		{"field is a decision key", func(p *Point) { p.Fields = append(p.Fields, "reason"); p.Types["reason"] = FieldText }, "decision document's key"},
		{"field is payload", func(p *Point) { p.Fields = append(p.Fields, "payload"); p.Types["payload"] = FieldAny }, "decision document's key"},
		{"changeable not a field", func(p *Point) { p.Changeable = []string{"nope"}; p.Primary = "" }, "not one of Fields"},
		{"primary not changeable", func(p *Point) { p.Primary = "service" }, "not changeable"},
		{"primary an integer", func(p *Point) { p.Types["plan"] = FieldInteger }, "transform sets it to a string"},
		{"transformers with nothing to change", func(p *Point) { p.Changeable, p.Primary = nil, "" }, "no field is changeable"},
		{"unknown phase", func(p *Point) { p.Phases = []string{"auditor"} }, "unknown phase"},
		{"empty phases", func(p *Point) { p.Phases = []string{} }, "Phases is empty"},
		{"phase twice", func(p *Point) { p.Phases = []string{PhaseGuard, PhaseGuard} }, "twice"},
		{"unknown fail", func(p *Point) { p.Fail = "ajar" }, "fail policy"},
		{"too many fields", func(p *Point) {
			p.Fields, p.Types, p.Changeable, p.Primary = nil, map[string]FieldType{}, nil, ""
			p.Phases = []string{PhaseObserver}
			for i := range MaxPointFields + 1 {
				f := fmt.Sprintf("f%d", i)
				p.Fields = append(p.Fields, f)
				p.Types[f] = FieldAny
			}
		}, "fields, more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := deployPoint()
			tt.change(&p)
			r, err := NewPointRegistry(p)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				got, ok := r.Lookup(p.Name)
				if !ok || got.Name != p.Name {
					t.Fatalf("Lookup(%q) = %v, %t", p.Name, got, ok)
				}
				if _, ok := r.Lookup("tool.before"); !ok {
					t.Error("the built-in points are not in the registry")
				}
				if len(r.Points()) != len(Points())+1 || len(r.Registered()) != 1 {
					t.Errorf("Points() has %d, Registered() %d", len(r.Points()), len(r.Registered()))
				}
				return
			}
			var pe *PointError
			if !errors.As(err, &pe) || pe.Point != p.Name {
				t.Fatalf("error %v (%T), want a *PointError for %q", err, err, p.Name)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestPointRegistryLimitsAndCopies(t *testing.T) {
	p := deployPoint()
	if _, err := NewPointRegistry(p, p); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a point registered twice: %v", err)
	}
	many := make([]Point, MaxRegisteredPoints+1)
	for i := range many {
		many[i] = deployPoint()
		many[i].Name = fmt.Sprintf("x.p%d", i)
	}
	if _, err := NewPointRegistry(many...); err == nil || !strings.Contains(err.Error(), "MaxRegisteredPoints") {
		t.Errorf("%d points: %v", len(many), err)
	}
	if _, err := NewPointRegistry(many[:MaxRegisteredPoints]...); err != nil {
		t.Errorf("%d points refused: %v", MaxRegisteredPoints, err)
	}
	// The registry keeps its own copy: the caller's later changes do not
	// reach it.
	r, err := NewPointRegistry(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Changeable[0], p.Types["plan"], p.Fields[0] = "service", FieldAny, "zzz"
	got, _ := r.Lookup(p.Name)
	if got.Changeable[0] != "plan" || got.Types["plan"] != FieldText || got.Fields[0] != "service" {
		t.Errorf("the registry's point changed with the caller's: %+v", got)
	}
	// A nil registry holds the built-in points only.
	var none *PointRegistry
	if _, ok := none.Lookup("tool.before"); !ok {
		t.Error("nil registry: no tool.before")
	}
	if _, ok := none.Lookup(p.Name); ok {
		t.Error("nil registry found a platform point")
	}
	if len(none.Points()) != len(Points()) || none.Registered() != nil {
		t.Error("nil registry lists more than the built-in points")
	}
}

func TestPointPhases(t *testing.T) {
	tests := []struct {
		point string
		phase string
		want  bool
	}{
		{"tool.before", PhaseTransformer, true},
		{"tool.before", PhaseGuard, true},
		{"session.created", PhaseObserver, true},
		{"session.created", PhaseGuard, false},
		{"session.created", PhaseTransformer, false},
		{"loop.exit", PhaseGuard, true},
		{"loop.exit", PhaseTransformer, false},
		{"steering.inject", PhaseTransformer, true},
		{"steering.skip", PhaseGuard, false},
		{"tool.before", "auditor", false},
	}
	for _, tt := range tests {
		p, ok := LookupPoint(tt.point)
		if !ok {
			t.Fatalf("no point %s", tt.point)
		}
		if got := p.AllowsPhase(tt.phase); got != tt.want {
			t.Errorf("%s.AllowsPhase(%q) = %t, want %t", tt.point, tt.phase, got, tt.want)
		}
	}
}

// TestManifestPlatformPoints: a manifest names a platform's point by its x.
// name, accepted at load whatever the platform registered; other unknown
// names are refused.
func TestManifestPlatformPoints(t *testing.T) {
	tests := []struct {
		points string
		ok     bool
	}{
		{`["x.acme.deploy"]`, true},
		{`["tool.before","x.acme.deploy-2"]`, true},
		{`["session.created","loop.exit"]`, true},
		{`["acme.deploy"]`, false},
		{`["x.Acme"]`, false},
		{`["x."]`, false},
	}
	for _, tt := range tests {
		_, err := DecodeManifest([]byte(`{"points":` + tt.points + `}`))
		if (err == nil) != tt.ok {
			t.Errorf("points %s: %v, want ok=%t", tt.points, err, tt.ok)
		}
	}
}
