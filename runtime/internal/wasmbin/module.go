package wasmbin

// ManifestSection is the name of the custom section that holds a hook's
// manifest (abi.ManifestSection). Parse refuses a module that has two.
const ManifestSection = "hook_v1.manifest"

// Module is a parsed module. Index spaces follow the WebAssembly rules:
// imported functions, tables, memories and globals come first, in import
// order, then those the module defines.
//
// A Module is read-only once Parse returns it and safe for concurrent reads.
// Its byte slices (Section.Content, Code.Body, CustomSection.Data, ...) alias
// the input of Parse, which must not be modified while the Module is used.
type Module struct {
	Types     []FuncType       // the type section
	Imports   []Import         // the import section
	Functions []uint32         // type index of each defined function
	Tables    []TableType      // defined tables
	Memories  []MemoryType     // defined memories (see NumMemories for imports too)
	Globals   []Global         // defined globals
	Exports   []Export         // the export section
	Start     *uint32          // the start function's index, if any
	Elements  []ElementSegment // the element section
	DataCount *uint32          // the datacount section's value, if present
	Data      []DataSegment    // the data section
	Code      []Code           // one body per defined function, in order
	Customs   []CustomSection  // every custom section, in order
	Sections  []Section        // every section, in order
}

func (m *Module) countImports(k ExternKind) int {
	n := 0
	for i := range m.Imports {
		if m.Imports[i].Kind == k {
			n++
		}
	}
	return n
}

// NumImportedFuncs returns the number of imported functions, which is also
// the index of the first defined function.
func (m *Module) NumImportedFuncs() int { return m.countImports(KindFunc) }

// NumImportedMemories returns the number of imported memories.
func (m *Module) NumImportedMemories() int { return m.countImports(KindMemory) }

// NumImportedTables returns the number of imported tables.
func (m *Module) NumImportedTables() int { return m.countImports(KindTable) }

// NumImportedGlobals returns the number of imported globals.
func (m *Module) NumImportedGlobals() int { return m.countImports(KindGlobal) }

// NumFuncs returns the size of the function index space (imported + defined).
func (m *Module) NumFuncs() int { return m.NumImportedFuncs() + len(m.Functions) }

// NumMemories returns the number of memories, imported and defined.
func (m *Module) NumMemories() int { return m.NumImportedMemories() + len(m.Memories) }

// NumTables returns the number of tables, imported and defined.
func (m *Module) NumTables() int { return m.NumImportedTables() + len(m.Tables) }

// NumGlobals returns the number of globals, imported and defined.
func (m *Module) NumGlobals() int { return m.NumImportedGlobals() + len(m.Globals) }

// FuncType returns the signature of the function at funcIndex in the
// function index space (imports first). ok is false if the index is out of
// range.
func (m *Module) FuncType(funcIndex uint32) (ft FuncType, ok bool) {
	imp, d := m.locate(KindFunc, funcIndex)
	if imp != nil {
		return imp.Func, true
	}
	if d < uint64(len(m.Functions)) && uint64(m.Functions[d]) < uint64(len(m.Types)) {
		return m.Types[m.Functions[d]], true
	}
	return FuncType{}, false
}

// locate finds index idx of kind's index space (imports first): the import
// it names, or else (nil and) its position among the defined ones.
func (m *Module) locate(kind ExternKind, idx uint32) (imp *Import, defined uint64) {
	var n uint64
	for i := range m.Imports {
		if m.Imports[i].Kind != kind {
			continue
		}
		if n == uint64(idx) {
			return &m.Imports[i], 0
		}
		n++
	}
	return nil, uint64(idx) - n
}

// IsImportedFunc reports whether funcIndex refers to an imported function.
func (m *Module) IsImportedFunc(funcIndex uint32) bool {
	return uint64(funcIndex) < uint64(m.NumImportedFuncs())
}

// GlobalType returns the type of the global at globalIndex in the global
// index space (imports first).
func (m *Module) GlobalType(globalIndex uint32) (gt GlobalType, ok bool) {
	imp, d := m.locate(KindGlobal, globalIndex)
	if imp != nil {
		return imp.Global, true
	}
	if d < uint64(len(m.Globals)) {
		return m.Globals[d].Type, true
	}
	return GlobalType{}, false
}

// Export returns the export with the given name.
func (m *Module) Export(name string) (Export, bool) {
	for _, e := range m.Exports {
		if e.Name == name {
			return e, true
		}
	}
	return Export{}, false
}

// ExportedFunc returns the signature of the function exported under name. ok
// is false if there is no such export or it is not a function.
func (m *Module) ExportedFunc(name string) (FuncType, bool) {
	e, ok := m.Export(name)
	if !ok || e.Kind != KindFunc {
		return FuncType{}, false
	}
	return m.FuncType(e.Index)
}

// ExportedMemory reports whether a memory is exported under name.
func (m *Module) ExportedMemory(name string) bool {
	e, ok := m.Export(name)
	return ok && e.Kind == KindMemory
}

// CustomSection returns the payload of the first custom section with the
// given name.
func (m *Module) CustomSection(name string) ([]byte, bool) {
	for _, c := range m.Customs {
		if c.Name == name {
			return c.Data, true
		}
	}
	return nil, false
}

// StartIsImport reports whether the module has a start function and it is an
// imported function. Such a module is well-formed WebAssembly, but running an
// imported host function during instantiation has crashed engines (wazero
// #2474); the caller decides whether to refuse it.
func (m *Module) StartIsImport() bool {
	return m.Start != nil && m.IsImportedFunc(*m.Start)
}

// Memory returns the type of the module's first memory (imported or
// defined), if it has one.
func (m *Module) Memory() (MemoryType, bool) {
	for i := range m.Imports {
		if m.Imports[i].Kind == KindMemory {
			return m.Imports[i].Memory, true
		}
	}
	if len(m.Memories) > 0 {
		return m.Memories[0], true
	}
	return MemoryType{}, false
}
