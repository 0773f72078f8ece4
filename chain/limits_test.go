package chain

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// halfDefault returns a Limits whose field i is half its default: valid, and
// neither zero nor the default.
func halfDefault(t *testing.T, i int) runtime.Limits {
	return testutil.HalfField(t, runtime.Limits{}.WithDefaults(), i)
}

// TestConfigDigestCoversEveryLimit: two configurations that differ only in
// one limit have different digests (the digest decides whether a paused
// approval resumes, and goes into every audit record). It failed for Fuel,
// InitFuel and MaxStackBytes while the digest listed the limits by hand.
func TestConfigDigestCoversEveryLimit(t *testing.T) {
	digest := func(t *testing.T, l runtime.Limits) string {
		t.Helper()
		c, err := New(context.Background(), policyConfig(t, Binding{Name: "g", Point: toolBefore, Phase: Guard, Limits: l}),
			Options{Runtime: testRuntime(t), Logger: quiet()})
		if err != nil {
			t.Fatalf("New with limits %+v: %v", l, err)
		}
		defer c.Close(context.Background())
		info, _ := c.Info()
		return info.Digest
	}
	seen := map[string]string{digest(t, runtime.Limits{}): "no limits"}
	typ := reflect.TypeFor[runtime.Limits]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		t.Run(name, func(t *testing.T) {
			d := digest(t, halfDefault(t, i))
			if other, ok := seen[d]; ok {
				t.Errorf("limits that differ only in %s have the digest of %s", name, other)
			}
			seen[d] = name
		})
	}
	// The digest is of the limits the binding runs under: naming a
	// default changes nothing that runs, nor the digest.
	if digest(t, runtime.Limits{Fuel: runtime.DefaultFuel}) != digest(t, runtime.Limits{}) {
		t.Error("the default fuel, written out, changed the digest")
	}
	if digest(t, runtime.Limits{Fuel: 1000}) == digest(t, runtime.Limits{Fuel: 2000}) {
		t.Error("fuel 1000 and fuel 2000 share a digest")
	}
}

// TestConfigFileTakesEveryLimit: a binding's "limits" in the JSON
// configuration is runtime.Limits' JSON form, every field of it. It failed
// with `unknown field "fuel"` while the file had a copy of the fields.
func TestConfigFileTakesEveryLimit(t *testing.T) {
	parse := func(limits string) (runtime.Limits, error) {
		cfg, err := ParseConfig([]byte(`{"bindings": [{"name": "g", "module": "policy", "point": "tool.before", "phase": "guard",
		  "limits": `+limits+`}]}`), func(string) ([]byte, error) { return nil, errors.New("unused") })
		if err != nil {
			return runtime.Limits{}, err
		}
		return cfg.Bindings[0].Limits, nil
	}
	l, err := parse(`{"fuel": 1000, "init_fuel": 2000, "max_stack_bytes": 4096, "timeout": "250ms"}`)
	if want := (runtime.Limits{Fuel: 1000, InitFuel: 2000, MaxStackBytes: 4096, Timeout: 250e6}); err != nil || l != want {
		t.Errorf("limits = %+v, %v; want %+v", l, err, want)
	}
	typ := reflect.TypeFor[runtime.Limits]()
	for i := range typ.NumField() {
		t.Run(typ.Field(i).Name, func(t *testing.T) {
			want := halfDefault(t, i)
			form, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := parse(string(form)); err != nil || got != want {
				t.Errorf("limits %s = %+v, %v; want %+v", form, got, err, want)
			}
		})
	}
	for _, bad := range []string{`{"fule": 1}`, `{"Fuel": 1}`, `{"timeout": 5}`, `{"memory_pages": -1}`, `[]`} {
		if _, err := parse(bad); err == nil {
			t.Errorf("limits %s accepted", bad)
		}
	}
	if l, err := parse(`null`); err != nil || l != (runtime.Limits{}) {
		t.Errorf("limits null = %+v, %v; want none", l, err)
	}
}
