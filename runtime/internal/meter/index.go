package meter

import (
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/runtime/internal/wasmbin"
)

// This file rewrites what names a function outside the code section. The
// yield import is appended after the module's imported functions, so every
// defined function moves up one index: the exports, the start function,
// the global initialisers, the element segments and the name section are
// rewritten (the bodies' call and ref.func are, by the walker). The
// analysis keeps the original indices; only what is written is shifted.

// funcIndex maps a function index of the original module to the
// instrumented module's. The map is increasing and never gives mc.yield,
// so an index out of range stays out of range and the guest cannot name
// the yield import.
func (mc *modCtx) funcIndex(f uint32) uint32 {
	if f < mc.yield {
		return f
	}
	return f + 1
}

// appendConstExpr appends e (end included) with its function index
// shifted.
func (mc *modCtx) appendConstExpr(b []byte, e wasmbin.ConstExpr) []byte {
	if e.Op != wasmbin.OpRefFunc {
		return append(b, e.Raw...)
	}
	b = append(b, wasmbin.OpRefFunc)
	b = wasmbin.AppendULEB128(b, uint64(mc.funcIndex(uint32(e.Value))))
	return append(b, wasmbin.OpEnd)
}

// typeSection returns the type section with mc.extraTypes appended.
func (mc *modCtx) typeSection() ([]byte, error) {
	n, rest, err := splitCount(sectionContent(mc.m, wasmbin.SectionType))
	if err != nil {
		return nil, err
	}
	b := wasmbin.AppendULEB128(nil, n+uint64(len(mc.extraTypes)))
	b = append(b, rest...)
	for _, t := range mc.extraTypes {
		b = append(b, 0x60)
		b = appendTypes(b, t.Params)
		b = appendTypes(b, t.Results)
	}
	return b, nil
}

// importSection returns the import section with the yield import
// appended.
func (mc *modCtx) importSection() ([]byte, error) {
	n, rest, err := splitCount(sectionContent(mc.m, wasmbin.SectionImport))
	if err != nil {
		return nil, err
	}
	b := wasmbin.AppendULEB128(nil, n+1)
	b = append(b, rest...)
	b = appendName(b, YieldModule)
	b = appendName(b, YieldImport)
	b = append(b, byte(wasmbin.KindFunc))
	return wasmbin.AppendULEB128(b, uint64(mc.yieldType)), nil
}

// globalSection returns the global section: the module's globals, their
// initialisers shifted, then the fuel and the stack budget.
func (mc *modCtx) globalSection() []byte {
	b := wasmbin.AppendULEB128(nil, uint64(len(mc.m.Globals)+2))
	for _, g := range mc.m.Globals {
		b = appendGlobalType(b, g.Type)
		b = mc.appendConstExpr(b, g.Init)
	}
	b = append(b, byte(wasmbin.I64), 0x01)
	b = append(b, wasmbin.I64Const(0)...)
	b = append(b, wasmbin.OpEnd)
	b = append(b, byte(wasmbin.I32), 0x01)
	b = append(b, wasmbin.I32Const(0)...)
	return append(b, wasmbin.OpEnd)
}

// exportSection returns the export section: the module's exports,
// functions shifted, then the globals and the start function.
func (mc *modCtx) exportSection() []byte {
	m := mc.m
	n := len(m.Exports) + 2
	if m.Start != nil {
		n++
	}
	b := wasmbin.AppendULEB128(nil, uint64(n))
	export := func(name string, kind wasmbin.ExternKind, idx uint32) {
		b = appendName(b, name)
		b = append(b, byte(kind))
		b = wasmbin.AppendULEB128(b, uint64(idx))
	}
	for _, e := range m.Exports {
		idx := e.Index
		if e.Kind == wasmbin.KindFunc {
			idx = mc.funcIndex(idx)
		}
		export(e.Name, e.Kind, idx)
	}
	export(FuelExport, wasmbin.KindGlobal, mc.fuel)
	export(StackExport, wasmbin.KindGlobal, mc.stack)
	if m.Start != nil {
		export(StartExport, wasmbin.KindFunc, mc.funcIndex(*m.Start))
	}
	return b
}

// elementSection returns the element section with every function index
// shifted, in both forms of items. Each segment keeps its form (flags).
func (mc *modCtx) elementSection() ([]byte, error) {
	b := wasmbin.AppendULEB128(nil, uint64(len(mc.m.Elements)))
	for i := range mc.m.Elements {
		s := &mc.m.Elements[i]
		b = wasmbin.AppendULEB128(b, uint64(s.Flags))
		if s.Mode == wasmbin.SegmentActive {
			if s.Flags&0x02 != 0 {
				b = wasmbin.AppendULEB128(b, uint64(s.Table))
			}
			b = append(b, s.Offset.Raw...)
		}
		if s.Flags&0x03 != 0 {
			if s.Exprs {
				b = append(b, byte(s.Type))
			} else {
				b = append(b, 0x00) // elemkind funcref
			}
		}
		b = wasmbin.AppendULEB128(b, uint64(s.Count))
		n := uint32(0)
		for e := range s.ItemExprs() {
			if s.Exprs {
				b = mc.appendConstExpr(b, e)
			} else {
				b = wasmbin.AppendULEB128(b, uint64(mc.funcIndex(uint32(e.Value))))
			}
			n++
		}
		if n != s.Count {
			return nil, &Error{Reason: "malformed element segment"}
		}
	}
	return b, nil
}

// The subsections of the name section (the extended name section
// proposal adds 3 and up).
const (
	namesModule    = 0
	namesFunctions = 1
	namesLocals    = 2
	namesLabels    = 3
	namesLast      = 11 // tags
)

// names rewrites the payload of a "name" custom section: the function
// names (subsection 1) and the local names (2) are keyed by function
// index, and shifted; the label names (3) number the labels of each body,
// which the rewrite changes, and are dropped, as is any subsection of an
// unknown id. The others (the module name, and the names of types, tables,
// memories, globals, element and data segments, fields and tags) do not
// name a function and are kept. ok is false for a malformed payload (a
// truncated or overlong subsection, names that are not UTF-8, subsections
// out of order), which the caller drops: it is debug information, and
// wazero refuses to compile a module whose name section it cannot decode.
func (mc *modCtx) names(data []byte) (out []byte, ok bool) {
	r := nameReader{b: data}
	out = make([]byte, 0, len(data)+16) // a hint: a shifted index may take a byte more
	last := -1
	for !r.eof() {
		id, ok1 := r.byte()
		size, ok2 := r.u32()
		sub, ok3 := r.bytes(size)
		if !ok1 || !ok2 || !ok3 || int(id) <= last {
			return nil, false
		}
		last = int(id)
		content := sub
		switch {
		case id == namesModule:
			sr := nameReader{b: sub}
			if !sr.name() || !sr.eof() {
				return nil, false
			}
		case id == namesFunctions:
			if content, ok = mc.funcNames(sub); !ok {
				return nil, false
			}
		case id == namesLocals:
			if content, ok = mc.localNames(sub); !ok {
				return nil, false
			}
		case id == namesLabels || id > namesLast:
			continue
		}
		out = append(out, id)
		out = wasmbin.AppendULEB128(out, uint64(len(content)))
		out = append(out, content...)
	}
	return out, true
}

// funcNames rewrites the function names subsection: a name map (a vector
// of index and name) keyed by function index.
func (mc *modCtx) funcNames(sub []byte) ([]byte, bool) {
	return mc.funcKeyed(sub, (*nameReader).name)
}

// localNames rewrites the local names subsection: a vector of function
// index and name map of its locals. The locals keep their indices (the
// rewrite appends its own after them).
func (mc *modCtx) localNames(sub []byte) ([]byte, bool) {
	return mc.funcKeyed(sub, func(r *nameReader) bool {
		// One function's map: read it up to its end, without requiring
		// that it ends r.
		m, ok := r.u32()
		if !ok {
			return false
		}
		for range m {
			if _, ok := r.u32(); !ok || !r.name() {
				return false
			}
		}
		return true
	})
}

// funcKeyed rewrites a vector of entries keyed by function index: each
// index mapped to the function's new index, the rest of each entry, which
// skip reads past, copied as it is.
func (mc *modCtx) funcKeyed(sub []byte, skip func(r *nameReader) bool) ([]byte, bool) {
	r := nameReader{b: sub}
	n, ok := r.u32()
	if !ok {
		return nil, false
	}
	b := wasmbin.AppendULEB128(make([]byte, 0, len(sub)+16), uint64(n))
	for range n {
		f, ok := r.u32()
		if !ok {
			return nil, false
		}
		b = wasmbin.AppendULEB128(b, uint64(mc.funcIndex(f)))
		start := r.pos
		if !skip(&r) {
			return nil, false
		}
		b = append(b, r.b[start:r.pos]...)
	}
	return b, r.eof()
}

// nameReader decodes the name section. Every method reports false instead
// of reading past the end.
type nameReader struct {
	b   []byte
	pos int
}

func (r *nameReader) eof() bool { return r.pos >= len(r.b) }

func (r *nameReader) byte() (byte, bool) {
	if r.eof() {
		return 0, false
	}
	r.pos++
	return r.b[r.pos-1], true
}

// u32 reads an unsigned LEB128 of at most 5 bytes whose value fits in 32
// bits.
func (r *nameReader) u32() (uint32, bool) {
	var v uint32
	for i := 0; i < 5; i++ {
		c, ok := r.byte()
		if !ok || (i == 4 && c > 0x0F) {
			return 0, false
		}
		v |= uint32(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			return v, true
		}
	}
	return 0, false // unreachable: the fifth byte is at most 0x0F
}

func (r *nameReader) bytes(n uint32) ([]byte, bool) {
	if uint64(n) > uint64(len(r.b)-r.pos) {
		return nil, false
	}
	r.pos += int(n)
	return r.b[r.pos-int(n) : r.pos], true
}

// name reads a name: its length, then that many bytes of UTF-8.
func (r *nameReader) name() bool {
	n, ok := r.u32()
	if !ok {
		return false
	}
	s, ok := r.bytes(n)
	return ok && utf8.Valid(s)
}

func sectionContent(m *wasmbin.Module, id wasmbin.SectionID) []byte {
	for _, s := range m.Sections {
		if s.ID == id {
			return s.Content
		}
	}
	return []byte{0} // an empty vector
}

func appendGlobalType(b []byte, gt wasmbin.GlobalType) []byte {
	mut := byte(0)
	if gt.Mutable {
		mut = 1
	}
	return append(b, byte(gt.Type), mut)
}
