//go:build !wasip1

package abi

import (
	"sort"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// TestGoWASIImports builds testdata/wasiprobe, a Go hook that links this
// package, with the installed Go toolchain and checks that every WASI function
// it imports is in WASIFunctions with the same signature. If a Go release
// adds an import, this fails before any hook built with it is refused.
func TestGoWASIImports(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a wasip1 module")
	}
	bin := testutil.BuildHook(t, "abi/testdata/wasiprobe")
	m, err := parseWasm(bin)
	if err != nil {
		t.Fatal(err)
	}
	imported := map[string]bool{}
	for _, imp := range m.imports {
		if imp.module != WASIModule || imp.kind != 0 {
			t.Errorf("unexpected import %s.%s (kind %d)", imp.module, imp.name, imp.kind)
			continue
		}
		imported[imp.name] = true
		want, ok := WASISignature(imp.name)
		switch {
		case !ok:
			t.Errorf("Go imports %s.%s %s, which is not in WASIFunctions: every Go hook would be refused", imp.module, imp.name, imp.sig)
		case want != imp.sig:
			t.Errorf("Go imports %s with signature %s, WASIFunctions says %s", imp.name, imp.sig, want)
		}
	}
	var unused []string
	for name := range wasiFunctions {
		if !imported[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	// fd_seek is wasi-libc's; Go does not import it.
	t.Logf("in WASIFunctions but not imported by Go: %v", unused)
	found := false
	for _, e := range m.exports {
		if e.name == HandleExport {
			found = true
			if e.sig != HandleSignature {
				t.Errorf("%s has signature %s, want %s", HandleExport, e.sig, HandleSignature)
			}
		}
	}
	if !found {
		t.Errorf("the probe does not export %s", HandleExport)
	}
}
