//go:build !wasip1

package sdk_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies enforces that package sdk and everything under it import
// only the standard library, package abi and the SDK's own packages, for the
// guest (wasip1) and for native builds. A hook author's module gets nothing
// else from the SDK.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	const mod = "github.com/wasmhooks/wasmhooks/"
	allowed := func(path string) bool {
		return path == mod+"abi" || path == mod+"sdk" || strings.HasPrefix(path, mod+"sdk/")
	}
	for _, goos := range []string{"wasip1", ""} {
		args := []string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", mod + "sdk/..."}
		cmd := exec.Command(goBin, args...)
		cmd.Env = os.Environ()
		if goos != "" {
			cmd.Env = append(cmd.Env, "GOOS="+goos, "GOARCH=wasm")
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s (GOOS=%q): %v\n%s", strings.Join(args, " "), goos, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if !allowed(dep) {
				t.Errorf("GOOS=%q: sdk/... depends on %s; it may import only the standard library, abi and sdk/...", goos, dep)
			}
		}
	}
}
