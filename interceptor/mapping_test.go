package interceptor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain"
)

func hint(req, resp int32) *PriorityHint {
	return &PriorityHint{Request: req, Response: resp, perPhase: true}
}

func TestStagesOrder(t *testing.T) {
	list := []*Descriptor{
		{Name: "v-zeta", Type: TypeValidation, PriorityHint: hint(-100, -100)}, // ignored for validators
		{Name: "m-b", Type: TypeMutation},
		{Name: "v-alpha", Type: TypeValidation},
		{Name: "m-a", Type: TypeMutation},
		{Name: "m-late", Type: TypeMutation, PriorityHint: hint(50, -50)},
		{Name: "m-early", Type: TypeMutation, PriorityHint: hint(-50, 50)},
	}
	names := func(stages [][]*Descriptor) string {
		var parts []string
		for _, s := range stages {
			var n []string
			for _, d := range s {
				n = append(n, d.Name)
			}
			parts = append(parts, strings.Join(n, ","))
		}
		return strings.Join(parts, " | ")
	}
	// Request: mutate then validate, in one chain run.
	if got, want := names(Stages(list, PhaseRequest)), "m-early,m-a,m-b,m-late,v-alpha,v-zeta"; got != want {
		t.Errorf("request stages %q, want %q", got, want)
	}
	// Response: validate, then mutate, two runs; priorities per phase.
	if got, want := names(Stages(list, PhaseResponse)), "v-alpha,v-zeta | m-late,m-a,m-b,m-early"; got != want {
		t.Errorf("response stages %q, want %q", got, want)
	}
	b := Binding(list[4], PhaseResponse, false)
	if b.Phase != chain.Transformer || b.Priority != -50 || b.Fail != chain.FailClosed || b.Point != "tool.after" || b.Name != "m-late" {
		t.Errorf("binding %+v", b)
	}
}

func TestBindingModeAndFail(t *testing.T) {
	d := &Descriptor{Name: "acme/pii scan", Type: TypeValidation, Mode: ModeAudit, FailOpen: true}
	b := Binding(d, PhaseRequest, false)
	if b.Name != "acme_pii_scan" || b.Phase != chain.Guard || b.Mode != chain.ModeAudit || b.Fail != chain.FailOpen || b.Point != "tool.before" {
		t.Errorf("binding %+v", b)
	}
	if b := Binding(d, PhaseRequest, true); b.Mode != "" {
		t.Errorf("invoke binding mode %q, want active", b.Mode)
	}
}

func TestEventMatches(t *testing.T) {
	for _, tt := range []struct {
		pattern, event, phase string
		want                  bool
	}{
		{"*", "tools/call", "request", true},
		{"tools/call", "tools/call", "response", true},
		{"tools/call", "tools/list", "request", false},
		{"*/request", "prompts/get", "request", true},
		{"*/request", "prompts/get", "response", false},
		{"*/response", "prompts/get", "", true},
		{"resources/*", "resources/read", "request", true},
		{"resources/*", "tools/call", "request", false},
	} {
		if got := eventMatches(tt.pattern, tt.event, tt.phase); got != tt.want {
			t.Errorf("eventMatches(%q, %q, %q) = %v", tt.pattern, tt.event, tt.phase, got)
		}
	}
}

func TestPriorityHintJSON(t *testing.T) {
	for _, tt := range []struct{ in, out string }{
		{`-1000`, `-1000`},
		{`{"request":-1000}`, `{"request":-1000}`},
		{`{"request":-5,"response":5}`, `{"request":-5,"response":5}`},
	} {
		var p PriorityHint
		if err := json.Unmarshal([]byte(tt.in), &p); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		if string(b) != tt.out {
			t.Errorf("%s round-trips to %s, want %s", tt.in, b, tt.out)
		}
	}
	var p PriorityHint
	if err := json.Unmarshal([]byte(`"high"`), &p); err == nil {
		t.Error("a string priorityHint was accepted")
	}
}

func TestCheckRefuses(t *testing.T) {
	cfg := Config{Modules: map[string][]byte{"m": nil}, Interceptors: []Descriptor{
		{Name: "a/b", Type: TypeValidation, Events: []string{"*"}, Module: "m"},
		{Name: "a_b", Type: TypeValidation, Events: []string{"*"}, Module: "m"},
		{Name: "c", Type: "filter", Events: []string{"*"}, Module: "m"},
		{Name: "d", Type: TypeMutation, Module: "m", Phases: "sometimes"},
		{Name: "e", Type: TypeMutation, Events: []string{"*"}, Module: "m", Mode: "shadow"},
		{Name: "f", Type: TypeMutation, Events: []string{"*"}, Module: "m", Mode: "enforce"},
	}}
	err := check(&cfg)
	for _, want := range []string{`binds as "a_b"`, `type "filter"`, "at least one event", `phases "sometimes"`, `mode "shadow"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check: %v, want it to mention %s", err, want)
		}
	}
	if cfg.Interceptors[5].Mode != ModeActive {
		t.Errorf("legacy enforce read as %q, want active", cfg.Interceptors[5].Mode)
	}
}

func TestListWire(t *testing.T) {
	x := &Executor{cfg: Config{Interceptors: []Descriptor{
		{Name: "a", Type: TypeValidation, Events: []string{"tools/call"}, Phases: PhaseRequest, Mode: ModeAudit, FailOpen: true},
		{Name: "b", Type: TypeMutation, Events: []string{"*/response"}, PriorityHint: &PriorityHint{Request: 7, Response: 7}, Mode: ModeActive},
	}}}
	b, _ := json.Marshal(x.List(""))
	want := `{"interceptors":[{"name":"a","type":"validation","hooks":[{"events":["tools/call"],"phase":"request"}],"mode":"audit","failOpen":true},` +
		`{"name":"b","type":"mutation","hooks":[{"events":["*/response"],"phase":"request"},{"events":["*/response"],"phase":"response"}],"priorityHint":7}]}`
	if string(b) != want {
		t.Errorf("list\n got %s\nwant %s", b, want)
	}
	if b, _ := json.Marshal(x.List("resources/read")); !strings.Contains(string(b), `"name":"b"`) || strings.Contains(string(b), `"name":"a"`) {
		t.Errorf("filtered list %s", b)
	}
}
