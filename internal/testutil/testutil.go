// Package testutil holds helpers shared by the project's tests: locating the
// repository, assembling WAT with wabt, and building Go hooks for wasip1.
package testutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Root returns the repository root (the directory holding go.mod).
func Root(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("testutil: cannot locate the source file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ReadFile reads a file relative to the repository root.
func ReadFile(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Root(tb), rel))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// WAT assembles WebAssembly text with wabt's wat2wasm. wabt is installed by
// `make deps` and by .ci/run; a missing wat2wasm fails the test, it does not
// skip it.
func WAT(tb testing.TB, src string) []byte {
	tb.Helper()
	path, err := exec.LookPath("wat2wasm")
	if err != nil {
		tb.Fatal("testutil: wat2wasm not found; install wabt (make deps)")
	}
	dir := tb.TempDir()
	in := filepath.Join(dir, "m.wat")
	out := filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	return output(tb, exec.Command(path, "--enable-all", in, "-o", out), out, "wat2wasm", "\n--- source ---\n"+src)
}

// output runs cmd and returns the file out it writes. A failure fails the
// test with what, cmd's output and then more.
func output(tb testing.TB, cmd *exec.Cmd, out, what, more string) []byte {
	tb.Helper()
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("%s: %v\n%s%s", what, err, msg, more)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// ByteCache holds bytes made at most once per process for each key (a
// build, an assembled module), safe for concurrent use. The zero value is
// empty and ready.
type ByteCache struct {
	mu sync.Mutex // guards m, and makes a key's bytes once
	m  map[string][]byte
}

// Get returns the bytes held for key, calling make (under the cache's lock)
// the first time. A make that fails the test (tb.Fatal) caches nothing.
func (c *ByteCache) Get(key string, make func() []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.m[key]; ok {
		return b
	}
	b := make()
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	c.m[key] = b
	return b
}

var builds ByteCache

// BuildHook builds the Go hook in the package directory rel (relative to the
// repository root) with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared and
// returns the module. Builds are cached per process.
func BuildHook(tb testing.TB, rel string) []byte {
	tb.Helper()
	return builds.Get(rel, func() []byte { return buildHook(tb, rel) })
}

func buildHook(tb testing.TB, rel string) []byte {
	tb.Helper()
	root := Root(tb)
	sum := sha256.Sum256([]byte(rel))
	out := filepath.Join(os.TempDir(), "wasmhooks-test-"+hex.EncodeToString(sum[:8])+".wasm")
	//lint:ignore SA1019 tests run on the machine that built them, so the build's GOROOT holds the go command wanted.
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./"+filepath.ToSlash(rel))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	return output(tb, cmd, out, "building "+rel+" for wasip1", "")
}

// Golden compares got with the golden file at path, or writes got there
// (and the directories above it) when update is set: the test package's
// -update flag.
func Golden(tb testing.TB, path string, got []byte, update bool) {
	tb.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs from the golden file (run the test with -update if the change is intended)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// CacheDir returns a directory for wazero's compilation cache shared by the
// tests of one machine, so Go hooks compile once.
func CacheDir(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), "wasmhooks-test-cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	pruneOnce.Do(func() { pruneModuleCache(filepath.Join(dir, "modules"), staleAfter) })
	return dir
}

var pruneOnce sync.Once

// staleAfter is the age past which a key directory of the module cache is
// removed from the shared test cache.
const staleAfter = 7 * 24 * time.Hour

// pruneModuleCache removes the key directories of the runtime's module
// cache (Config.CacheDir/modules/<key>) not written to for maxAge. A
// development build keys its entries on the test binary's hash, so every
// changed test binary starts a new key directory (a few MB per Go hook);
// without pruning the shared test cache only grows. Errors are ignored:
// the cache only saves time.
func pruneModuleCache(dir string, maxAge time.Duration) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < maxAge {
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
