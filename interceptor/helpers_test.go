package interceptor

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// hookDirs are the hooks the tests build, by module name: the conformance
// behaviours and the two security example hooks.
var hookDirs = map[string]string{
	"behaviors":            "testdata/behaviors",
	"cross-boundary-guard": "../hooks-examples/cross-boundary-guard",
	"secretless-redactor":  "../hooks-examples/secretless-redactor",
}

var built struct {
	sync.Mutex
	mods map[string][]byte
}

// buildHook builds the hook in hookDirs[name] for wasip1 and embeds its
// manifest. Built once per test binary (and cached by go build); skipped
// under -short.
func buildHook(t testing.TB, name string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	built.Lock()
	defer built.Unlock()
	if b, ok := built.mods[name]; ok {
		return b
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	dir := hookDirs[name]
	out := filepath.Join(t.TempDir(), name+".wasm")
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./"+dir)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", dir, err, b)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	man, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if wasm, err = runtime.EmbedManifest(wasm, man); err != nil {
		t.Fatal(err)
	}
	if built.mods == nil {
		built.mods = map[string][]byte{}
	}
	built.mods[name] = wasm
	return wasm
}

var shared struct {
	once sync.Once
	rt   *runtime.Runtime
	err  error
}

// testRuntime is one runtime for the package's tests: modules are compiled
// once.
func testRuntime(t testing.TB) *runtime.Runtime {
	t.Helper()
	shared.once.Do(func() { shared.rt, shared.err = runtime.New(context.Background(), runtime.Config{}) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.rt
}

// newHostCaller is a capability runner with the built-in capabilities and a
// fresh key-value store.
func newHostCaller(t testing.TB) *capability.Runner {
	t.Helper()
	return newHostCallerKV(t, builtin.NewMemoryKV())
}

// newHostCallerKV is a capability runner with the built-in capabilities and
// kv as the key-value store.
func newHostCallerKV(t testing.TB, kv builtin.KVStore) *capability.Runner {
	t.Helper()
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Config{KV: kv}); err != nil {
		t.Fatal(err)
	}
	r, err := capability.NewRunner(reg, capability.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// quiet discards the chains' logs.
var quiet = slog.New(slog.DiscardHandler)
