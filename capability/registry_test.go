package capability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func okExecute(context.Context, *Request) (*Result, error) { return &Result{}, nil }

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"llm.run", true},
		{"kv.get", true},
		{"a", true},
		{"my-cap_2.v1", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"LLM.run", false},
		{"llm run", false},
		{"llm/run", false},
		{"llm.run\x00", false},
		{"ünï", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.name), func(t *testing.T) {
			if got := ValidName(tc.name); got != tc.want {
				t.Errorf("ValidName = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRegisterRefusals(t *testing.T) {
	// A schema that references a local file must not read it.
	dir := t.TempDir()
	file := filepath.Join(dir, "s.json")
	if err := os.WriteFile(file, []byte(`{"type": "string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	valid := Capability{Name: "ok", Description: "fine", Schema: `{}`, Execute: okExecute}
	tests := []struct {
		name    string
		mod     func(*Capability)
		wantErr error
	}{
		{"bad name", func(c *Capability) { c.Name = "Bad Name" }, ErrInvalidName},
		{"empty name", func(c *Capability) { c.Name = "" }, ErrInvalidName},
		{"no execute", func(c *Capability) { c.Execute = nil }, ErrIncomplete},
		{"no schema", func(c *Capability) { c.Schema = "  " }, ErrIncomplete},
		{"nil gate", func(c *Capability) { c.Gates = []Gate{nil} }, ErrIncomplete},
		{"schema not json", func(c *Capability) { c.Schema = `{"type": ` }, ErrInvalidSchema},
		{"schema with duplicate keys", func(c *Capability) { c.Schema = `{"type": "string", "type": "object"}` }, ErrInvalidSchema},
		{"schema that does not compile", func(c *Capability) { c.Schema = `{"type": 12}` }, ErrInvalidSchema},
		{"schema with a bad pattern", func(c *Capability) { c.Schema = `{"pattern": "("}` }, ErrInvalidSchema},
		{"schema with a file reference", func(c *Capability) { c.Schema = `{"$ref": "file://` + file + `"}` }, ErrInvalidSchema},
		{"schema with a remote reference", func(c *Capability) { c.Schema = `{"$ref": "https://example.com/s.json"}` }, ErrInvalidSchema},
		{"schema with a relative reference", func(c *Capability) { c.Schema = `{"$ref": "other.json"}` }, ErrInvalidSchema},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mod(&c)
			err := NewRegistry().Register(c)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Register error = %v, want %v", err, tc.wantErr)
			}
			var re *RegistrationError
			if !errors.As(err, &re) || re.Name != c.Name {
				t.Errorf("error %v is not a *RegistrationError for %q", err, c.Name)
			}
		})
	}
}

func TestRegisterDuplicateAndLookup(t *testing.T) {
	var reg Registry // the zero value is usable
	c := Capability{Name: "b.cap", Description: "b", Schema: `{"$defs": {"x": {"type": "string"}}, "$ref": "#/$defs/x"}`, Execute: okExecute,
		Gates: []Gate{NewRateGate(1, 1)}}
	if err := reg.Register(c); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if err := reg.Register(c); !errors.Is(err, ErrDuplicateCapability) {
		t.Errorf("second Register = %v, want ErrDuplicateCapability", err)
	}
	reg.MustRegister(Capability{Name: "a.cap", Description: "a", Schema: `true`, Execute: okExecute})
	if got := reg.Names(); !slices.Equal(got, []string{"a.cap", "b.cap"}) {
		t.Errorf("Names = %v", got)
	}
	got, ok := reg.Lookup("b.cap")
	if !ok || got.Name != "b.cap" || len(got.Gates) != 1 {
		t.Fatalf("Lookup = %+v, %v", got, ok)
	}
	got.Gates[0] = nil // must not reach the registry
	if again, _ := reg.Lookup("b.cap"); again.Gates[0] == nil {
		t.Error("Lookup shares the Gates slice")
	}
	if _, ok := reg.Lookup("missing"); ok {
		t.Error("Lookup found a missing capability")
	}
}

func TestMustRegisterPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustRegister did not panic")
		}
	}()
	NewRegistry().MustRegister(Capability{Name: "x"})
}

// TestRegistryHammer registers and resolves concurrently, for -race.
func TestRegistryHammer(t *testing.T) {
	reg := NewRegistry()
	r := mustRunner(t, reg, RunnerOptions{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				name := fmt.Sprintf("c%d.%d", i, j)
				reg.MustRegister(Capability{Name: name, Description: "d", Schema: `{}`, Execute: okExecute})
				if reply := r.HostCall(context.Background(), newCall(name, `{}`)); reply.Status != 0 {
					t.Errorf("%s: %v", name, reply.Status)
				}
				_ = reg.Names()
			}
		})
	}
	wg.Wait()
	if n := len(reg.Names()); n != 400 {
		t.Errorf("%d names, want 400", n)
	}
}
