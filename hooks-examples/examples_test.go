//go:build !wasip1

// Package examples_test builds every example hook as a wasip1 reactor and
// checks its manifest, and that the host's validator (runtime.Validate)
// accepts the module: its imports (hook_v1.host_call and the fixed WASI set,
// with their signatures) and its exports, as ABI.md has them.
package examples_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func TestExamplesBuildAsReactors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	goLang := languages()[0]
	if m := goLang.missing(); m != "" {
		t.Skip(m)
	}
	dirs, err := filepath.Glob("*/main.go")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, m := range dirs {
		dir := filepath.Dir(m)
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			for _, f := range []string{"README.md", "manifest.json", "hook_test.go"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("example lacks %s", f)
				}
			}
			manifest, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			man, err := abi.DecodeManifest(manifest)
			if err != nil {
				t.Fatal(err)
			}
			if man.Name != dir {
				t.Errorf("manifest name %q, want the directory's name %q", man.Name, dir)
			}

			wasm := goLang.compile(t, dir, filepath.Join(t.TempDir(), dir+".wasm"))
			info, err := runtime.Validate(wasm, runtime.ValidateOptions{})
			if err != nil {
				t.Fatalf("the host refuses the module: %v", err)
			}
			var imports []string
			for _, im := range info.Imports {
				imports = append(imports, im.Module+"."+im.Name)
			}
			slices.Sort(imports)
			t.Logf("%d bytes; imports %s", len(wasm), strings.Join(slices.Compact(imports), " "))
			if !info.HasInitialize {
				t.Errorf("no %s export: not a reactor", abi.InitializeExport)
			}
		})
	}
}
