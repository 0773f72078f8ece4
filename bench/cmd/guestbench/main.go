// Command guestbench runs a package's Go benchmarks inside wasm: it builds the
// package's test binary for wasip1 and runs it under wazero (the version the
// library uses), so that the cost of guest code (the SDK's codec, a hook's
// own work) can be measured where hooks pay it. BENCHMARKS.md uses it to say
// where a Go hook's time goes.
//
//	go run ./cmd/guestbench [-close-on-context-done] [-pkg ./sdk] -- -test.bench=. -test.benchmem
//
// The host gives the guest wazero's WASI (files and clocks) and a
// hook_v1.host_call that only parks and takes: a call to "bench.park" parks
// its payload for the next take, as the runtime parks the invocation
// document. Run from the bench module; -pkg is relative to the repository.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/bench"
)

func main() {
	pkg := flag.String("pkg", "./sdk", "the package whose benchmarks to run, relative to the repository root")
	closeOnDone := flag.Bool("close-on-context-done", false, "compile as runtime.New does today (WithCloseOnContextDone), with a check per loop iteration")
	flag.Parse()
	if err := run(*pkg, *closeOnDone, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "guestbench:", err)
		os.Exit(1)
	}
}

func run(pkg string, closeOnDone bool, args []string) error {
	e, err := bench.Setup()
	if err != nil {
		return err
	}
	out := filepath.Join(e.CacheDir, "guestbench.test.wasm")
	//lint:ignore SA1019 the benchmarks run where they were built, so the build's GOROOT holds the go command wanted.
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "test", "-c", "-o", out, pkg)
	cmd.Dir = e.Root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s for wasip1: %w", pkg, err)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		return err
	}

	ctx := context.Background()
	// wazero's file cache does not key on close-on-context-done (the
	// loop checks are compiled in or not), so each setting has its own.
	cacheName := "wazero-guestbench"
	if closeOnDone {
		cacheName += "-close"
	}
	cfg := wazero.NewRuntimeConfig().WithCompilationCache(mustCache(filepath.Join(e.CacheDir, cacheName)))
	if closeOnDone {
		cfg = cfg.WithCloseOnContextDone(true)
	}
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	var parked []byte
	_, err = r.NewHostModuleBuilder(abi.ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
			namePtr, nameLen, inPtr, inLen, outPtr, outCap := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3]), uint32(s[4]), uint32(s[5])
			mem := m.Memory()
			switch {
			case nameLen == 0 && inLen == 0: // take
				if parked == nil {
					s[0] = abi.PackResult(abi.StatusNoPending, 0)
					return
				}
				n := uint32(len(parked))
				if n > outCap {
					s[0] = abi.PackResult(abi.StatusBufferTooSmall, n)
					return
				}
				mem.Write(outPtr, parked)
				parked = nil
				s[0] = abi.PackResult(abi.StatusOK, n)
			default:
				name, _ := mem.Read(namePtr, nameLen)
				if string(name) != "bench.park" {
					s[0] = abi.PackResult(abi.StatusUnknownCapability, 0)
					return
				}
				in, _ := mem.Read(inPtr, inLen)
				parked = append([]byte{}, in...)
				s[0] = abi.PackResult(abi.StatusOK, 0)
			}
		}), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32},
			[]api.ValueType{api.ValueTypeI64}).
		Export(abi.HostCallImport).Instantiate(ctx)
	if err != nil {
		return err
	}
	mc := wazero.NewModuleConfig().WithArgs(append([]string{"guestbench.test"}, args...)...).
		WithStdout(os.Stdout).WithStderr(os.Stderr).WithSysNanotime().WithSysWalltime().WithSysNanosleep()
	_, err = r.InstantiateWithConfig(ctx, wasm, mc)
	return err
}

func mustCache(dir string) wazero.CompilationCache {
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		panic(err)
	}
	return c
}
