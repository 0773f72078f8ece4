package wasmbin

import "cmp"

// Limits bounds what Parse accepts. A zero field means its default (the
// Default* constant of the same name); there is no way to set a limit to zero.
//
// The defaults sit well above what the Go (GOOS=wasip1, -buildmode=c-shared),
// C (wasi-libc), Rust and AssemblyScript toolchains emit for a hook, and at or
// below the limits that browsers agree on (the WebAssembly JS API's
// "implementation-defined limits"), so a module that runs in a browser is not
// refused for its shape, only for its size. For scale: a Go hook that uses
// encoding/json and fmt is 3.3 MB with 2,121 defined functions, 36,530 data
// segments, a 2.0 MB code section and a table of 6,217 elements; one that also
// links net/http, crypto/tls, go/parser, text/template and math/big is 6.7 MB
// with 3,885 functions and 68,116 data segments.
type Limits struct {
	// MaxModuleBytes is the largest module accepted, in bytes.
	// Default DefaultMaxModuleBytes (32 MiB).
	MaxModuleBytes uint64
	// MaxCodeBytes is the largest code section accepted, in bytes: the input
	// of the compiler, whose time and memory grow with it.
	// Default DefaultMaxCodeBytes (16 MiB).
	MaxCodeBytes uint64
	// MaxFunctionBodyBytes is the largest single function body, in bytes.
	// Default DefaultMaxFunctionBodyBytes (1 MiB).
	MaxFunctionBodyBytes uint64
	// MaxFunctions is the most functions, imported plus defined.
	// Default DefaultMaxFunctions (50,000).
	MaxFunctions uint64
	// MaxLocals is the most locals of one function, parameters included
	// (the sum of the declarations is computed in 64 bits).
	// Default DefaultMaxLocals (50,000).
	MaxLocals uint64
	// MaxLocalsTotal is the most locals over all the defined functions
	// together, parameters included: what the compiler allocates and the
	// compiled module keeps (about 8 bytes each in wazero) grows with it.
	// Default DefaultMaxLocalsTotal (1,000,000).
	MaxLocalsTotal uint64
	// MaxParams is the most parameters of one function type.
	// Default DefaultMaxParams (1,000).
	MaxParams uint64
	// MaxResults is the most results of one function type.
	// Default DefaultMaxResults (1,000).
	MaxResults uint64
	// MaxTypes is the most entries in the type section.
	// Default DefaultMaxTypes (10,000).
	MaxTypes uint64
	// MaxTypeValues is the most parameters and results over all the
	// entries of the type section together. wazero's time and allocation
	// for a type grow with the square of its length, and its store keeps
	// every type it has seen for the life of the Runtime.
	// Default DefaultMaxTypeValues (50,000).
	MaxTypeValues uint64
	// MaxImports is the most imports. Default DefaultMaxImports (1,000).
	MaxImports uint64
	// MaxExports is the most exports. Default DefaultMaxExports (10,000).
	MaxExports uint64
	// MaxGlobals is the most globals, imported plus defined.
	// Default DefaultMaxGlobals (10,000).
	MaxGlobals uint64
	// MaxTables is the most tables, imported plus defined.
	// Default DefaultMaxTables (16).
	MaxTables uint64
	// MaxTableElements is the most table elements allocated at
	// instantiation: the sum of the minimum sizes of all tables.
	// Default DefaultMaxTableElements (262,144).
	MaxTableElements uint64
	// MaxMemories is the most memories, imported plus defined. More than
	// this is refused with a *FeatureError for FeatureMultiMemory.
	// Default DefaultMaxMemories (1: multi-memory is not supported).
	MaxMemories uint64
	// MaxMemoryPages is the largest minimum (initial) memory size, in 64 KiB
	// pages; the declared maximum is not limited (the runtime caps growth).
	// Default DefaultMaxMemoryPages (65,536, the most a 32-bit memory has).
	MaxMemoryPages uint64
	// MaxDataSegments is the most data segments.
	// Default DefaultMaxDataSegments (100,000).
	MaxDataSegments uint64
	// MaxDataBytes is the most bytes of all data segments together.
	// Default DefaultMaxDataBytes (16 MiB).
	MaxDataBytes uint64
	// MaxElementSegments is the most element segments.
	// Default DefaultMaxElementSegments (10,000).
	MaxElementSegments uint64
	// MaxElementItems is the most items of all element segments together
	// (active, passive and declarative): wazero keeps each in the compiled
	// module and copies each into every instance (about 40 bytes of host
	// heap an item in each).
	// Default DefaultMaxElementItems (131,072).
	MaxElementItems uint64
	// MaxCustomSections is the most custom sections.
	// Default DefaultMaxCustomSections (1,000).
	MaxCustomSections uint64
	// MaxNameBytes is the longest import, export or custom section name,
	// in bytes. Default DefaultMaxNameBytes (4,096).
	MaxNameBytes uint64
	// AllowSIMD accepts the v128 type and v128.const. By default they are
	// refused with a *FeatureError for FeatureSIMD.
	AllowSIMD bool
}

// Default limits. See the Limits fields for what each bounds and why.
const (
	// DefaultMaxModuleBytes is 32 MiB, the runtime's default too
	// (runtime.DefaultMaxModuleBytes is this constant): about 10 times a
	// typical Go hook (3.3 MB) and nearly 5 times one that links net/http
	// (6.7 MB).
	DefaultMaxModuleBytes = 32 << 20
	// DefaultMaxCodeBytes is 16 MiB: the compiler's input, bounded apart
	// from the module's size, which leaves room beside it for data and
	// custom sections; it stays in force if MaxModuleBytes is raised. Go's
	// code section is about 60% of the module, Rust's and C's more.
	DefaultMaxCodeBytes = 16 << 20
	// DefaultMaxFunctionBodyBytes is 1 MiB. The largest body in the Go
	// hooks above is under 64 KiB; the JS API allows 7,654,321 bytes.
	DefaultMaxFunctionBodyBytes = 1 << 20
	// DefaultMaxFunctions is 50,000: 12 times the 3,928 of a Go hook that
	// links net/http, and room for a 16 MiB module of small C or Rust
	// functions of 300 bytes (the JS API allows 1,000,000). It is not
	// higher because wazero's compiler pays a little for every function
	// (0.65 s of CPU for 100,000 empty ones), which the worst module the
	// other limits accept cannot afford twice within its 3 s.
	DefaultMaxFunctions = 50_000
	// DefaultMaxLocals is 50,000, the JS API and V8 limit (parameters count).
	DefaultMaxLocals = 50_000
	// DefaultMaxLocalsTotal is 1,000,000: the example Go hooks declare
	// 11,000 to 12,300 locals in all (20,400 with net/http), a Haskell
	// program 8,800, a C program of 56 functions 6,400; it is room for a
	// module of 50,000 functions of 20 locals. At the limit wazero
	// keeps about 8 MiB for the compiled module; without it, 100,000
	// functions of 50,000 locals each (a 64 KB module of them) peaked at
	// 4.8 GiB during Load.
	DefaultMaxLocalsTotal = 1_000_000
	// DefaultMaxParams is 1,000, the JS API limit.
	DefaultMaxParams = 1_000
	// DefaultMaxResults is 1,000, the JS API limit.
	DefaultMaxResults = 1_000
	// DefaultMaxTypes is 10,000. Linkers deduplicate types: Go emits 16,
	// large C++ and Rust programs hundreds (the JS API allows 1,000,000).
	DefaultMaxTypes = 10_000
	// DefaultMaxTypeValues is 50,000: Go's 15 types hold 44 to 51 values,
	// a Haskell program's 1,719 types 7,727. At the limit (25 types of
	// 1,000 parameters and 1,000 results) wazero allocates about 160 MiB
	// over 0.2 s and keeps 0.5 MiB; without it, 10,000 such types took
	// 30 s to load and wazero kept 177 MiB for the life of the Runtime.
	DefaultMaxTypeValues = 50_000
	// DefaultMaxImports is 1,000. A hook imports host_call and at most the
	// ABI's fixed WASI set (Go imports 21 entries); everything else is
	// refused by the loader anyway.
	DefaultMaxImports = 1_000
	// DefaultMaxExports is 10,000. A hook exports two or three names;
	// Rust cdylibs and AssemblyScript export every public symbol.
	DefaultMaxExports = 10_000
	// DefaultMaxGlobals is 10,000. Go defines 8 globals, C and Rust a few,
	// AssemblyScript one per mutable module-level variable. Each costs an
	// allocation at every instantiation.
	DefaultMaxGlobals = 10_000
	// DefaultMaxTables is 16. Toolchains emit at most one table.
	DefaultMaxTables = 16
	// DefaultMaxTableElements is 262,144 (2 MiB of references per instance
	// in wazero). Go's table holds 4,096 plus one entry per function, so it
	// is about 54,000 at DefaultMaxFunctions.
	DefaultMaxTableElements = 1 << 18
	// DefaultMaxMemories is 1: multi-memory is not supported.
	DefaultMaxMemories = 1
	// DefaultMaxMemoryPages is 65,536 pages (4 GiB): no limit beyond the
	// format's; the runtime applies its own memory limit.
	DefaultMaxMemoryPages = 65_536
	// DefaultMaxDataSegments is 100,000, the JS API limit, which Go's linker
	// respects by merging segments (a Go hook has tens of thousands).
	DefaultMaxDataSegments = 100_000
	// DefaultMaxDataBytes is 16 MiB, so that by default only the module
	// size binds, as for the code: the Go hooks above hold 0.9 to 1.8 MB
	// of data. Loading costs about 3 times the data's size in transient
	// heap; passive segments are not copied into instances.
	DefaultMaxDataBytes = 16 << 20
	// DefaultMaxElementSegments is 10,000. Toolchains emit one.
	DefaultMaxElementSegments = 10_000
	// DefaultMaxElementItems is 131,072. Toolchains fill their one table
	// with one active segment: a Go hook has one item per function (2,304;
	// 3,928 with net/http; about 50,000 at DefaultMaxFunctions), a
	// Haskell program 3,895. At the limit an instance costs the host about
	// 5 MiB for them, outside its MemoryPages; without it, a passive
	// segment of millions of items (a 30 MB module) cost 1.1 GiB to load
	// and 229 MiB per instance.
	DefaultMaxElementItems = 1 << 17
	// DefaultMaxCustomSections is 1,000. Toolchains emit a handful (name,
	// producers, target_features, go:buildid, a dozen .debug_* sections).
	DefaultMaxCustomSections = 1_000
	// DefaultMaxNameBytes is 4,096 bytes per name.
	DefaultMaxNameBytes = 4_096
)

// DefaultLimits returns the default limits, every field set.
func DefaultLimits() Limits { return Limits{}.withDefaults() }

func (l Limits) withDefaults() Limits {
	l.MaxModuleBytes = cmp.Or(l.MaxModuleBytes, DefaultMaxModuleBytes)
	l.MaxCodeBytes = cmp.Or(l.MaxCodeBytes, DefaultMaxCodeBytes)
	l.MaxFunctionBodyBytes = cmp.Or(l.MaxFunctionBodyBytes, DefaultMaxFunctionBodyBytes)
	l.MaxFunctions = cmp.Or(l.MaxFunctions, DefaultMaxFunctions)
	l.MaxLocals = cmp.Or(l.MaxLocals, DefaultMaxLocals)
	l.MaxLocalsTotal = cmp.Or(l.MaxLocalsTotal, DefaultMaxLocalsTotal)
	l.MaxParams = cmp.Or(l.MaxParams, DefaultMaxParams)
	l.MaxResults = cmp.Or(l.MaxResults, DefaultMaxResults)
	l.MaxTypes = cmp.Or(l.MaxTypes, DefaultMaxTypes)
	l.MaxTypeValues = cmp.Or(l.MaxTypeValues, DefaultMaxTypeValues)
	l.MaxImports = cmp.Or(l.MaxImports, DefaultMaxImports)
	l.MaxExports = cmp.Or(l.MaxExports, DefaultMaxExports)
	l.MaxGlobals = cmp.Or(l.MaxGlobals, DefaultMaxGlobals)
	l.MaxTables = cmp.Or(l.MaxTables, DefaultMaxTables)
	l.MaxTableElements = cmp.Or(l.MaxTableElements, DefaultMaxTableElements)
	l.MaxMemories = cmp.Or(l.MaxMemories, DefaultMaxMemories)
	l.MaxMemoryPages = cmp.Or(l.MaxMemoryPages, DefaultMaxMemoryPages)
	l.MaxDataSegments = cmp.Or(l.MaxDataSegments, DefaultMaxDataSegments)
	l.MaxDataBytes = cmp.Or(l.MaxDataBytes, DefaultMaxDataBytes)
	l.MaxElementSegments = cmp.Or(l.MaxElementSegments, DefaultMaxElementSegments)
	l.MaxElementItems = cmp.Or(l.MaxElementItems, DefaultMaxElementItems)
	l.MaxCustomSections = cmp.Or(l.MaxCustomSections, DefaultMaxCustomSections)
	l.MaxNameBytes = cmp.Or(l.MaxNameBytes, DefaultMaxNameBytes)
	return l
}
