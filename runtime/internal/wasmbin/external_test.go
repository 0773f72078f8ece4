package wasmbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExternalModules parses real modules named by WASMBIN_MODULES (a list
// separated by the OS path-list separator, e.g. Go c-shared hooks built with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared) with the default
// limits and logs their shape, to check the defaults against real toolchain
// output. Skipped when the variable is unset: the modules are not committed.
func TestExternalModules(t *testing.T) {
	env := os.Getenv("WASMBIN_MODULES")
	if env == "" {
		t.Skip("WASMBIN_MODULES not set")
	}
	for _, path := range filepath.SplitList(env) {
		t.Run(path, func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			m, err := Parse(b, Limits{})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var maxBody, maxLocals int
			var maxBodyIdx int
			for i, c := range m.Code {
				if c.Size > maxBody {
					maxBody, maxBodyIdx = c.Size, i
				}
				if n := int(c.NumLocals) + len(m.Types[m.Functions[i]].Params); n > maxLocals {
					maxLocals = n
				}
			}
			var code, data int
			for _, s := range m.Sections {
				switch s.ID {
				case SectionCode:
					code = s.Size
				case SectionData:
					data = s.Size
				}
			}
			var tableMin uint32
			for _, tt := range m.Tables {
				tableMin += tt.Min
			}
			var customs []string
			for _, c := range m.Customs {
				customs = append(customs, c.Name)
			}
			t.Logf("%s: %d bytes parsed in %v", path, len(b), elapsed)
			t.Logf("types %d, imports %d, functions %d defined + %d imported, exports %d, globals %d",
				len(m.Types), len(m.Imports), len(m.Functions), m.NumImportedFuncs(), len(m.Exports), m.NumGlobals())
			t.Logf("code section %d bytes, largest body %d bytes (function %d), most locals incl. params %d",
				code, maxBody, m.NumImportedFuncs()+maxBodyIdx, maxLocals)
			t.Logf("data section %d bytes in %d segments, element segments %d, table elements %d, memory %+v",
				data, len(m.Data), len(m.Elements), tableMin, m.Memories)
			t.Logf("custom sections: %s", strings.Join(customs, ", "))
			checkInvariants(t, b, m)
			if m2 := withManifest(t, Parse, b, manifest); len(m2.Sections) != len(m.Sections)+1 {
				t.Errorf("embedding a manifest made %d sections of %d", len(m2.Sections), len(m.Sections))
			}
			for _, name := range []string{"memory", "hook_v1_handle", "_initialize"} {
				if e, ok := m.Export(name); ok {
					if ft, ok := m.ExportedFunc(name); ok {
						t.Logf("export %q: func %d %s", name, e.Index, ft)
					} else {
						t.Logf("export %q: %s %d", name, e.Kind, e.Index)
					}
				}
			}
		})
	}
}
