//go:build !wasip1

// Package examples_test builds every example hook as a wasip1 reactor and
// checks the module against ABI.md: its imports (hook_v1.host_call and the
// fixed WASI set, with their signatures), its exports, and its manifest.
package examples_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

func TestExamplesBuildAsReactors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
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

			out := filepath.Join(t.TempDir(), dir+".wasm")
			cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", out, "./"+dir)
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("build: %v\n%s", err, b)
			}
			wasm, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := parse(wasm)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d bytes; imports %s", len(wasm), strings.Join(mod.importNames(), " "))
			for _, im := range mod.imports {
				var want string
				var ok bool
				switch im.module {
				case abi.ImportModule:
					want, ok = abi.HostCallSignature, im.name == abi.HostCallImport
				case abi.WASIModule:
					want, ok = abi.WASISignature(im.name)
				}
				if !ok {
					t.Errorf("imports %s.%s, which the host refuses", im.module, im.name)
				} else if im.sig != want {
					t.Errorf("imports %s.%s with signature %s, want %s", im.module, im.name, im.sig, want)
				}
			}
			for name, sig := range map[string]string{abi.HandleExport: abi.HandleSignature, abi.InitializeExport: "() -> ()", abi.MemoryExport: "memory"} {
				if got, ok := mod.exports[name]; !ok || got != sig {
					t.Errorf("export %s: %q, want %q", name, got, sig)
				}
			}
		})
	}
}

type wasmImport struct{ module, name, sig string }

type module struct {
	imports []wasmImport
	exports map[string]string // name -> signature, or "memory", "table", "global"
}

func (m *module) importNames() []string {
	var out []string
	for _, im := range m.imports {
		out = append(out, im.module+"."+im.name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// parse reads the type, import, function and export sections of a module:
// just enough of the binary format to check what a module imports and
// exports, and with which signatures.
func parse(b []byte) (*module, error) {
	if len(b) < 8 || !bytes.Equal(b[:4], []byte("\x00asm")) || binary.LittleEndian.Uint32(b[4:8]) != 1 {
		return nil, errors.New("not a wasm 1 module")
	}
	r := &reader{b: b[8:]}
	var types, funcs []string
	m := &module{exports: map[string]string{}}
	for len(r.b) > 0 {
		id := r.byte()
		size := r.u32()
		if r.err != nil || int(size) > len(r.b) {
			return nil, errors.New("truncated section")
		}
		s := &reader{b: r.b[:size]}
		r.b = r.b[size:]
		switch id {
		case 1: // type
			for range s.u32() {
				if s.byte() != 0x60 {
					return nil, errors.New("unknown type form")
				}
				params, results := s.valtypes(), s.valtypes()
				types = append(types, fmt.Sprintf("(%s) -> (%s)", strings.Join(params, ", "), strings.Join(results, ", ")))
			}
		case 2: // import
			for range s.u32() {
				im := wasmImport{module: s.name(), name: s.name()}
				switch s.byte() {
				case 0:
					idx := s.u32()
					if int(idx) >= len(types) {
						return nil, errors.New("bad type index")
					}
					im.sig = abiSig(types[idx])
					funcs = append(funcs, im.sig)
				case 1:
					s.byte()
					s.limits()
					im.sig = "table"
				case 2:
					s.limits()
					im.sig = "memory"
				case 3:
					s.byte()
					s.byte()
					im.sig = "global"
				}
				m.imports = append(m.imports, im)
			}
		case 3: // function
			for range s.u32() {
				idx := s.u32()
				if int(idx) >= len(types) {
					return nil, errors.New("bad type index")
				}
				funcs = append(funcs, abiSig(types[idx]))
			}
		case 7: // export
			for range s.u32() {
				name, kind, idx := s.name(), s.byte(), s.u32()
				switch kind {
				case 0:
					if int(idx) >= len(funcs) {
						return nil, errors.New("bad function index")
					}
					m.exports[name] = funcs[idx]
				case 1:
					m.exports[name] = "table"
				case 2:
					m.exports[name] = "memory"
				case 3:
					m.exports[name] = "global"
				}
			}
		}
		if s.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, s.err)
		}
	}
	return m, r.err
}

// abiSig writes "(i32, i32) -> (i32)" as package abi does: "(i32, i32) -> i32",
// and "() -> ()" for no results.
func abiSig(s string) string {
	params, results, _ := strings.Cut(s, " -> ")
	if results != "()" && !strings.Contains(results, ",") {
		results = strings.Trim(results, "()")
	}
	return params + " -> " + results
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = errors.New("unexpected end")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("bad LEB128")
	return 0
}

func (r *reader) name() string {
	n := r.u32()
	if int(n) > len(r.b) {
		r.err = errors.New("truncated name")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) valtypes() []string {
	var out []string
	for range r.u32() {
		switch t := r.byte(); t {
		case 0x7f:
			out = append(out, "i32")
		case 0x7e:
			out = append(out, "i64")
		case 0x7d:
			out = append(out, "f32")
		case 0x7c:
			out = append(out, "f64")
		default:
			out = append(out, fmt.Sprintf("0x%02x", t))
		}
	}
	return out
}

func (r *reader) limits() {
	if r.byte()&1 != 0 {
		r.u32()
	}
	r.u32()
}
