package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// mcRecord records what the module cache does until the test ends. Tests
// that use it must not run in parallel with other tests of the package.
func mcRecord(t testing.TB) func() []modcacheEvent {
	t.Helper()
	var mu sync.Mutex
	var evs []modcacheEvent
	testHookModcache = func(ev modcacheEvent) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
	}
	t.Cleanup(func() { testHookModcache = nil })
	return func() []modcacheEvent {
		mu.Lock()
		defer mu.Unlock()
		out := evs
		evs = nil
		return out
	}
}

func (ev modcacheEvent) String() string {
	switch ev {
	case modcacheHit:
		return "hit"
	case modcacheMiss:
		return "miss"
	case modcacheRefused:
		return "refused"
	case modcacheStored:
		return "stored"
	case modcacheStoreFailed:
		return "store-failed"
	}
	return "?"
}

func mcRuntime(t testing.TB, cfg Config) *Runtime {
	t.Helper()
	r, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func mcGuest(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "guests", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mcEntry returns the entry a Runtime with cfg keeps wasm in.
func mcEntry(t testing.TB, cfg Config, wasm []byte) *modcacheEntry {
	t.Helper()
	cfg = cfg.withDefaults()
	opts := ValidateOptions{MaxModuleBytes: cfg.MaxModuleBytes, MaxMemoryPages: cfg.MaxMemoryPages}
	e, err := newModcacheEntry(cfg.CacheDir, opts, !cfg.disableMetering, Digest(wasm))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mcLoad loads wasm in a new Runtime with cfg and checks what the module
// cache did.
func mcLoad(t testing.TB, cfg Config, wasm []byte, events func() []modcacheEvent, want ...modcacheEvent) *Module {
	t.Helper()
	r := mcRuntime(t, cfg)
	events() // drop what an earlier failure left
	m, err := r.Load(context.Background(), wasm)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := events(); !slices.Equal(got, want) {
		t.Fatalf("module cache did %v, want %v", got, want)
	}
	return m
}

func mcWithManifest(t testing.TB, wasm []byte) []byte {
	t.Helper()
	out, err := EmbedManifest(wasm, []byte(`{"name":"scripted","version":"1.0.0","capabilities":["echo","big"],`+
		`"points":["message.outbound"],"settings_schema":{"type":"object","properties":{"n":{"type":"integer","maximum":1e3}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestModuleCacheRoundTrip(t *testing.T) {
	events := mcRecord(t)
	tests := []struct {
		name     string
		wasm     func(testing.TB) []byte
		metering bool
	}{
		{"scripted", func(t testing.TB) []byte { return mcGuest(t, "scripted.wasm") }, true},
		{"scripted unmetered", func(t testing.TB) []byte { return mcGuest(t, "scripted.wasm") }, false},
		{"policy", func(t testing.TB) []byte { return mcGuest(t, "policy.wasm") }, true},
		{"shapes", func(t testing.TB) []byte { return mcGuest(t, "shapes.wasm") }, true},
		{"with a manifest", func(t testing.TB) []byte { return mcWithManifest(t, mcGuest(t, "scripted.wasm")) }, true},
		{"with a manifest unmetered", func(t testing.TB) []byte { return mcWithManifest(t, mcGuest(t, "scripted.wasm")) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			wasm := tt.wasm(t)
			cfg := Config{CacheDir: t.TempDir(), disableMetering: !tt.metering}
			first := mcLoad(t, cfg, wasm, events, modcacheMiss, modcacheStored)
			second := mcLoad(t, cfg, wasm, events, modcacheHit)
			if !equalInfo(first.Info(), second.Info()) {
				t.Fatalf("from the cache:\n%+v\nwant\n%+v", second.Info(), first.Info())
			}

			// The entry holds exactly what the full path computes.
			p, err := mcEntry(t, cfg, wasm).load(wasm)
			if err != nil || p == nil {
				t.Fatalf("reading the entry: %v, %v", p, err)
			}
			info, parsed, err := validate(wasm, ValidateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := wasm
			if tt.metering {
				if want, _, err = instrument(wasm, parsed); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(p.bin, want) {
				t.Errorf("stored module: %d bytes, want the %d the full path compiles", len(p.bin), len(want))
			}
			if !equalInfo(p.info, info) {
				t.Errorf("stored info:\n%+v\nwant\n%+v", p.info, info)
			}

			// Modes follow wazero's: the directories 0700, the entry 0600.
			if goruntime.GOOS != "windows" {
				entry := mcEntry(t, cfg, wasm).path
				for path, mode := range map[string]fs.FileMode{
					filepath.Join(cfg.CacheDir, modcacheSubdir): fs.ModeDir | 0o700,
					filepath.Dir(entry):                         fs.ModeDir | 0o700,
					entry:                                       0o600,
				} {
					if st, err := os.Stat(path); err != nil || st.Mode() != mode {
						t.Errorf("%s: %v, %v; want mode %v", path, st.Mode(), err, mode)
					}
				}
			}

			// The module loaded from the cache runs.
			if _, err := second.rt.Invoke(ctx, second, Request{Tenant: "t", Context: map[string]any{"s": "@@"}}); err != nil {
				var f *abi.Failure
				if !errors.As(err, &f) {
					t.Fatalf("Invoke: %v", err)
				}
			}
		})
	}
}

// equalInfo compares two ModuleInfo values field by field (reflect.DeepEqual
// would tell a nil slice from an empty one, which JSON does not keep and no
// caller can see).
func equalInfo(a, b *ModuleInfo) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// TestModuleCacheSkipsValidation plants an entry whose ModuleInfo no
// validation could produce: a Runtime that finds it returns it as is, so it
// did not validate or instrument the module.
func TestModuleCacheSkipsValidation(t *testing.T) {
	events := mcRecord(t)
	wasm := mcGuest(t, "scripted.wasm")
	cfg := Config{CacheDir: t.TempDir()}
	mcLoad(t, cfg, wasm, events, modcacheMiss, modcacheStored)

	e := mcEntry(t, cfg, wasm)
	p, err := e.load(wasm)
	if err != nil || p == nil {
		t.Fatalf("reading the entry: %v, %v", p, err)
	}
	p.info.Functions = 987654
	if err := e.store(p); err != nil {
		t.Fatal(err)
	}
	m := mcLoad(t, cfg, wasm, events, modcacheHit)
	if got := m.Info().Functions; got != 987654 {
		t.Fatalf("Info().Functions = %d: the module was validated again", got)
	}
}

// TestModuleCacheGoHook loads an example Go hook, whose instrumenting and
// validation are what the module cache saves, in two Runtimes. wazero's
// compiled code comes from the tests' shared cache directory.
func TestModuleCacheGoHook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go hook")
	}
	events := mcRecord(t)
	wasm := testutil.BuildHook(t, "hooks-examples/redact-secrets")
	wasm, err := EmbedManifest(wasm, testutil.ReadFile(t, "hooks-examples/redact-secrets/manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{CacheDir: testutil.CacheDir(t)}
	if err := os.Remove(mcEntry(t, cfg, wasm).path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	start := time.Now()
	first := mcLoad(t, cfg, wasm, events, modcacheMiss, modcacheStored)
	mid := time.Now()
	second := mcLoad(t, cfg, wasm, events, modcacheHit)
	t.Logf("Load of a %d-byte Go hook: %v validating and instrumenting, %v from the module cache",
		len(wasm), mid.Sub(start), time.Since(mid))
	if !equalInfo(first.Info(), second.Info()) {
		t.Fatalf("from the cache:\n%+v\nwant\n%+v", second.Info(), first.Info())
	}
	if second.Manifest() == nil || second.Manifest().Name != "redact-secrets" {
		t.Fatalf("manifest from the cache: %+v", second.Manifest())
	}
	res, err := second.rt.Invoke(context.Background(), second, Request{
		Tenant: "t", Point: "message.outbound", Context: map[string]any{"outgoing": "key AKIAIOSFODNN7EXAMPLE here"},
	})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if res.Decision == nil {
		t.Fatalf("no decision: %+v", res)
	}
}

// TestModuleCacheBadEntries damages an entry in every way a crash, a bad
// disk or a confused operator could: each is ignored, the module loads by
// the full path, and the entry is rewritten.
func TestModuleCacheBadEntries(t *testing.T) {
	events := mcRecord(t)
	wasm := mcGuest(t, "scripted.wasm")
	flip := func(off int) func(t *testing.T, good []byte, path string) {
		return func(t *testing.T, good []byte, path string) {
			if off < 0 {
				off += len(good)
			}
			b := slices.Clone(good)
			b[off] ^= 0x10
			mcWrite(t, path, b)
		}
	}
	write := func(f func(good []byte) []byte) func(t *testing.T, good []byte, path string) {
		return func(t *testing.T, good []byte, path string) { mcWrite(t, path, f(slices.Clone(good))) }
	}
	// another writes, at path, the entry of other loaded with cfg.
	another := func(other []byte, cfg Config) func(t *testing.T, good []byte, path string) {
		return func(t *testing.T, good []byte, path string) {
			cfg.CacheDir = t.TempDir()
			mcLoad(t, cfg, other, events, modcacheMiss, modcacheStored)
			b, err := os.ReadFile(mcEntry(t, cfg, other).path)
			if err != nil {
				t.Fatal(err)
			}
			mcWrite(t, path, b)
		}
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, good []byte, path string)
		// unrepairable: the path cannot be written (it is a directory).
		unrepairable bool
	}{
		{name: "empty", damage: write(func([]byte) []byte { return nil })},
		{name: "truncated in the header", damage: write(func(b []byte) []byte { return b[:modcacheHeaderLen/2] })},
		{name: "only the header", damage: write(func(b []byte) []byte { return b[:modcacheHeaderLen] })},
		{name: "truncated by one byte", damage: write(func(b []byte) []byte { return b[:len(b)-1] })},
		{name: "truncated in the info", damage: write(func(b []byte) []byte { return b[:modcacheHeaderLen+10] })},
		{name: "a byte appended", damage: write(func(b []byte) []byte { return append(b, 0) })},
		{name: "text", damage: write(func([]byte) []byte { return []byte("not a cache entry\n") })},
		{name: "zeros", damage: write(func(b []byte) []byte { return make([]byte, len(b)) })},
		{name: "magic", damage: flip(0)},
		{name: "format", damage: flip(8)},
		{name: "key", damage: flip(20)},
		{name: "digest", damage: flip(50)},
		{name: "flags", damage: flip(76)},
		{name: "info length", damage: flip(80)},
		{name: "manifest length", damage: flip(84)},
		{name: "module length", damage: flip(88)},
		{name: "checksum", damage: flip(modcacheSumOffset + 3)},
		{name: "info", damage: flip(modcacheHeaderLen + 5)},
		{name: "last byte of the module", damage: flip(-1)},
		{name: "lengths moved between sections", damage: write(func(b []byte) []byte {
			le := binary.LittleEndian
			le.PutUint32(b[80:], le.Uint32(b[80:])+1)
			le.PutUint64(b[88:], le.Uint64(b[88:])-1)
			return b
		})},
		{name: "entry of another module", damage: another(mcGuest(t, "policy.wasm"), Config{})},
		{name: "entry of another configuration", damage: another(wasm, Config{MaxModuleBytes: 1 << 20})},
		{name: "entry without metering", damage: another(wasm, Config{disableMetering: true})},
		{name: "too large", damage: func(t *testing.T, good []byte, path string) {
			mcWrite(t, path, good)
			if err := os.Truncate(path, mcEntry(t, Config{}, wasm).maxBytes+1); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a directory", unrepairable: true, damage: func(t *testing.T, good []byte, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := Config{CacheDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			want := mcLoad(t, cfg, wasm, events, modcacheMiss, modcacheStored).Info()
			path := mcEntry(t, cfg, wasm).path
			good, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tt.damage(t, good, path)
			logs.Reset()

			store := modcacheStored
			if tt.unrepairable {
				store = modcacheStoreFailed
			}
			m := mcLoad(t, cfg, wasm, events, modcacheRefused, store)
			if !equalInfo(m.Info(), want) {
				t.Fatalf("Info after a bad entry:\n%+v\nwant\n%+v", m.Info(), want)
			}
			if !bytes.Contains(logs.Bytes(), []byte("level=WARN msg=\"runtime: ignoring a module cache entry\"")) {
				t.Errorf("no warning logged; logs:\n%s", logs.Bytes())
			}
			if tt.unrepairable {
				return
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, good) {
				t.Fatalf("entry not repaired: %d bytes, %v", len(got), err)
			}
			mcLoad(t, cfg, wasm, events, modcacheHit)
		})
	}
}

func mcWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestModuleCacheKey checks that every input of validation and
// instrumentation separates entries, and that nothing else does.
func TestModuleCacheKey(t *testing.T) {
	events := mcRecord(t)
	wasm := mcGuest(t, "scripted.wasm") // memory: 4 pages minimum
	dir := t.TempDir()
	mcLoad(t, Config{CacheDir: dir}, wasm, events, modcacheMiss, modcacheStored)
	tests := []struct {
		name string
		cfg  Config
		want []modcacheEvent
	}{
		{"same configuration", Config{}, []modcacheEvent{modcacheHit}},
		{"defaults spelled out", Config{MaxModuleBytes: DefaultMaxModuleBytes, MaxMemoryPages: DefaultMaxMemoryPages}, []modcacheEvent{modcacheHit}},
		{"limits of invocations", Config{Limits: Limits{Fuel: 10, MemoryPages: 8}, CacheModules: 1}, []modcacheEvent{modcacheHit}},
		{"interpreter", Config{Interpreter: true}, []modcacheEvent{modcacheHit}},
		{"no deadline interrupt", Config{noDeadlineInterrupt: true}, []modcacheEvent{modcacheHit}},
		{"MaxMemoryPages", Config{MaxMemoryPages: 100, Limits: Limits{MemoryPages: 100}}, []modcacheEvent{modcacheMiss, modcacheStored}},
		{"MaxModuleBytes", Config{MaxModuleBytes: 1 << 20}, []modcacheEvent{modcacheMiss, modcacheStored}},
		{"DisableMetering", Config{disableMetering: true}, []modcacheEvent{modcacheMiss, modcacheStored}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.CacheDir = dir
			mcLoad(t, cfg, wasm, events, tt.want...)
		})
	}

	// The entry made under the default MaxMemoryPages must not let the
	// module past a lower one.
	t.Run("MaxMemoryPages below the module's minimum", func(t *testing.T) {
		r := mcRuntime(t, Config{CacheDir: dir, MaxMemoryPages: 2, Limits: Limits{MemoryPages: 2}})
		_, err := r.Load(context.Background(), wasm)
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != "memory_min_pages" {
			t.Fatalf("Load: %v, want a memory_min_pages LimitError", err)
		}
		if got := events(); !slices.Equal(got, []modcacheEvent{modcacheMiss}) {
			t.Fatalf("module cache did %v", got)
		}
	})

	// One directory per key.
	keys, err := os.ReadDir(filepath.Join(dir, modcacheSubdir))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 4 {
		t.Errorf("%d key directories, want 4 (default, MaxMemoryPages 100, MaxModuleBytes, unmetered)", len(keys))
	}
}

func TestReleasedVersion(t *testing.T) {
	const path = "github.com/wasmhooks/wasmhooks"
	mod := func(v string) debug.Module { return debug.Module{Path: path, Version: v, Sum: "h1:x"} }
	dep := func(m debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "v1.0.0"}, Deps: []*debug.Module{&m}}
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, ""},
		{"main module, devel", &debug.BuildInfo{Main: mod("(devel)")}, ""},
		{"main module, tagged", &debug.BuildInfo{Main: mod("v1.2.3")}, path + "@v1.2.3 h1:x"},
		{"main module, clean pseudo-version", &debug.BuildInfo{Main: mod("v0.0.0-20260101000000-abcdef012345")},
			path + "@v0.0.0-20260101000000-abcdef012345 h1:x"},
		{"main module, dirty", &debug.BuildInfo{Main: mod("v0.0.0-20260101000000-abcdef012345+dirty")}, ""},
		{"dependency, tagged", dep(mod("v1.2.3")), path + "@v1.2.3 h1:x"},
		{"dependency replaced by a directory", dep(debug.Module{Path: path, Version: "v1.2.3", Replace: &debug.Module{Path: "../wasmhooks"}}), ""},
		{"dependency replaced by a fork", dep(debug.Module{Path: path, Version: "v1.2.3", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.2.4", Sum: "h1:y"}}),
			"example.com/fork@v1.2.4 h1:y"},
		{"not linked as a module", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "v1.0.0"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := releasedVersion(tt.bi); got != tt.want {
				t.Errorf("releasedVersion = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestModuleCacheRefusedModules checks that a module Load refuses leaves no
// entry, and is refused the same way every time.
func TestModuleCacheRefusedModules(t *testing.T) {
	events := mcRecord(t)
	tests := []struct {
		name string
		wasm func(t *testing.T) []byte
	}{
		{"not a module", func(*testing.T) []byte { return []byte("\x00asm\x01\x00\x00\x00garbage") }},
		{"no handle export", func(t *testing.T) []byte {
			return testutil.WAT(t, `(module (memory (export "memory") 1))`)
		}},
		{"too much memory", func(t *testing.T) []byte {
			return testutil.WAT(t, `(module (memory (export "memory") 5000)
				(func (export "hook_v1_handle") (param i32) (result i64) i64.const 0))`)
		}},
		{"invalid code (wazero refuses it)", mcIllTyped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := tt.wasm(t)
			cfg := Config{CacheDir: t.TempDir()}
			var errs []string
			for range 2 {
				_, err := mcRuntime(t, cfg).Load(context.Background(), wasm)
				if err == nil {
					t.Fatal("Load succeeded")
				}
				errs = append(errs, err.Error())
				if got := events(); !slices.Equal(got, []modcacheEvent{modcacheMiss}) {
					t.Fatalf("module cache did %v, want a miss", got)
				}
			}
			if errs[0] != errs[1] {
				t.Errorf("errors differ:\n%s\n%s", errs[0], errs[1])
			}
			err := filepath.WalkDir(filepath.Join(cfg.CacheDir, modcacheSubdir), func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					t.Errorf("entry left: %s", path)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// mcIllTyped returns a hook that our validation and instrumentation accept
// but wazero refuses: a function declared to return an i32 returns an i64.
func mcIllTyped(t *testing.T) []byte {
	const marker = 0x2a2a2a2
	wasm := testutil.WAT(t, `(module (memory (export "memory") 1)
		(func $f (result i32) i32.const 0x2a2a2a2)
		(func (export "hook_v1_handle") (param i32) (result i64) (drop (call $f)) i64.const 0))`)
	i32 := wasmbin.AppendSLEB128([]byte{0x41}, marker) // i32.const marker
	at := bytes.Index(wasm, i32)
	if at < 0 || bytes.Count(wasm, i32) != 1 {
		t.Fatal("i32.const marker not found once")
	}
	wasm[at] = 0x42 // i64.const marker
	if _, err := Validate(wasm, ValidateOptions{}); err != nil {
		t.Fatalf("Validate refuses the ill-typed module: %v", err)
	}
	return wasm
}

// TestModuleCacheUnwritable checks that a cache that cannot be written
// costs time, not loads.
func TestModuleCacheUnwritable(t *testing.T) {
	events := mcRecord(t)
	wasm := mcGuest(t, "scripted.wasm")
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []modcacheEvent
	}{
		{"modules is a file", func(t *testing.T, dir string) {
			mcWrite(t, filepath.Join(dir, modcacheSubdir), nil)
		}, []modcacheEvent{modcacheRefused, modcacheStoreFailed}},
		{"read-only directory", func(t *testing.T, dir string) {
			if goruntime.GOOS == "windows" || os.Geteuid() == 0 {
				t.Skip("permissions do not stop this user")
			}
			sub := filepath.Join(dir, modcacheSubdir)
			if err := os.Mkdir(sub, 0o500); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(sub, 0o700) })
		}, []modcacheEvent{modcacheMiss, modcacheStoreFailed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := Config{CacheDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			mcRuntime(t, cfg) // wazero's directories
			tt.setup(t, cfg.CacheDir)
			for range 2 {
				mcLoad(t, cfg, wasm, events, tt.want...)
			}
			if !bytes.Contains(logs.Bytes(), []byte("level=WARN msg=\"runtime: cannot write a module cache entry\"")) {
				t.Errorf("no warning logged; logs:\n%s", logs.Bytes())
			}
		})
	}
}

// TestModuleCacheConcurrentLoads loads one module from many Runtimes sharing
// a directory at once, as processes starting together do.
func TestModuleCacheConcurrentLoads(t *testing.T) {
	mcRecord(t) // events from several goroutines; only the race detector looks
	wasm := mcWithManifest(t, mcGuest(t, "scripted.wasm"))
	cfg := Config{CacheDir: t.TempDir()}
	mcRuntime(t, cfg) // wazero's directories
	var wg sync.WaitGroup
	infos := make([]*ModuleInfo, 8)
	for i := range infos {
		wg.Go(func() {
			r, err := New(context.Background(), cfg)
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Close(context.Background())
			for range 3 {
				m, err := r.Load(context.Background(), wasm)
				if err != nil {
					t.Error(err)
					return
				}
				infos[i] = m.Info()
				_ = m.Close(context.Background())
			}
		})
	}
	wg.Wait()
	want := infos[0]
	for i, info := range infos {
		if info == nil || !equalInfo(info, want) {
			t.Errorf("runtime %d: %+v, want %+v", i, info, want)
		}
	}
	if p, err := mcEntry(t, cfg, wasm).load(wasm); p == nil || err != nil {
		t.Fatalf("entry after concurrent loads: %v, %v", p, err)
	}
	tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(mcEntry(t, cfg, wasm).path), "*.tmp"))
	if len(tmps) > 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
}

// FuzzModcacheDecode checks that decoding an entry never panics, and that
// the checksum lets no change of a valid entry through.
func FuzzModcacheDecode(f *testing.F) {
	wasm := mcWithManifest(f, mcGuest(f, "scripted.wasm"))
	e := mcEntry(f, Config{CacheDir: f.TempDir()}, wasm)
	info, parsed, err := validate(wasm, ValidateOptions{})
	if err != nil {
		f.Fatal(err)
	}
	bin, _, err := instrument(wasm, parsed)
	if err != nil {
		f.Fatal(err)
	}
	man, ok := parsed.CustomSection(abi.ManifestSection)
	if !ok {
		f.Fatal("no manifest")
	}
	if err := e.store(&preparedModule{info: info, bin: bin, manifest: man, hasManifest: ok}); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(e.path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:modcacheHeaderLen])
	f.Add(good[:len(good)-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := e.decode(b, wasm)
		if (p == nil) == (err == nil) {
			t.Fatalf("decode returned %v, %v", p, err)
		}
		if err == nil && !bytes.Equal(b, good) {
			t.Fatalf("decode accepted a changed entry")
		}
		if err != nil && !errors.Is(err, errModcacheEntry) {
			t.Fatalf("error %v does not wrap errModcacheEntry", err)
		}
	})
}

// BenchmarkLoadModuleCache measures Load of an example Go hook in a new
// Runtime whose CacheDir holds wazero's compiled code: without the module
// cache (its directory cannot be created: what Load did before it), with it
// but without this module's entry (the full path, and the entry written),
// and from the entry.
func BenchmarkLoadModuleCache(b *testing.B) {
	wasm := testutil.BuildHook(b, "hooks-examples/redact-secrets")
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		setup func(b *testing.B, cfg Config, entry string)
	}{
		{"no-module-cache", func(b *testing.B, cfg Config, entry string) {
			if err := os.RemoveAll(filepath.Join(cfg.CacheDir, modcacheSubdir)); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cfg.CacheDir, modcacheSubdir), nil, 0o600); err != nil {
				b.Fatal(err)
			}
		}},
		{"module-cache-miss", func(b *testing.B, cfg Config, entry string) {
			if err := os.Remove(entry); err != nil && !errors.Is(err, fs.ErrNotExist) {
				b.Fatal(err)
			}
		}},
		{"module-cache-hit", func(*testing.B, Config, string) {}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{CacheDir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)}
			warm, err := New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := warm.Load(ctx, wasm); err != nil { // fills both caches
				b.Fatal(err)
			}
			_ = warm.Close(ctx)
			entry := mcEntry(b, cfg, wasm).path
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				bc.setup(b, cfg, entry)
				r, err := New(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := r.Load(ctx, wasm); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = r.Close(ctx)
				b.StartTimer()
			}
		})
	}
}
