package wasmbin

import "fmt"

// FormatError reports bytes that are not a well-formed module.
type FormatError struct {
	Offset  int    // byte offset in the module where the problem was found
	Section string // "header", a section name ("type", "code", "custom", ...; see SectionID.String) or "module"
	Reason  string // what is wrong
}

// Error returns a message naming the section and the offset.
func (e *FormatError) Error() string {
	where := e.Section
	if where != "header" && where != "module" {
		where += " section"
	}
	return fmt.Sprintf("wasm: malformed module: %s at offset %d (0x%x): %s", where, e.Offset, e.Offset, e.Reason)
}

// LimitError reports a module that exceeds one of the Limits.
type LimitError struct {
	Limit string // the Limits field name, e.g. "MaxFunctions"
	Max   uint64 // the limit in force
	Got   uint64 // the module's value (or the first value found over the limit)
	Where string // the item over the limit, e.g. "function 12", or empty for the module
}

// Error returns a message naming the limit, the limit's value and the module's.
func (e *LimitError) Error() string {
	if e.Where != "" {
		return fmt.Sprintf("wasm: module exceeds limit %s in %s: %d > %d", e.Limit, e.Where, e.Got, e.Max)
	}
	return fmt.Sprintf("wasm: module exceeds limit %s: %d > %d", e.Limit, e.Got, e.Max)
}

// Names of the features a FeatureError can report.
const (
	FeatureThreads           = "threads"            // shared memory (limits flag 0x02), shared tables
	FeatureMemory64          = "memory64"           // 64-bit memories and tables (limits flag 0x04)
	FeatureMultiMemory       = "multi-memory"       // more than Limits.MaxMemories memories
	FeatureSIMD              = "simd"               // the v128 type or v128.const
	FeatureExceptionHandling = "exception-handling" // tag section, tag imports/exports, exnref
	FeatureGC                = "gc"                 // GC / typed function reference types
	FeatureExtendedConst     = "extended-const"     // constant expressions of several instructions
	FeatureCustomPageSizes   = "custom-page-sizes"  // limits flag 0x08
	FeatureComponentModel    = "component-model"    // a component, not a core module
)

// FeatureError reports a module that uses a WebAssembly feature the runtime
// does not support. The module may be valid WebAssembly.
type FeatureError struct {
	Feature string // one of the Feature* constants
	Reason  string // where it was found
}

// Error returns a message naming the feature.
func (e *FeatureError) Error() string {
	return fmt.Sprintf("wasm: unsupported feature %s: %s", e.Feature, e.Reason)
}
