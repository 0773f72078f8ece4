// Package archtest enforces the dependency rules of STYLE.md with `go list
// -deps`: abi is standard-library only and builds for wasip1; sdk imports only
// abi; runtime and capability never import each other; example hooks import
// only the sdk and abi; no library package imports the store layer.
package archtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

const module = "github.com/wasmhooks/wasmhooks"

type pkg struct {
	ImportPath string
	Standard   bool
	Module     *struct{ Path string }
}

func goCmd() string {
	p := filepath.Join(goruntime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// deps returns the non-test dependencies of pattern (itself included).
func deps(t *testing.T, env []string, pattern string) []pkg {
	t.Helper()
	cmd := exec.Command(goCmd(), "list", "-deps", "-json", pattern)
	cmd.Dir = testutil.Root(t)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pattern, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestDependencyRules(t *testing.T) {
	wasip1 := []string{"GOOS=wasip1", "GOARCH=wasm"}
	tests := []struct {
		name    string
		env     []string
		pattern string
		// allowed reports whether a non-standard dependency is allowed.
		allowed func(path string) bool
	}{
		{"abi is standard library only", nil, "./abi/...", func(p string) bool { return p == module+"/abi" }},
		{"abi is standard library only on wasip1", wasip1, "./abi/...", func(p string) bool { return p == module+"/abi" }},
		{"sdk imports only abi", wasip1, "./sdk", func(p string) bool {
			return p == module+"/abi" || strings.HasPrefix(p, module+"/sdk")
		}},
		{"sdk imports only abi (native)", nil, "./sdk/...", func(p string) bool {
			return p == module+"/abi" || strings.HasPrefix(p, module+"/sdk")
		}},
		{"the platform's Go client imports only server/api", nil, "./server/client/...", func(p string) bool {
			return p == module+"/server/api" || strings.HasPrefix(p, module+"/server/client")
		}},
		{"runtime never imports capability", nil, "./runtime/...", func(p string) bool {
			return p == module+"/abi" || strings.HasPrefix(p, module+"/runtime") ||
				strings.HasPrefix(p, "github.com/tetratelabs/wazero") ||
				strings.HasPrefix(p, "github.com/hashicorp/golang-lru") ||
				strings.HasPrefix(p, "golang.org/x/sys")
		}},
		{"capability never imports runtime or wazero", nil, "./capability/...", func(p string) bool {
			return p == module+"/abi" || strings.HasPrefix(p, module+"/capability") ||
				strings.HasPrefix(p, "github.com/santhosh-tekuri/jsonschema")
		}},
		{"example hooks import only sdk and abi", wasip1, "./hooks-examples/...", func(p string) bool {
			return p == module+"/abi" || strings.HasPrefix(p, module+"/sdk") || strings.HasPrefix(p, module+"/hooks-examples")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range deps(t, tt.env, tt.pattern) {
				if p.Standard {
					continue
				}
				if !tt.allowed(p.ImportPath) {
					t.Errorf("%s depends on %s", tt.pattern, p.ImportPath)
				}
			}
		})
	}
}

// TestLibraryNeverImportsStore: the library packages declare the interfaces
// (capability.Ledger, builtin.KVStore, ...) that the store implements; the
// store depends on them, never the reverse, so that embedding the runtime
// never drags a database driver in.
func TestLibraryNeverImportsStore(t *testing.T) {
	for _, pattern := range []string{"./abi/...", "./sdk/...", "./runtime/...", "./capability/...", "./chain/..."} {
		for _, p := range deps(t, nil, pattern) {
			if p.ImportPath == module+"/store" || strings.HasPrefix(p.ImportPath, module+"/store/") ||
				strings.HasPrefix(p.ImportPath, "modernc.org/") || strings.HasPrefix(p.ImportPath, "github.com/jackc/") {
				t.Errorf("%s depends on %s", pattern, p.ImportPath)
			}
		}
	}
}

func TestABIAndSDKBuildForWasip1(t *testing.T) {
	cmd := exec.Command(goCmd(), "build", "-o", os.DevNull, "./abi/...", "./sdk")
	cmd.Dir = testutil.Root(t)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=wasip1 go build ./abi/... ./sdk: %v\n%s", err, out)
	}
}
