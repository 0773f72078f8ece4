package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// newToolchain says what a language's `make` needs that is missing, or "".
// The checks are those of hooks-examples/corpus_test.go, in short.
func newToolchain(lang string) string {
	need := map[string][]string{
		"go": {"go"}, "c": {"clang", "wasm-ld"}, "rust": {"rustc"}, "assemblyscript": {"node", "npm"},
	}[lang]
	for _, bin := range append([]string{"make"}, need...) {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not on PATH"
		}
	}
	switch lang {
	case "c":
		if _, err := os.Stat("/usr/include/wasm32-wasi/stdlib.h"); err != nil && os.Getenv("WASI_SYSROOT") == "" {
			return "wasi-libc is not installed (Debian: apt-get install wasi-libc)"
		}
	case "rust":
		rustc := "rustc"
		if _, err := os.Stat("/usr/bin/rustc"); err == nil {
			rustc = "/usr/bin/rustc"
		}
		out, err := exec.Command(rustc, "--print", "sysroot").Output()
		if err != nil {
			return "rustc --print sysroot: " + err.Error()
		}
		if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "lib", "rustlib", "wasm32-unknown-unknown")); err != nil {
			return "rustc has no wasm32-unknown-unknown standard library (Debian: apt-get install libstd-rust-dev-wasm32)"
		}
	}
	return ""
}

func underCI() bool {
	ci := os.Getenv("CI")
	return ci != "" && ci != "false" && ci != "0"
}

// TestNew: for each language, a hook made by `wasmhooks new` builds with
// its Makefile (the SDK written next to it: nothing fetched but, for
// AssemblyScript, npm's compiler), passes `make test` (native tests and
// `wasmhooks test` on its cases), and runs in a chain of one binding
// (`wasmhooks run`). A language whose toolchain is missing is skipped,
// except under CI, where it fails.
func TestNew(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	dir := t.TempDir()
	cli := filepath.Join(dir, "wasmhooks")
	if b, err := exec.Command("go", "build", "-o", cli, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the CLI: %v\n%s", err, b)
	}
	for _, lang := range []string{"go", "c", "rust", "assemblyscript"} {
		t.Run(lang, func(t *testing.T) {
			if m := newToolchain(lang); m != "" {
				if underCI() {
					t.Fatalf("toolchain for %s missing under CI: %s", lang, m)
				}
				t.Skipf("toolchain for %s missing: %s (under CI=true this fails)", lang, m)
			}
			hook := filepath.Join(dir, "my-"+lang+"-hook")
			if stdout, stderr, code := runCLI("", "new", "--lang", lang, hook); code != exitOK {
				t.Fatalf("new: exit %d\n%s%s", code, stdout, stderr)
			}
			if lang == "c" {
				// the optional regex header compiles in the new folder: every
				// header it includes is written there too
				src, err := os.ReadFile(filepath.Join(hook, "wasmhooks_regex.h"))
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range regexp.MustCompile(`#include "([^"]+)"`).FindAllSubmatch(src, -1) {
					if _, err := os.Stat(filepath.Join(hook, string(m[1]))); err != nil {
						t.Errorf("wasmhooks_regex.h includes %s, which new did not write: %v", m[1], err)
					}
				}
			}
			vars := []string{"WASMHOOKS=" + cli}
			// The repository's AssemblyScript compiler, when make deps
			// installed it, saves the new folder an npm install.
			if asc, err := filepath.Abs("../../sdk/assemblyscript/node_modules/.bin/asc"); err == nil && lang == "assemblyscript" {
				if _, err := os.Stat(asc); err == nil {
					vars = append(vars, "ASC="+asc)
				}
			}
			targets := []string{"all", "test"}
			if lang == "rust" {
				// cargo's route last: the chain below runs the module
				// Debian's cargo built offline, with Cargo.toml's profile.
				if m := cargoMissing(); m != "" {
					if underCI() {
						t.Fatalf("cargo missing under CI: %s", m)
					}
					t.Logf("cargo's route not tested: %s", m)
				} else {
					targets = append(targets, "cargo")
				}
			}
			for _, target := range targets {
				cmd := exec.Command("make", append([]string{target}, vars...)...)
				cmd.Dir = hook
				cmd.Env = append(os.Environ(), "GOPROXY=off") // nothing is fetched for Go
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("make %s: %v\n%s", target, err, b)
				}
			}
			if targets[len(targets)-1] == "cargo" {
				// lto and strip=symbols took: without them the module is
				// several MB.
				fi, err := os.Stat(filepath.Join(hook, "hook.wasm"))
				if err != nil || fi.Size() > 300<<10 {
					t.Fatalf("cargo's hook.wasm: %v, %d bytes (want under 300 KiB: the profile's lto and strip)", err, fi.Size())
				}
				t.Logf("cargo's hook.wasm: %d bytes", fi.Size())
			}
			input := filepath.Join(dir, lang+"-input.json")
			if err := os.WriteFile(input, []byte(`{"incoming":"a banana split"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := runCLI("", "run", "--hook", filepath.Join(hook, "hook.wasm"), "--point", "message.inbound",
				"--input", input, "--settings", `{"word":"banana"}`, "--cache-dir", "")
			var out runOutput
			if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK {
				t.Fatalf("run: exit %d, %v\n%s%s", code, err, stdout, stderr)
			}
			if out.Decision == nil || out.Decision.Action != "block" || out.Report.Failure != nil {
				t.Errorf("run: %s", stdout)
			}
		})
	}
}

// cargoMissing says why Debian's cargo (with Debian's rustc) cannot build
// for wasm32-unknown-unknown here, or "".
func cargoMissing() string {
	if _, err := os.Stat("/usr/bin/cargo"); err != nil {
		if _, err := exec.LookPath("cargo"); err != nil {
			return "cargo is not installed (Debian: apt-get install cargo, or make deps)"
		}
	}
	return newToolchain("rust")
}

// TestRustSDKCargo: the Rust SDK crate builds with Debian's cargo, offline
// (no crates registry), for wasm32-unknown-unknown with its release profile.
func TestRustSDKCargo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a crate")
	}
	if m := cargoMissing(); m != "" {
		if underCI() {
			t.Fatalf("cargo missing under CI: %s", m)
		}
		t.Skip(m)
	}
	cargo, rustc := "cargo", "rustc"
	if _, err := os.Stat("/usr/bin/cargo"); err == nil {
		cargo = "/usr/bin/cargo"
	}
	if _, err := os.Stat("/usr/bin/rustc"); err == nil {
		rustc = "/usr/bin/rustc"
	}
	target := t.TempDir()
	cmd := exec.Command(cargo, "build", "--offline", "--locked", "--release", "--target", "wasm32-unknown-unknown", "--target-dir", target)
	cmd.Dir = filepath.Join("..", "..", "sdk", "rust")
	cmd.Env = append(os.Environ(), "RUSTC="+rustc)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cargo build: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(target, "wasm32-unknown-unknown", "release", "libwasmhooks.rlib")); err != nil {
		t.Fatal(err)
	}
}

// TestNewRefuses: a bad language or name, or an existing folder, is a usage
// error that writes nothing.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--lang", "cobol", filepath.Join(dir, "a")},
		{"--lang", "go", filepath.Join(dir, "Bad_Name")},
		{"--lang", "go", dir},
		{"--lang", "go"},
	} {
		if stdout, stderr, code := runCLI("", append([]string{"new"}, args...)...); code != exitUsage {
			t.Errorf("new %v: exit %d, want %d\n%s%s", args, code, exitUsage, stdout, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused new wrote %d entries", len(entries))
	}
}
