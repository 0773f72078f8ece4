package capability_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies enforces the layering: non-test code under capability/
// imports only the standard library, abi, capability's own packages and the
// JSON Schema validator. In particular it never imports runtime or wazero.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"github.com/wasmhooks/wasmhooks/capability/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{
		"github.com/wasmhooks/wasmhooks/abi",
		"github.com/wasmhooks/wasmhooks/capability",
		"github.com/santhosh-tekuri/jsonschema/v5",
	}
	for _, dep := range strings.Fields(string(out)) {
		ok := false
		for _, a := range allowed {
			if dep == a || strings.HasPrefix(dep, a+"/") {
				ok = true
			}
		}
		if strings.Contains(dep, "wazero") || strings.HasPrefix(dep, "github.com/wasmhooks/wasmhooks/runtime") {
			t.Errorf("capability depends on %s: capability and runtime must never import each other", dep)
		} else if !ok {
			t.Errorf("capability depends on %s, which is not allowed", dep)
		}
	}
}
