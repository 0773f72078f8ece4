// Package archtest enforces the dependency rules of STYLE.md with `go list
// -deps`: abi is standard-library only and builds for wasip1; sdk imports only
// abi; runtime and capability never import each other; example hooks import
// only the sdk and abi; no library package imports the store layer; chain
// never imports capability, and only the packages on an allowlist (the
// composition root) import chain.
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
	Imports    []string
}

func goCmd() string {
	//lint:ignore SA1019 tests run on the machine that built them, so the build's GOROOT holds the go command wanted.
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
		{"sdk imports only abi", wasip1, "./sdk/...", func(p string) bool {
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
				p == module+"/internal/benchmode" || // a leaf: the benchmark-only switches
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

// inside reports whether path is the package base or one under it.
func inside(path, base string) bool {
	return path == base || strings.HasPrefix(path, base+"/")
}

// TestChainNeverImportsCapability: the chain meets the capability runner
// only through runtime.HostCaller, which cmd wires; importing capability
// would let it reach past the runner's checks.
func TestChainNeverImportsCapability(t *testing.T) {
	for _, p := range deps(t, nil, "./chain/...") {
		if inside(p.ImportPath, module+"/capability") {
			t.Errorf("./chain/... depends on %s", p.ImportPath)
		}
	}
}

// chainImporters are the packages, with those under them, that may import
// chain or a package under it (tests may, anywhere; the bench module is
// its own module). Add a composition layer here when one is built on chain.
var chainImporters = []string{
	module + "/chain",       // itself and its subpackages (audit, audittest)
	module + "/cmd",         // the composition root
	module + "/interceptor", // the MCP interceptor, which runs chains for an MCP server
	module + "/server",      // wasmhooks serve, which runs tenants' chains over HTTP
	module + "/store",       // durable implementations of chain's interfaces (approvals, audit)
}

// TestOnlyTheCompositionRootImportsChain: chain is the top of the library,
// run by the composition root; a library package that imported it would
// tie embedders of runtime or capability to the chain's configuration.
func TestOnlyTheCompositionRootImportsChain(t *testing.T) {
	cmd := exec.Command(goCmd(), "list", "-json", "./...")
	cmd.Dir = testutil.Root(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		allowed := false
		for _, a := range chainImporters {
			allowed = allowed || inside(p.ImportPath, a)
		}
		if allowed {
			continue
		}
		for _, imp := range p.Imports {
			if inside(imp, module+"/chain") {
				t.Errorf("%s imports %s; only %v may", p.ImportPath, imp, chainImporters)
			}
		}
	}
}
