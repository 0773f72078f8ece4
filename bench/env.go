// Package bench measures wasmhooks side by side with native Go and with
// Extism (extism/go-sdk), and checks the figures against their targets
// (BENCHMARKS.md). It is its own module so that Extism never becomes a dependency of
// the library. BENCHMARKS.md explains every row.
//
// Run the table with `make bench` (go run ./cmd/benchtable); CI runs every
// case once with `go test -run '^$' -bench . -benchtime=1x` so none can rot.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/benchmode"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TextBytes is the size of the text every redaction variant works on.
const TextBytes = 1024

// Secret is the one secret in Text.
const Secret = "AKIAIOSFODNN7EXAMPLE"

// Text returns the 1 KiB text of the redaction benchmarks: prose with one
// AWS-style key in the middle, between spaces (so that redact-secrets, whose
// patterns want word boundaries, finds it too).
func Text() string {
	filler := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 40)
	s := filler[:501] + " " + Secret + " "
	return s + filler[501:501+TextBytes-len(s)]
}

// Env holds what the cases share: the repository, the built modules, a warm
// runtime and the documents. Build it once with Setup.
type Env struct {
	// Root is the repository root; BenchDir is Root/bench.
	Root, BenchDir string
	// CacheDir holds wazero's on-disk compilation cache for the bench.
	CacheDir string

	// RT is the shared runtime of the warm cases, with CacheDir: the
	// default configuration. RTUnmetered is the same with
	// benchmode.Bare (DisableMetering and NoDeadlineInterrupt): the bare engine,
	// for scale.
	RT, RTUnmetered *runtime.Runtime

	// Request is the redaction invocation (point message.outbound,
	// context {"outgoing": Text()}); Doc is its document, byte for byte
	// what RT parks for the hook, which native Go and Extism are given.
	Request runtime.Request
	Doc     []byte
	// SmallRequest and SmallDoc are the empty-hook invocation: context
	// {"outgoing": "hello"}.
	SmallRequest runtime.Request
	SmallDoc     []byte
	// Want is the canonical decision every redaction variant must return.
	Want []byte

	mu      sync.Mutex // guards wasm and modules
	wasm    map[string][]byte
	modules map[moduleKey]*runtime.Module
}

type moduleKey struct {
	rt   *runtime.Runtime
	name string
}

var (
	envOnce sync.Once
	envVal  *Env
	envErr  error
)

// Setup returns the process-wide Env, building it on first use.
func Setup() (*Env, error) {
	envOnce.Do(func() { envVal, envErr = newEnv(context.Background()) })
	return envVal, envErr
}

func newEnv(ctx context.Context) (*Env, error) {
	root, err := findRoot()
	if err != nil {
		return nil, err
	}
	cache, err := cacheDir()
	if err != nil {
		return nil, err
	}
	e := &Env{
		Root: root, BenchDir: filepath.Join(root, "bench"), CacheDir: cache,
		wasm: map[string][]byte{}, modules: map[moduleKey]*runtime.Module{},
	}
	e.RT, err = runtime.New(ctx, runtime.Config{CacheDir: filepath.Join(cache, "wazero")})
	if err != nil {
		return nil, err
	}
	e.RTUnmetered, err = runtime.New(ctx, benchmode.With(runtime.Config{CacheDir: filepath.Join(cache, "wazero-unmetered")}, benchmode.Bare))
	if err != nil {
		return nil, err
	}
	e.Request = runtime.Request{
		Tenant: "bench", Hook: "redact", Point: "message.outbound", InvocationID: "bench-1",
		Context: map[string]any{"outgoing": Text()},
	}
	e.SmallRequest = runtime.Request{
		Tenant: "bench", Hook: "empty", Point: "message.outbound", InvocationID: "bench-1",
		Context: map[string]any{"outgoing": "hello"},
	}
	if e.Doc, err = document(e.Request); err != nil {
		return nil, err
	}
	if e.SmallDoc, err = document(e.SmallRequest); err != nil {
		return nil, err
	}
	if e.Want, err = NativeJSON(e.Doc); err != nil {
		return nil, err
	}
	return e, nil
}

// document encodes req's invocation document as the runtime does.
func document(req runtime.Request) ([]byte, error) {
	return (&abi.Invocation{
		ABI: abi.Major, Point: req.Point, Context: req.Context, Settings: req.Settings,
		Meta: abi.Meta{Hook: req.Hook, Invocation: req.InvocationID, Tenant: req.Tenant},
	}).Encode()
}

// findRoot locates the repository from this source file, or failing that
// from the working directory.
func findRoot() (string, error) {
	if _, file, _, ok := goruntime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Dir(filepath.Dir(file))
		if _, err := os.Stat(filepath.Join(root, "abi", "abi.go")); err == nil {
			return root, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "bench", "env.go")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("bench: cannot find the repository root")
		}
		dir = parent
	}
}

// cacheDir returns the directory of the bench's build outputs and wazero
// cache: $WASMHOOKS_BENCH_CACHE, or wasmhooks-bench in the user cache
// directory, or in the temporary directory.
func cacheDir() (string, error) {
	dir := os.Getenv("WASMHOOKS_BENCH_CACHE")
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "wasmhooks-bench")
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// Wasm returns a module by name, building it on first use: "wat:NAME" is
// guests/NAME.wat assembled with wabt's wat2wasm (with {{N}} replaced by
// the part after a '#', as in "wat:hostcalls#16"), and "go:DIR" is the Go
// hook in DIR (relative to the repository root) built for wasip1 as a
// reactor.
func (e *Env) Wasm(name string) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := e.wasm[name]; ok {
		return b, nil
	}
	var (
		b   []byte
		err error
	)
	switch kind, what, _ := strings.Cut(name, ":"); kind {
	case "wat":
		b, err = e.assemble(what)
	case "go":
		b, err = e.buildGo(what)
	default:
		err = fmt.Errorf("bench: unknown module %q", name)
	}
	if err != nil {
		return nil, err
	}
	e.wasm[name] = b
	return b, nil
}

func (e *Env) assemble(what string) ([]byte, error) {
	file, n, _ := strings.Cut(what, "#")
	src, err := os.ReadFile(filepath.Join(e.BenchDir, "guests", file+".wat"))
	if err != nil {
		return nil, err
	}
	text := strings.ReplaceAll(string(src), "{{N}}", n)
	return WAT(text)
}

// WAT assembles WebAssembly text with wabt's wat2wasm.
func WAT(text string) ([]byte, error) {
	tool, err := exec.LookPath("wat2wasm")
	if err != nil {
		return nil, errors.New("bench: wat2wasm not found; install wabt (make deps)")
	}
	dir, err := os.MkdirTemp("", "wasmhooks-bench-wat")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		return nil, err
	}
	if msg, err := exec.Command(tool, in, "-o", out).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("wat2wasm: %v\n%s", err, msg)
	}
	return os.ReadFile(out)
}

func (e *Env) buildGo(dir string) ([]byte, error) {
	//lint:ignore SA1019 the benchmarks run where they were built, so the build's GOROOT holds the go command wanted.
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	out := filepath.Join(e.CacheDir, strings.ReplaceAll(dir, "/", "_")+".wasm")
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./"+dir)
	// Hooks under bench/ belong to the bench module, the others to the
	// library's.
	cmd.Dir = e.Root
	if rel, ok := strings.CutPrefix(dir, "bench/"); ok {
		cmd.Dir = e.BenchDir
		cmd.Args[len(cmd.Args)-1] = "./" + rel
	}
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building %s for wasip1: %v\n%s", dir, err, msg)
	}
	return os.ReadFile(out)
}

// Module returns the module name (see Wasm) loaded into RT.
func (e *Env) Module(ctx context.Context, name string) (*runtime.Module, error) {
	return e.ModuleIn(ctx, e.RT, name)
}

// ModuleIn returns the module name loaded into rt.
func (e *Env) ModuleIn(ctx context.Context, rt *runtime.Runtime, name string) (*runtime.Module, error) {
	b, err := e.Wasm(name)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := moduleKey{rt, name}
	if m, ok := e.modules[k]; ok {
		return m, nil
	}
	m, err := rt.Load(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", name, err)
	}
	e.modules[k] = m
	return m, nil
}
