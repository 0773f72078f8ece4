package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime/internal/meter"
	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// The module cache keeps on disk, under Config.CacheDir, what Load computes
// before it compiles a module: the ModuleInfo that validation returned and
// the instrumented bytes. wazero's own cache there keeps only the compiled
// code, so without this every new process validated and instrumented every
// module again. See RATIONALE.md#why-cache-the-instrumented-module-on-disk.
//
// Layout: CacheDir/modules/<key>/<digest>, where digest is the hex sha256
// of the original module and key the first 16 bytes, in hex, of the sha256
// of everything else the entry depends on (see modcacheKey). An entry is
// one file:
//
//	offset  size  field
//	     0     8  magic "whmodule"
//	     8     4  format version (modcacheFormat)
//	    12    32  key (the full sha256)
//	    44    32  the module's digest
//	    76     4  flags: modcacheMetered, modcacheManifest
//	    80     4  length of the ModuleInfo (JSON, Manifest left out)
//	    84     4  length of the manifest (the raw custom section)
//	    88     8  length of the instrumented module (0 unless metered)
//	    96     4  CRC-32C of bytes 0-95 and of everything after byte 99
//	   100        the ModuleInfo, the manifest, the instrumented module
//
// Integers are little-endian. An entry is used only if every field matches
// what the reader expects and the checksum is right (CRC-32C, not sha256:
// it detects accidents, which is all a checksum can do in a directory its
// readers trust, at a twentieth of the cost, about 0.3 ms against 6 ms for a
// Go hook's entry); anything else (a
// truncated, corrupt or foreign file) is ignored and overwritten by the full
// path. Entries are written to a temporary file in the same directory and
// renamed, so readers never see a partial one and concurrent writers of the
// same module leave one of their identical entries.
const (
	// modcacheSubdir is the module cache's directory under CacheDir, beside
	// wazero's.
	modcacheSubdir = "modules"
	// modcacheFormat is the version of the entry format above.
	modcacheFormat = 1
	// modcacheRules is the version of what validate and checkCompileCost
	// decide. Bump it whenever they accept, refuse or describe a module
	// differently, as meter.Version is bumped with the instrumentation:
	// entries of the old rules are then no longer found. (A new release
	// or build of the library changes the key anyway: see buildIdentity.)
	modcacheRules = 2

	modcacheMagic     = "whmodule"
	modcacheHeaderLen = 100
	modcacheSumOffset = 96

	modcacheMetered  = 1 << 0 // the instrumented module is stored
	modcacheManifest = 1 << 1 // the module has a manifest
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errModcacheEntry is wrapped by the reasons an entry is refused.
var errModcacheEntry = errors.New("unusable module cache entry")

// testHookModcache, when a test sets it, is told what prepareModule did
// with the module cache.
var testHookModcache func(ev modcacheEvent)

// modcacheEvent is what happened to a module cache entry in one Load.
type modcacheEvent int

const (
	modcacheHit         modcacheEvent = iota // used: nothing validated or instrumented
	modcacheMiss                             // none: the full path ran
	modcacheRefused                          // unusable: the full path ran
	modcacheStored                           // written after the full path
	modcacheStoreFailed                      // not written; the load went on
)

func modcacheNotify(ev modcacheEvent) {
	if h := testHookModcache; h != nil {
		h(ev)
	}
}

// preparedModule is a module ready to compile.
type preparedModule struct {
	info *ModuleInfo
	// bin is what to compile: the instrumented module, or the original
	// when metering is disabled.
	bin []byte
	// manifest is the raw manifest section (hasManifest tells an empty
	// one from none), stored so that a hit decodes it exactly as
	// validate did.
	manifest    []byte
	hasManifest bool
	// entry is where the module cache keeps this module; nil without a
	// CacheDir. fromDisk reports that p was read from it.
	entry    *modcacheEntry
	fromDisk bool
}

// prepareModule returns wasm validated and instrumented, from the module cache
// when it has a usable entry (then nothing is validated or instrumented
// again), otherwise by validating and instrumenting it. digest is
// Digest(wasm). A module that fails is never cached; Load stores one that
// succeeds, with keepModule, once it has compiled.
func (r *Runtime) prepareModule(ctx context.Context, wasm []byte, digest string) (*preparedModule, error) {
	opts := ValidateOptions{MaxModuleBytes: r.cfg.MaxModuleBytes, MaxMemoryPages: r.cfg.MaxMemoryPages}
	var entry *modcacheEntry
	if r.cfg.CacheDir != "" {
		var err error
		if entry, err = newModcacheEntry(r.cfg.CacheDir, opts, !r.cfg.disableMetering, digest); err != nil {
			r.logger.LogAttrs(ctx, slog.LevelWarn, "runtime: module cache off", slog.String("error", err.Error()))
		}
	}
	if entry != nil {
		p, err := entry.load(wasm)
		switch {
		case p != nil:
			modcacheNotify(modcacheHit)
			return p, nil
		case err != nil:
			r.logger.LogAttrs(ctx, slog.LevelWarn, "runtime: ignoring a module cache entry",
				slog.String("path", entry.path), slog.String("error", err.Error()))
			modcacheNotify(modcacheRefused)
		default:
			modcacheNotify(modcacheMiss)
		}
	}
	info, parsed, err := validate(wasm, opts)
	if err != nil {
		return nil, err
	}
	p := &preparedModule{info: info, bin: wasm, entry: entry}
	p.manifest, p.hasManifest = parsed.CustomSection(abi.ManifestSection)
	if !r.cfg.disableMetering {
		// See RATIONALE.md#why-fuel-and-how-much. The instrumented bytes
		// are compiled and cached under the original's digest, so a
		// module is rewritten once per process, and kept in the module
		// cache so that it is rewritten once per CacheDir; wazero's disk
		// cache keys on the instrumented bytes.
		if p.bin, _, err = instrument(wasm, parsed); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// keepModule stores p in the module cache, once Load has compiled it. It does
// nothing without a CacheDir or when p came from there. A failure to write
// is logged and otherwise ignored: it costs the next process time, never a
// failed load.
func (r *Runtime) keepModule(ctx context.Context, p *preparedModule) {
	if p.entry == nil || p.fromDisk {
		return
	}
	if err := p.entry.store(p); err != nil {
		r.logger.LogAttrs(ctx, slog.LevelWarn, "runtime: cannot write a module cache entry",
			slog.String("path", p.entry.path), slog.String("error", err.Error()))
		modcacheNotify(modcacheStoreFailed)
		return
	}
	modcacheNotify(modcacheStored)
}

// modcacheEntry is where one module's entry lives and what it must carry.
type modcacheEntry struct {
	path    string
	key     [32]byte
	digest  [32]byte
	metered bool
	// maxBytes bounds the entry's file: a larger file is not read, and a
	// larger entry is not written.
	maxBytes int64
}

// newModcacheEntry returns the entry of the module whose hex sha256 is
// digest.
func newModcacheEntry(cacheDir string, opts ValidateOptions, metered bool, digest string) (*modcacheEntry, error) {
	key, err := modcacheKey(opts, metered)
	if err != nil {
		return nil, err
	}
	e := &modcacheEntry{
		key:     key,
		metered: metered,
		// The instrumentation grows a Go hook by about a quarter and the
		// JSON of a ModuleInfo is a fraction of the module: eight times
		// the largest module is room to spare.
		maxBytes: modcacheHeaderLen + 1<<20 + 8*int64(opts.MaxModuleBytes),
	}
	if len(digest) != hex.EncodedLen(len(e.digest)) {
		return nil, fmt.Errorf("%q is not a module digest", digest)
	}
	if _, err := hex.Decode(e.digest[:], []byte(digest)); err != nil {
		return nil, fmt.Errorf("%q is not a module digest", digest)
	}
	e.path = filepath.Join(cacheDir, modcacheSubdir, hex.EncodeToString(e.key[:16]), digest)
	return e, nil
}

// modcacheKey returns the sha256 of everything an entry depends on besides
// the module's bytes: the entry format, the rules of this build, whether the
// module is metered, and the options validate is given. validate reads
// nothing else of the Config, and the instrumentation nothing at all.
func modcacheKey(opts ValidateOptions, metered bool) ([32]byte, error) {
	rules, err := modcacheBuildRules()
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(fmt.Appendf(nil, "%s\nmetered=%t\nvalidate=%+v\n", rules, metered, opts)), nil
}

// modcacheBuildRules describes what this build decides about a module: the
// versions of the entry format, of validate's rules and of the
// instrumentation; the ABI and the limits validation checks against; the
// shape of ModuleInfo (a field added to it makes older entries unusable);
// and the build's identity (see buildIdentity), so that new code never
// uses entries made by other code, whether or not anyone bumped a version.
var modcacheBuildRules = sync.OnceValues(func() (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "format=%d\nrules=%d\nmeter=%s\n", modcacheFormat, modcacheRules, meter.Version)
	fmt.Fprintf(&b, "abi=%d host_call=%s handle=%s\n", abi.Major, abi.HostCallSignature, abi.HandleSignature)
	wasiFunctions := abi.WASIFunctions()
	wasi := make([]string, 0, len(wasiFunctions))
	for name, sig := range wasiFunctions {
		wasi = append(wasi, name+" "+sig)
	}
	slices.Sort(wasi)
	fmt.Fprintf(&b, "wasi=%s\n", strings.Join(wasi, ", "))
	fmt.Fprintf(&b, "compile_cost=%d/%d/%d/%d/%d br_table=%d/%d/%d/%d\n", MaxControlPerFunction, MaxControlSquares, loopWeight, bulkWeight,
		MaxControlCarried, MaxBrTableTargetsPerFunction, MaxBrTableTargetsSquares, MaxBrTableTargets, MaxBrTableTargetsCarried)
	fmt.Fprintf(&b, "declarations_by_functions=%d compile_heap=%d/%d\n", MaxDeclarationsByFunctions, MaxCompileHeapPerFunction, MaxCompileHeap)
	fmt.Fprintf(&b, "wasmbin=%+v\n", wasmbin.DefaultLimits())
	fmt.Fprintf(&b, "module_info=%s\n", typeShape(reflect.TypeFor[ModuleInfo](), nil))
	id, err := buildIdentity()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "build=%s\n", id)
	return b.String(), nil
})

// typeShape describes t's structure: field names, types and tags.
func typeShape(t reflect.Type, seen []reflect.Type) string {
	if slices.Contains(seen, t) {
		return t.String()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + typeShape(t.Elem(), seen)
	case reflect.Slice:
		return "[]" + typeShape(t.Elem(), seen)
	case reflect.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), typeShape(t.Elem(), seen))
	case reflect.Map:
		return "map[" + typeShape(t.Key(), seen) + "]" + typeShape(t.Elem(), seen)
	case reflect.Struct:
		seen = append(seen, t)
		var b strings.Builder
		b.WriteString(t.String() + "{")
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(&b, "%s %s %q; ", f.Name, typeShape(f.Type, seen), f.Tag)
		}
		b.WriteString("}")
		return b.String()
	default:
		return t.String()
	}
}

// buildIdentity identifies the code of this build. For a released version
// of this module (a tag, or a pseudo-version of a clean checkout, as the
// build recorded it) that is the version. For a development build ("(devel)",
// "+dirty", a replace by a directory, tests) it is the sha256 of the
// executable, computed once per process: code being edited has no version
// that says when validation or the instrumentation changed.
func buildIdentity() (string, error) {
	bi, _ := debug.ReadBuildInfo()
	if v := releasedVersion(bi); v != "" {
		return v, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("identifying a development build: %w", err)
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("identifying a development build: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("identifying a development build: %w", err)
	}
	return "executable " + hex.EncodeToString(h.Sum(nil)), nil
}

// releasedVersion returns this module's version as bi records it, or ""
// for a development build (or a nil bi).
func releasedVersion(bi *debug.BuildInfo) string {
	const path = "github.com/wasmhooks/wasmhooks"
	if bi == nil {
		return ""
	}
	mod := &bi.Main
	if mod.Path != path {
		mod = nil
		for _, d := range bi.Deps {
			if d.Path == path {
				mod = d
				break
			}
		}
	}
	if mod != nil && mod.Replace != nil {
		mod = mod.Replace
	}
	if mod == nil || mod.Version == "" || mod.Version == "(devel)" || strings.Contains(mod.Version, "+dirty") {
		return ""
	}
	return mod.Path + "@" + mod.Version + " " + mod.Sum
}

// load reads the entry of wasm. It returns nil, nil when there is none, and
// an error wrapping errModcacheEntry when the file cannot be used.
func (e *modcacheEntry) load(wasm []byte) (*preparedModule, error) {
	f, err := os.Open(e.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errModcacheEntry, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errModcacheEntry, err)
	}
	if !st.Mode().IsRegular() || st.Size() < modcacheHeaderLen || st.Size() > e.maxBytes {
		return nil, fmt.Errorf("%w: a %d-byte %s", errModcacheEntry, st.Size(), st.Mode().Type())
	}
	buf := make([]byte, st.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("%w: %w", errModcacheEntry, err)
	}
	return e.decode(buf, wasm)
}

// decode checks and decodes the entry of wasm, read whole into buf.
func (e *modcacheEntry) decode(buf, wasm []byte) (*preparedModule, error) {
	bad := func(reason string) error { return fmt.Errorf("%w: %s", errModcacheEntry, reason) }
	if len(buf) < modcacheHeaderLen || string(buf[:8]) != modcacheMagic {
		return nil, bad("not a module cache entry")
	}
	le := binary.LittleEndian
	if v := le.Uint32(buf[8:]); v != modcacheFormat {
		return nil, bad(fmt.Sprintf("format %d, want %d", v, modcacheFormat))
	}
	if !bytes.Equal(buf[12:44], e.key[:]) {
		return nil, bad("made with another configuration or build")
	}
	if !bytes.Equal(buf[44:76], e.digest[:]) {
		return nil, bad("made for another module")
	}
	flags := le.Uint32(buf[76:])
	infoLen, manLen, binLen := uint64(le.Uint32(buf[80:])), uint64(le.Uint32(buf[84:])), le.Uint64(buf[88:])
	body := buf[modcacheHeaderLen:]
	if infoLen > uint64(len(body)) || manLen > uint64(len(body)) || binLen > uint64(len(body)) ||
		infoLen+manLen+binLen != uint64(len(body)) {
		return nil, bad("truncated or lengths do not match")
	}
	sum := crc32.Update(crc32.Checksum(buf[:modcacheSumOffset], castagnoli), castagnoli, body)
	if sum != le.Uint32(buf[modcacheSumOffset:]) {
		return nil, bad("checksum mismatch")
	}
	// The checksum covers the header, so what follows only guards against
	// an entry this code could never have written.
	if flags&^(modcacheMetered|modcacheManifest) != 0 || (flags&modcacheMetered != 0) != e.metered ||
		e.metered != (binLen > 0) || flags&modcacheManifest == 0 && manLen > 0 {
		return nil, bad("inconsistent flags")
	}
	infoJSON, man, bin := body[:infoLen], body[infoLen:infoLen+manLen], body[infoLen+manLen:]
	info := new(ModuleInfo)
	if err := json.Unmarshal(infoJSON, info); err != nil {
		return nil, bad("module info: " + err.Error())
	}
	if info.Digest != hex.EncodeToString(e.digest[:]) || info.Size != len(wasm) || info.Manifest != nil {
		return nil, bad("module info does not describe the module")
	}
	p := &preparedModule{info: info, bin: wasm, entry: e, fromDisk: true, hasManifest: flags&modcacheManifest != 0}
	if p.hasManifest {
		p.manifest = man
		m, err := abi.DecodeManifest(man)
		if err != nil {
			return nil, bad("manifest: " + err.Error())
		}
		info.Manifest = m
	}
	if e.metered {
		p.bin = bin
	}
	return p, nil
}

// store writes p's entry: to a temporary file in the entry's directory,
// then renamed over the entry.
func (e *modcacheEntry) store(p *preparedModule) (err error) {
	info := *p.info
	info.Manifest = nil // stored raw, decoded again on a hit
	infoJSON, err := json.Marshal(&info)
	if err != nil {
		return err
	}
	var bin []byte
	var flags uint32
	if e.metered {
		bin = p.bin
		flags |= modcacheMetered
	}
	if p.hasManifest {
		flags |= modcacheManifest
	}
	total := int64(modcacheHeaderLen) + int64(len(infoJSON)) + int64(len(p.manifest)) + int64(len(bin))
	if total > e.maxBytes || uint64(len(infoJSON)) > math.MaxUint32 || uint64(len(p.manifest)) > math.MaxUint32 {
		return fmt.Errorf("entry of %d bytes is over the limit of %d", total, e.maxBytes)
	}
	var hdr [modcacheHeaderLen]byte
	le := binary.LittleEndian
	copy(hdr[:8], modcacheMagic)
	le.PutUint32(hdr[8:], modcacheFormat)
	copy(hdr[12:44], e.key[:])
	copy(hdr[44:76], e.digest[:])
	le.PutUint32(hdr[76:], flags)
	le.PutUint32(hdr[80:], uint32(len(infoJSON)))
	le.PutUint32(hdr[84:], uint32(len(p.manifest)))
	le.PutUint64(hdr[88:], uint64(len(bin)))
	sum := crc32.Checksum(hdr[:modcacheSumOffset], castagnoli)
	for _, b := range [][]byte{infoJSON, p.manifest, bin} {
		sum = crc32.Update(sum, castagnoli, b)
	}
	le.PutUint32(hdr[modcacheSumOffset:], sum)

	dir := filepath.Dir(e.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(e.path)+".*.tmp") // mode 0600
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	for _, b := range [][]byte{hdr[:], infoJSON, p.manifest, bin} {
		if _, err = f.Write(b); err != nil {
			return err
		}
	}
	// As wazero does for its entries; the checksum catches what a crash
	// leaves anyway.
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), e.path)
}
