package wasmbin

import (
	"bytes"
	"fmt"
	"strings"
)

// Magic is the four-byte preamble of every WebAssembly binary.
const Magic = "\x00asm"

// Version is the only binary format version accepted (1, little-endian).
const Version = "\x01\x00\x00\x00"

// HeaderSize is the size of the preamble: magic and version.
const HeaderSize = 8

// order ranks the non-custom sections in the order the binary format
// requires (the tag section of exception handling sits between memory and
// global; datacount between element and code).
var order = [...]int{
	SectionType:      1,
	SectionImport:    2,
	SectionFunction:  3,
	SectionTable:     4,
	SectionMemory:    5,
	SectionTag:       6,
	SectionGlobal:    7,
	SectionExport:    8,
	SectionStart:     9,
	SectionElement:   10,
	SectionDataCount: 11,
	SectionCode:      12,
	SectionData:      13,
}

// Parse reads and checks the binary module b against lim (zero fields take
// their defaults) and returns its description.
//
// The error is a *FormatError, *LimitError or *FeatureError. Parse never
// panics, whatever the input. Its time is linear in len(b) (about 2.5 ms for
// 4 MB). It allocates nothing for a count before checking that the bytes
// left can hold that many entries, so its memory follows what the module
// really contains, capped by the Limits: typically 1.5 times the module
// size, and under 32 MiB for any input with the default limits. The
// returned Module aliases b.
func Parse(b []byte, lim Limits) (m *Module, err error) {
	defer func() {
		if p := recover(); p != nil {
			// Defence in depth: the fuzz tests call parse directly and
			// would see the panic; a caller never does.
			m, err = nil, &FormatError{Section: "module", Reason: fmt.Sprintf("internal error: %v", p)}
		}
	}()
	return parse(b, lim)
}

// parser holds the state of one Parse call.
type parser struct {
	b   []byte
	lim Limits
	m   *Module

	// index-space sizes, imports included
	numFuncs    uint64
	numTables   uint64
	numMemories uint64
	numGlobals  uint64
	tableElems  uint64

	// totals over the module, for the Max*Total-style limits
	localsTotal uint64
	typeValues  uint64
	elemItems   uint64
	dataBytes   uint64

	importedFuncs uint64
	globalTypes   []GlobalType // imported then defined, for const expr checks

	haveCodeSection bool
	haveDataSection bool
	haveManifest    bool
}

func parse(b []byte, lim Limits) (*Module, error) {
	lim = lim.withDefaults()
	if uint64(len(b)) > lim.MaxModuleBytes {
		return nil, &LimitError{Limit: "MaxModuleBytes", Max: lim.MaxModuleBytes, Got: uint64(len(b))}
	}
	if err := checkHeader(b); err != nil {
		return nil, err
	}
	p := &parser{b: b, lim: lim, m: &Module{}}
	if err := p.sections(); err != nil {
		return nil, err
	}
	return p.m, nil
}

func checkHeader(b []byte) error {
	hdr := func(off int, format string, args ...any) error {
		return &FormatError{Offset: off, Section: "header", Reason: fmt.Sprintf(format, args...)}
	}
	if len(b) < len(Magic) || string(b[:len(Magic)]) != Magic {
		trimmed := bytes.TrimLeft(b, " \t\r\n")
		if bytes.HasPrefix(trimmed, []byte("(module")) || bytes.HasPrefix(trimmed, []byte(";;")) {
			return hdr(0, "not a WebAssembly binary: this looks like the text format (.wat); compile it with wat2wasm")
		}
		if len(b) < len(Magic) && strings.HasPrefix(Magic, string(b)) {
			return hdr(0, "truncated: %d bytes, the magic number alone is 4", len(b))
		}
		return hdr(0, "not a WebAssembly binary: bad magic number % x (want 00 61 73 6d)", b[:min(len(b), 4)])
	}
	if len(b) < HeaderSize {
		return hdr(len(Magic), "truncated: %d bytes, the header is %d", len(b), HeaderSize)
	}
	v := b[4:8]
	if string(v) == Version {
		return nil
	}
	if v[2] == 0x01 && v[3] == 0x00 {
		// Component model binaries use layer 1 (bytes 6-7 = 01 00).
		return &FeatureError{Feature: FeatureComponentModel, Reason: "the binary is a component (layer 1), not a core module; only core modules are supported"}
	}
	return hdr(4, "unsupported binary version % x (want 01 00 00 00)", v)
}

// within adds the item an error was found in ("data segment 3") to the
// reason of a *FormatError or *FeatureError, or to the Where of a
// *LimitError. Formatting happens only on error, keeping the hot loops free
// of allocations.
func within(err error, format string, args ...any) error {
	switch e := err.(type) {
	case *FormatError:
		e.Reason = fmt.Sprintf(format, args...) + ": " + e.Reason
	case *FeatureError:
		e.Reason = fmt.Sprintf(format, args...) + ": " + e.Reason
	case *LimitError:
		if e.Where == "" {
			e.Where = fmt.Sprintf(format, args...)
		} else {
			e.Where = fmt.Sprintf(format, args...) + " " + e.Where
		}
	}
	return err
}

func (p *parser) sections() error {
	b := p.b
	pos := HeaderSize
	lastRank := 0
	var seen [SectionTag + 1]bool
	for pos < len(b) {
		start := pos
		id := SectionID(b[pos])
		pos++
		if id > SectionTag {
			return &FormatError{Offset: start, Section: id.String(), Reason: fmt.Sprintf("unknown section id %d", byte(id))}
		}
		hr := reader{b: b, pos: pos, end: len(b), section: id.String()}
		size, err := hr.u32("section size")
		if err != nil {
			return err
		}
		pos = hr.pos
		if uint64(size) > uint64(len(b)-pos) {
			return &FormatError{Offset: start, Section: id.String(),
				Reason: fmt.Sprintf("section size %d exceeds the %d bytes left in the module", size, len(b)-pos)}
		}
		end := pos + int(size)
		if id != SectionCustom {
			if id == SectionTag {
				return &FeatureError{Feature: FeatureExceptionHandling,
					Reason: fmt.Sprintf("tag section (id 13) at offset %d", start)}
			}
			if seen[id] {
				return &FormatError{Offset: start, Section: id.String(), Reason: "duplicate section"}
			}
			rank := order[id]
			if rank < lastRank {
				return &FormatError{Offset: start, Section: id.String(),
					Reason: "section out of order (the order is type, import, function, table, memory, global, export, start, element, datacount, code, data)"}
			}
			seen[id] = true
			lastRank = rank
		}

		sec := Section{ID: id, Offset: start, ContentOffset: pos, Size: int(size), Content: b[pos:end:end]}
		r := &reader{b: b, pos: pos, end: end, section: id.String()}
		switch id {
		case SectionCustom:
			err = p.customSection(r, &sec)
		case SectionType:
			err = p.typeSection(r)
		case SectionImport:
			err = p.importSection(r)
		case SectionFunction:
			err = p.functionSection(r)
		case SectionTable:
			err = p.tableSection(r)
		case SectionMemory:
			err = p.memorySection(r)
		case SectionGlobal:
			err = p.globalSection(r)
		case SectionExport:
			err = p.exportSection(r)
		case SectionStart:
			err = p.startSection(r)
		case SectionElement:
			err = p.elementSection(r)
		case SectionDataCount:
			err = p.dataCountSection(r)
		case SectionCode:
			err = p.codeSection(r)
		case SectionData:
			err = p.dataSection(r)
		}
		if err != nil {
			return err
		}
		if !r.eof() {
			return r.errorf(r.pos, "%d bytes left over at the end of the section (declared size %d)", r.remaining(), size)
		}
		p.m.Sections = append(p.m.Sections, sec)
		pos = end
	}
	return p.finish()
}

// finish checks the constraints that span sections.
func (p *parser) finish() error {
	end := len(p.b)
	if len(p.m.Functions) > 0 && !p.haveCodeSection {
		return &FormatError{Offset: end, Section: "code",
			Reason: fmt.Sprintf("the function section declares %d functions but there is no code section", len(p.m.Functions))}
	}
	if p.m.DataCount != nil && *p.m.DataCount != 0 && !p.haveDataSection {
		return &FormatError{Offset: end, Section: "data",
			Reason: fmt.Sprintf("the datacount section declares %d segments but there is no data section", *p.m.DataCount)}
	}
	return nil
}
