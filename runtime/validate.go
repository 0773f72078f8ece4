package runtime

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime/internal/meter"
	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// ModuleInfo is what validation found in a module.
type ModuleInfo struct {
	// Digest is the hex sha256 of the module's bytes.
	Digest string `json:"digest"`
	// Size is the module's size in bytes.
	Size int `json:"size"`
	// ABIVersion is the hook ABI the module targets, "1" for hook_v1.
	ABIVersion string `json:"abi_version"`
	// Imports lists the module's imports with their signatures.
	Imports []ImportInfo `json:"imports"`
	// Exports lists the module's exports.
	Exports []ExportInfo `json:"exports"`
	// MemoryMinPages and MemoryMaxPages are the declared memory limits;
	// MemoryMaxPages is nil when the module declares no maximum.
	MemoryMinPages uint32  `json:"memory_min_pages"`
	MemoryMaxPages *uint32 `json:"memory_max_pages"`
	// Functions counts the functions the module defines.
	Functions int `json:"functions"`
	// HasInitialize reports whether the module exports _initialize.
	HasInitialize bool `json:"has_initialize"`
	// UsesWASI reports whether the module imports any WASI function.
	UsesWASI bool `json:"uses_wasi"`
	// Manifest is the module's manifest; nil when it has none.
	Manifest *abi.Manifest `json:"manifest"`
}

// ImportInfo describes one import.
type ImportInfo struct {
	Module    string `json:"module"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Signature string `json:"signature,omitempty"`
}

// ExportInfo describes one export.
type ExportInfo struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Signature string `json:"signature,omitempty"`
}

// ValidateOptions bounds Validate. Zero fields mean the defaults of Config.
type ValidateOptions struct {
	// MaxModuleBytes refuses larger modules. Zero means 32 MiB.
	MaxModuleBytes int
	// MaxMemoryPages refuses a module whose declared minimum memory is
	// larger. Zero means DefaultMaxMemoryPages.
	MaxMemoryPages uint32
}

var hookModuleRE = regexp.MustCompile(`^hook_v([0-9]+)$`)
var handleExportRE = regexp.MustCompile(`^hook_v([0-9]+)_handle$`)

// Validate checks a module against ABI v1 without running or compiling it:
// its size; its structure (a bounded binary reader, so garbage and hostile
// shapes are refused in bounded time); its imports (only hook_v1.host_call
// with the exact signature, plus the fixed WASI set with theirs); its
// exports (memory and hook_v1_handle with the exact signature, _initialize
// optional); its memory (one, not shared, not 64-bit, minimum within the
// limit); its start function; and its manifest. Every error names the
// offending import or export.
//
// Validate also decodes every instruction, as Load does when it instruments
// the module (see RATIONALE.md#why-fuel-and-how-much): an unknown opcode or
// an instruction of an unsupported proposal (SIMD, threads, tail calls,
// exceptions) refuses the module, as does an export whose name starts with
// the reserved prefix "__wasmhooks". See
// RATIONALE.md#why-validate-with-our-own-binary-reader-before-compiling.
func Validate(wasm []byte, opts ValidateOptions) (*ModuleInfo, error) {
	info, m, err := validate(wasm, opts)
	if err != nil {
		return info, err
	}
	if _, _, err := instrument(wasm, m); err != nil {
		return info, err
	}
	return info, nil
}

// instrument injects fuel and the stack limiter into a validated module.
func instrument(wasm []byte, m *wasmbin.Module) ([]byte, meter.Stats, error) {
	out, st, err := meter.Instrument(wasm, m)
	if err != nil {
		return nil, st, &ValidationError{Reason: "the code cannot be instrumented", Err: err}
	}
	return out, st, nil
}

// validate is Validate without the instruction pass; it also returns the
// parsed module.
func validate(wasm []byte, opts ValidateOptions) (*ModuleInfo, *wasmbin.Module, error) {
	if opts.MaxModuleBytes == 0 {
		opts.MaxModuleBytes = DefaultMaxModuleBytes
	}
	if opts.MaxMemoryPages == 0 {
		opts.MaxMemoryPages = DefaultMaxMemoryPages
	}
	if len(wasm) > opts.MaxModuleBytes {
		return nil, nil, &LimitError{Limit: "module_bytes", Max: uint64(opts.MaxModuleBytes), Got: uint64(len(wasm))}
	}
	m, err := wasmbin.Parse(wasm, wasmbin.Limits{MaxModuleBytes: uint64(opts.MaxModuleBytes)})
	if err != nil {
		var le *wasmbin.LimitError
		if errors.As(err, &le) {
			return nil, nil, &LimitError{Limit: le.Limit, Max: le.Max, Got: le.Got}
		}
		return nil, nil, &ValidationError{Reason: "not a valid WebAssembly module", Err: err}
	}
	info := &ModuleInfo{Digest: Digest(wasm), Size: len(wasm), ABIVersion: strconv.Itoa(abi.Major), Functions: len(m.Functions)}

	// Imports.
	for _, imp := range m.Imports {
		ii := ImportInfo{Module: imp.Module, Name: imp.Name, Kind: imp.Kind.String()}
		if imp.Kind == wasmbin.KindFunc {
			ii.Signature = wasmbin.FormatFuncType(m.Types[imp.TypeIndex])
		}
		info.Imports = append(info.Imports, ii)
	}
	for _, ii := range info.Imports {
		name := ii.Module + "." + ii.Name
		if mm := hookModuleRE.FindStringSubmatch(ii.Module); mm != nil && ii.Module != abi.ImportModule {
			return info, nil, &ValidationError{Import: name, Reason: fmt.Sprintf("the module targets hook ABI v%s; this host speaks v%d", mm[1], abi.Major)}
		}
		if ii.Kind != "func" {
			return info, nil, &ValidationError{Import: name, Reason: fmt.Sprintf("imports a %s; a hook may import only functions (it must define and export its own memory)", ii.Kind)}
		}
		switch ii.Module {
		case abi.ImportModule:
			if ii.Name != abi.HostCallImport {
				return info, nil, &ValidationError{Import: name, Reason: fmt.Sprintf("%s has no function %q; the only import is %s.%s", abi.ImportModule, ii.Name, abi.ImportModule, abi.HostCallImport)}
			}
			if ii.Signature != abi.HostCallSignature {
				return info, nil, &ValidationError{Import: name, Reason: fmt.Sprintf("signature is %s, want %s", ii.Signature, abi.HostCallSignature)}
			}
		case abi.WASIModule:
			want, ok := abi.WASISignature(ii.Name)
			if !ok {
				return info, nil, &ValidationError{Import: name, Reason: "not in the fixed WASI set a hook may import (see ABI.md#wasi)"}
			}
			if ii.Signature != want {
				return info, nil, &ValidationError{Import: name, Reason: fmt.Sprintf("signature is %s, want %s", ii.Signature, want)}
			}
			info.UsesWASI = true
		default:
			return info, nil, &ValidationError{Import: name, Reason: fmt.Sprintf("a hook may import only %s.%s and the fixed WASI set", abi.ImportModule, abi.HostCallImport)}
		}
	}

	// Exports.
	for _, ex := range m.Exports {
		ei := ExportInfo{Name: ex.Name, Kind: ex.Kind.String()}
		if ex.Kind == wasmbin.KindFunc {
			if ft, ok := m.FuncType(ex.Index); ok {
				ei.Signature = wasmbin.FormatFuncType(ft)
			}
		}
		info.Exports = append(info.Exports, ei)
	}
	sort.Slice(info.Exports, func(i, j int) bool { return info.Exports[i].Name < info.Exports[j].Name })
	var haveHandle, haveMemory bool
	for _, ei := range info.Exports {
		switch {
		case ei.Name == abi.HandleExport:
			if ei.Kind != "func" {
				return info, nil, &ValidationError{Export: ei.Name, Reason: fmt.Sprintf("is a %s, want a function %s", ei.Kind, abi.HandleSignature)}
			}
			if ei.Signature != abi.HandleSignature {
				return info, nil, &ValidationError{Export: ei.Name, Reason: fmt.Sprintf("signature is %s, want %s", ei.Signature, abi.HandleSignature)}
			}
			haveHandle = true
		case ei.Name == abi.InitializeExport:
			if ei.Kind != "func" || ei.Signature != "() -> ()" {
				return info, nil, &ValidationError{Export: ei.Name, Reason: fmt.Sprintf("must be a function () -> (), is a %s %s", ei.Kind, ei.Signature)}
			}
			info.HasInitialize = true
		case ei.Name == abi.MemoryExport:
			if ei.Kind != "memory" {
				return info, nil, &ValidationError{Export: ei.Name, Reason: fmt.Sprintf("is a %s, want a memory", ei.Kind)}
			}
			haveMemory = true
		case strings.HasPrefix(ei.Name, meter.ReservedPrefix):
			return info, nil, &ValidationError{Export: ei.Name, Reason: fmt.Sprintf("names starting with %q are reserved for the runtime's instrumentation", meter.ReservedPrefix)}
		default:
			if mm := handleExportRE.FindStringSubmatch(ei.Name); mm != nil {
				return info, nil, &ValidationError{Export: ei.Name, Reason: fmt.Sprintf("the module targets hook ABI v%s; this host speaks v%d and needs %s", mm[1], abi.Major, abi.HandleExport)}
			}
		}
	}
	if !haveHandle {
		return info, nil, &ValidationError{Export: abi.HandleExport, Reason: "missing; a hook must export " + abi.HandleExport + " " + abi.HandleSignature}
	}
	if !haveMemory {
		return info, nil, &ValidationError{Export: abi.MemoryExport, Reason: "missing; a hook must export its linear memory as \"memory\""}
	}

	// Memory.
	if len(m.Memories) != 1 {
		return info, nil, &ValidationError{Export: abi.MemoryExport, Reason: fmt.Sprintf("the module defines %d memories, want exactly 1", len(m.Memories))}
	}
	mem := m.Memories[0]
	info.MemoryMinPages = mem.Min
	if mem.HasMax {
		mx := mem.Max
		info.MemoryMaxPages = &mx
	}
	if mem.Min > opts.MaxMemoryPages {
		return info, nil, &LimitError{Limit: "memory_min_pages", Max: uint64(opts.MaxMemoryPages), Got: uint64(mem.Min)}
	}

	// Start function.
	if m.StartIsImport() {
		return info, nil, &ValidationError{Reason: "the start function is an import; a start function must be defined in the module"}
	}

	// Control flow the compiler would take unbounded time over.
	if err := checkCompileCost(m); err != nil {
		return info, nil, err
	}

	// Manifest.
	if data, ok := m.CustomSection(abi.ManifestSection); ok {
		man, err := abi.DecodeManifest(data)
		if err != nil {
			return info, nil, &ValidationError{Reason: "manifest refused", Err: err}
		}
		info.Manifest = man
	}
	return info, m, nil
}
