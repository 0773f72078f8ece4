package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestTrafficSpliced: the chain holds the traffic as an abi.Object. Each
// hook gets the bytes Marshal writes for the context as it stands (not a map
// to encode again), and the settings encoded when the configuration was
// built; a modify is spliced into those bytes, changes only the fields whose
// encoding changed, and the audit digests are those of the contexts' maps.
func TestTrafficSpliced(t *testing.T) {
	in := map[string]any{"tool": "search <web>", "arguments": map[string]any{"q": "x", "n": json.Number("3")}}
	settings := map[string]any{"mode": "strict", "list": []any{"a"}}
	for _, tc := range []struct {
		name    string
		modify  map[string]any
		changed []string // nil: the modify changes nothing, and is a continue
	}{
		{"replace", map[string]any{"tool": "fetch"}, []string{"tool"}},
		{"one of two", map[string]any{"tool": "fetch", "arguments": map[string]any{"n": json.Number("3"), "q": "x"}}, []string{"tool"}},
		{"same encoding, other type", map[string]any{"arguments": map[string]any{"q": "x", "n": 3}}, nil},
		{"nested", map[string]any{"arguments": map[string]any{"q": "x", "z": []any{1.5, nil}}}, []string{"arguments"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []runtime.Request
			invoke := func(_ context.Context, _ *runtime.Module, req runtime.Request) (*runtime.Result, error) {
				req.ContextObject = mustObject(t, req.ContextObject.Bytes()) // a copy: the chain reuses its storage
				got = append(got, req)
				if req.Hook == "edit" {
					return &runtime.Result{Decision: &abi.Decision{Action: abi.ActionModify, Context: tc.modify}}, nil
				}
				return &runtime.Result{Decision: &abi.Decision{Action: abi.ActionContinue}}, nil
			}
			e := newEnv(t, policyConfig(t,
				Binding{Name: "edit", Point: "tool.before", Phase: Transformer, Settings: settings},
				Binding{Name: "after", Point: "tool.before", Phase: Guard}), withInvoke(t, invoke))
			out := e.run(t, "tool.before", maps.Clone(in))
			want := maps.Clone(in)
			maps.Copy(want, tc.modify)
			if tc.changed == nil {
				want = in
			}
			if len(got) != 2 {
				t.Fatalf("%d invocations", len(got))
			}
			for i, ctx := range []map[string]any{in, want} {
				req := got[i]
				if req.Context != nil || req.Settings != nil {
					t.Errorf("hook %d got maps to encode: %v %v", i, req.Context, req.Settings)
				}
				if b := marshal(t, ctx); !bytes.Equal(req.ContextObject.Bytes(), b) {
					t.Errorf("hook %d got context %s, want %s", i, req.ContextObject.Bytes(), b)
				}
			}
			if b := marshal(t, settings); !bytes.Equal(got[0].SettingsObject.Bytes(), b) {
				t.Errorf("settings %s, want %s", got[0].SettingsObject.Bytes(), b)
			}
			if !bytes.Equal(marshal(t, out.Context), marshal(t, want)) || out.Modified != (tc.changed != nil) {
				t.Errorf("outcome context %v (modified %v), want %v", out.Context, out.Modified, want)
			}
			if ch := out.Trace[0].Changed; !slices.Equal(ch, tc.changed) {
				t.Errorf("changed %v, want %v", ch, tc.changed)
			}
			recs := e.sink.Records()
			if recs[0].Input != audit.Digest(in) || recs[0].Output != audit.Digest(want) || recs[1].Input != audit.Digest(want) {
				t.Errorf("digests %s %s %s, want those of %v and %v", recs[0].Input, recs[0].Output, recs[1].Input, in, want)
			}
			if len(recs[0].Diff) != len(tc.changed) {
				t.Errorf("diff %+v, want one change for each of %v", recs[0].Diff, tc.changed)
			}
			for i, d := range recs[0].Diff {
				if i < len(tc.changed) && d.Field != tc.changed[i] {
					t.Errorf("diff field %q, want %q", d.Field, tc.changed[i])
				}
				if d.Before != digestOr(in, d.Field) || d.After != audit.Digest(want[d.Field]) {
					t.Errorf("diff %+v", d)
				}
			}
		})
	}
}

// TestTrafficUnencodable: a context Marshal refuses has no Object; the
// runtime gets the map (and refuses it, as it always did), the digests are
// Digest's, and a modify merges maps.
func TestTrafficUnencodable(t *testing.T) {
	var got []runtime.Request
	invoke := func(_ context.Context, _ *runtime.Module, req runtime.Request) (*runtime.Result, error) {
		got = append(got, req)
		return &runtime.Result{Decision: &abi.Decision{Action: abi.ActionModify, Context: map[string]any{"tool": "y"}}}, nil
	}
	e := newEnv(t, policyConfig(t, Binding{Name: "edit", Point: "tool.before", Phase: Transformer}), withInvoke(t, invoke))
	in := map[string]any{"arguments": map[string]any{"bad": make(chan int)}, "tool": "z"}
	out := e.run(t, "tool.before", in)
	if len(got) != 1 || got[0].Context == nil || !reflect.DeepEqual(out.Trace[0].Changed, []string{"tool"}) || out.Context["tool"] != "y" {
		t.Fatalf("requests %+v, outcome %+v", got, out)
	}
	if recs := e.sink.Records(); recs[0].Input != audit.Digest(in) || recs[0].Output != audit.Digest(out.Context) {
		t.Errorf("digests %s %s", recs[0].Input, recs[0].Output)
	}
}

func digestOr(m map[string]any, k string) string {
	if v, ok := m[k]; ok {
		return audit.Digest(v)
	}
	return ""
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := abi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustObject(t *testing.T, b []byte) abi.Object {
	o, err := abi.ParseObject(b, abi.JSONLimits{})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestInvocationIDs checks that the ids a run makes in one string (perRun)
// are each the run's id, a dot and the step's trace index, as one made
// alone would be: for steps in order, with gaps (steps that invoke no hook),
// past the sixteen made at once, from a resumed run's index, and for run ids
// too long to make them together; and that decision gives each step a Decision of
// its own.
func TestInvocationIDs(t *testing.T) {
	for _, tt := range []struct {
		run     string
		left    int
		indexes []int
	}{
		{"r", 1, []int{0}},
		{"r", 3, []int{0, 1, 2}},
		{"run-7", 5, []int{0, 2, 4}},
		{"abc", 20, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
		{"resumed", 4, []int{7, 8, 9, 10}},
		{"late", 6, []int{3, 5}},
		{strings.Repeat("x", 400), 4, []int{0, 1, 2, 3}},
		{strings.Repeat("y", 70000), 3, []int{0, 1, 2}},
	} {
		p := perRun{run: tt.run, left: tt.left}
		seen := map[*abi.Decision]bool{}
		for _, i := range tt.indexes {
			if got, want := p.invocationID(i), tt.run+"."+strconv.Itoa(i); got != want {
				t.Errorf("run %.10q, left %d: id of %d = %.20q, want %.20q", tt.run, tt.left, i, got, want)
			}
			d := p.decision()
			if seen[d] || !reflect.DeepEqual(*d, abi.Decision{}) {
				t.Errorf("run %.10q: decision %p for %d is shared or not zero", tt.run, d, i)
			}
			seen[d] = true
		}
	}
}
