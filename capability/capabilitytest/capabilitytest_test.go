package capabilitytest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/capabilitytest"
)

const objectSchema = `{"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": false}`

func good() capability.Capability {
	return capability.Capability{
		Name:        "test.good",
		Description: "Doubles x.",
		Schema:      objectSchema,
		Cost:        func(any) int64 { return 1 },
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return &capability.Result{Value: req.Payload, Usage: capability.Usage{Credit: 1}}, nil
		},
	}
}

// goodReturning is good with an Execute that returns result(), unless the
// context is done.
func goodReturning(result func() *capability.Result) capability.Capability {
	c := good()
	c.Execute = func(ctx context.Context, _ *capability.Request) (*capability.Result, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return result(), nil
	}
	return c
}

var cases = []capabilitytest.Case{
	{Name: "x", Payload: `{"x": 2}`, Valid: true},
	{Name: "empty", Payload: `{}`, Valid: true},
	{Name: "x not an integer", Payload: `{"x": "2"}`},
}

func TestGoodCapabilityPasses(t *testing.T) {
	capabilitytest.Run(t, good(), cases...)
}

// broken capabilities, each breaking one rule, by name.
var broken = map[string]func() capability.Capability{
	"bad name": func() capability.Capability {
		c := good()
		c.Name = "Test Bad"
		return c
	},
	"no description": func() capability.Capability {
		c := good()
		c.Description = ""
		return c
	},
	"panics on random payloads": func() capability.Capability {
		c := good()
		c.Schema = `{}`
		c.Execute = func(_ context.Context, req *capability.Request) (*capability.Result, error) {
			if _, ok := req.Payload.(map[string]any); !ok {
				panic("not a map")
			}
			return &capability.Result{}, nil
		}
		return c
	},
	"ignores a cancelled context": func() capability.Capability {
		c := good()
		c.Execute = func(context.Context, *capability.Request) (*capability.Result, error) {
			return &capability.Result{Value: 1}, nil
		}
		return c
	},
	"negative usage": func() capability.Capability {
		return goodReturning(func() *capability.Result {
			return &capability.Result{Usage: capability.Usage{Units: map[string]int64{"tokens": -1}}}
		})
	},
	"negative cost": func() capability.Capability {
		c := good()
		c.Cost = func(any) int64 { return -5 }
		return c
	},
	"schema too loose": func() capability.Capability {
		c := good()
		c.Schema = `{}`
		return c
	},
	"undispatchable follow-up": func() capability.Capability {
		return goodReturning(func() *capability.Result {
			return &capability.Result{Value: 1, FollowUps: []capability.FollowUp{
				{Kind: "usage.event", Data: map[string]any{"n": 1}},
				{Kind: "notify", Data: make(chan int)},
			}}
		})
	},
	"follow-up with a bad kind": func() capability.Capability {
		return goodReturning(func() *capability.Result {
			return &capability.Result{Value: 1, FollowUps: []capability.FollowUp{{Kind: "Send Mail"}}}
		})
	},
	"error without a message": func() capability.Capability {
		c := good()
		c.Execute = func(ctx context.Context, _ *capability.Request) (*capability.Result, error) {
			return nil, errors.New("x")
		}
		return c
	},
}

// TestBrokenCapabilitiesFail runs the kit on each broken capability in a
// child process, which must fail.
func TestBrokenCapabilitiesFail(t *testing.T) {
	if name := os.Getenv("CAPABILITYTEST_BROKEN"); name != "" {
		capabilitytest.Run(t, broken[name](), cases...)
		return
	}
	want := map[string]string{
		"bad name":                    "is not 1 to 128 bytes",
		"no description":              "empty Description",
		"panics on random payloads":   "execute panicked",
		"ignores a cancelled context": "no error for a cancelled context",
		"negative usage":              "negative Usage.Units",
		"negative cost":               "negative cost",
		"schema too loose":            "Execute ran for a payload the schema should refuse",
		"undispatchable follow-up":    "Data is not JSON-encodable",
		"follow-up with a bad kind":   `kind "Send Mail" is not 1 to 128 bytes`,
	}
	for name := range broken {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenCapabilitiesFail$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CAPABILITYTEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if name == "error without a message" {
				// A plain error becomes "capability test.good failed":
				// a fine capability, only a failing one.
				if err != nil {
					t.Errorf("the kit failed a capability that only returns errors:\n%s", out)
				}
				return
			}
			if !errors.As(err, &exit) {
				t.Fatalf("the kit passed a capability that %s (err %v):\n%s", name, err, out)
			}
			if w := want[name]; !strings.Contains(string(out), w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		})
	}
}
