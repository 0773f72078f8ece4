package main

import (
	"embed"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/wasmhooks/wasmhooks"
)

const newSynopsis = `  wasmhooks new --lang go|rust|c|assemblyscript NAME
`

const newUsage = "usage:\n" + newSynopsis + `
Makes a folder NAME with a hook in the language (it blocks text that mentions a
configured word), its manifest, test cases (cases/*.json, run by wasmhooks test)
and a Makefile: make builds hook.wasm into the folder, make test runs the native
tests where the language has a test double and then wasmhooks test on the cases.
The SDK's source is written into the folder (for Go, wasmhooks-sdk/ with a
replace directive in go.mod), so nothing is fetched but the toolchains' packages.
`

// templates are the files of a new hook: common/ for every language, then
// the language's; ".tmpl" is dropped from each name and HOOKNAME (and
// GOVERSION, ASVERSION) replaced.
//
//go:embed all:templates
var templates embed.FS

// newLangs maps a language to what it writes of the SDKs (wasmhooks.SDKFiles):
// a source path or folder in the repository and its path in the new folder.
var newLangs = map[string]struct {
	name string
	sdk  [][2]string
	note string
}{
	"go": {"Go", [][2]string{{"go.mod", "wasmhooks-sdk/go.mod"}, {"abi", "wasmhooks-sdk/abi"}, {"sdk", "wasmhooks-sdk/sdk"}},
		"The Go SDK is the copy in `wasmhooks-sdk/`, which `go.mod` replaces the module with (the module path is not on the module proxy)."},
	"c": {"C", [][2]string{{"sdk/c/wasmhooks.h", "wasmhooks.h"}, {"sdk/c/wasmhooks_regex.h", "wasmhooks_regex.h"}, {"sdk/c/wasmhooks_fold.h", "wasmhooks_fold.h"}},
		"The C SDK is `wasmhooks.h` (and `wasmhooks_regex.h`, Go's regular-expression syntax, with its case-folding table `wasmhooks_fold.h`), written here."},
	"rust": {"Rust", [][2]string{{"sdk/rust/src", "wasmhooks/src"}, {"sdk/rust/Cargo.toml", "wasmhooks/Cargo.toml"}},
		"The Rust SDK is the dependency-free crate source in `wasmhooks/src`, built by the Makefile with rustc, or by Debian's cargo offline (`make cargo`; no crates registry)."},
	"assemblyscript": {"AssemblyScript", [][2]string{{"sdk/assemblyscript/assembly", "wasmhooks/assembly"}, {"sdk/assemblyscript/test/mockhost.mjs", "wasmhooks/test/mockhost.mjs"}},
		"The AssemblyScript SDK is `wasmhooks/assembly`; the compiler comes from npm (`make` runs `npm install` once). Its test double, `wasmhooks/test/mockhost.mjs`, runs `hook.wasm` under Node with a mock host_call (`hook.test.mjs`)."},
}

// newName is a new hook's name: it becomes a Go module path, a manifest
// name, a folder and an npm package name, so it is kept to what all accept.
var newName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

func cmdNew(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("new", flag.ContinueOnError)
	lang := fset.String("lang", "", "the hook's language: go, rust, c or assemblyscript; required")
	if code, ok := parseFlags(fset, reorderArgs(fset, args), newUsage, stdout, stderr); !ok {
		return code
	}
	if fset.NArg() != 1 || *lang == "" {
		fmt.Fprint(stderr, "wasmhooks new: --lang and one NAME are required\n"+newUsage)
		return exitUsage
	}
	l, ok := newLangs[*lang]
	if !ok {
		return fail(stdout, exitUsage, "usage", "unknown --lang %q (the languages are go, rust, c and assemblyscript)", *lang)
	}
	dir := fset.Arg(0)
	name := filepath.Base(filepath.Clean(dir))
	if !newName.MatchString(name) {
		return fail(stdout, exitUsage, "usage", "the name %q must be 1-63 lower-case letters, digits or '-', starting with a letter", name)
	}
	if _, err := os.Stat(dir); err == nil {
		return fail(stdout, exitUsage, "usage", "%s exists: wasmhooks new makes a new folder", dir)
	}
	files, err := newFiles(*lang, name)
	if err != nil {
		return fail(stdout, exitRefused, "internal", "%v", err)
	}
	for p, data := range files {
		out := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return fail(stdout, exitRefused, "io", "%v", err)
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return fail(stdout, exitRefused, "io", "%v", err)
		}
	}
	fmt.Fprintf(stdout, "made %s, a %s hook: cd %s && make && make test\n", dir, l.name, dir)
	return exitOK
}

// newFiles returns the files of a new hook, by slash-separated path.
func newFiles(lang, name string) (map[string][]byte, error) {
	l := newLangs[lang]
	goVersion, asVersion, err := sdkVersions()
	if err != nil {
		return nil, err
	}
	r := strings.NewReplacer("HOOKNAME", name, "LANGNAME", l.name, "SDK_NOTE", l.note, "GOVERSION", goVersion, "ASVERSION", asVersion)
	files := map[string][]byte{}
	for _, root := range []string{"templates/common", "templates/" + lang} {
		err := fs.WalkDir(templates, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := templates.ReadFile(p)
			if err != nil {
				return err
			}
			files[strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl")] = []byte(r.Replace(string(b)))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, m := range l.sdk {
		err := fs.WalkDir(wasmhooks.SDKFiles, m[0], func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if strings.HasSuffix(p, "_test.go") || lang == "go" && p != "go.mod" && !strings.HasSuffix(p, ".go") {
				return nil // the SDK's own tests stay in the repository; Go takes the Go SDK only
			}
			b, err := wasmhooks.SDKFiles.ReadFile(p)
			if err != nil {
				return err
			}
			if p == "go.mod" {
				b = []byte("module github.com/wasmhooks/wasmhooks\n\ngo " + goVersion + "\n")
			}
			files[path.Join(m[1], strings.TrimPrefix(p, m[0]))] = b
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// sdkVersions returns the go directive of the repository's go.mod (the Go
// the SDK needs) and the AssemblyScript compiler's version the SDK pins.
func sdkVersions() (goVersion, asVersion string, err error) {
	mod, err := wasmhooks.SDKFiles.ReadFile("go.mod")
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			goVersion = strings.TrimSpace(v)
		}
	}
	pkg, err := wasmhooks.SDKFiles.ReadFile("sdk/assemblyscript/package.json")
	if err != nil {
		return "", "", err
	}
	var p struct {
		Dev map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(pkg, &p); err != nil {
		return "", "", err
	}
	asVersion = p.Dev["assemblyscript"]
	if goVersion == "" || asVersion == "" {
		return "", "", fmt.Errorf("the embedded SDK has no go directive or AssemblyScript version")
	}
	return goVersion, asVersion, nil
}
