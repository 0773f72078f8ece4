package abi

import (
	"errors"
	"fmt"
	"strings"
)

// A minimal reader of WebAssembly binaries, enough for the tests to check
// what a real module imports and exports: the type, import, function and
// export sections, and the names of custom sections.

type wasmImport struct {
	module, name string
	kind         byte   // 0 func, 1 table, 2 memory, 3 global
	sig          string // for functions, as in WASIFunctions
}

type wasmExport struct {
	name string
	kind byte
	sig  string // for functions
}

type wasmModule struct {
	imports []wasmImport
	exports []wasmExport
	customs []string
}

type wasmReader struct {
	b   []byte
	pos int
	err error
}

func (r *wasmReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("wasm: at byte %d: %s", r.pos, fmt.Sprintf(format, args...))
	}
}

func (r *wasmReader) byte() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *wasmReader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail("LEB128 too long")
	return 0
}

func (r *wasmReader) bytes(n uint32) []byte {
	if r.err != nil || uint64(r.pos)+uint64(n) > uint64(len(r.b)) {
		r.fail("unexpected end")
		return nil
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s
}

func (r *wasmReader) name() string { return string(r.bytes(r.u32())) }

func (r *wasmReader) limits() {
	if flags := r.byte(); flags&1 != 0 {
		r.u32()
		r.u32()
	} else {
		r.u32()
	}
}

var wasmValTypes = map[byte]string{0x7f: "i32", 0x7e: "i64", 0x7d: "f32", 0x7c: "f64", 0x7b: "v128", 0x70: "funcref", 0x6f: "externref"}

func (r *wasmReader) valTypes() []string {
	n := r.u32()
	var out []string
	for i := uint32(0); i < n && r.err == nil; i++ {
		c := r.byte()
		t, ok := wasmValTypes[c]
		if !ok {
			r.fail("unknown value type %#x", c)
		}
		out = append(out, t)
	}
	return out
}

// parseWasm reads the parts of a module the tests look at.
func parseWasm(b []byte) (*wasmModule, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" || string(b[4:8]) != "\x01\x00\x00\x00" {
		return nil, errors.New("wasm: not a version 1 binary module")
	}
	r := &wasmReader{b: b, pos: 8}
	m := &wasmModule{}
	var types []string
	var funcTypes []uint32 // type index of every function, imports first
	type export struct {
		name  string
		kind  byte
		index uint32
	}
	var exports []export
	for r.pos < len(b) && r.err == nil {
		id := r.byte()
		sec := &wasmReader{b: r.bytes(r.u32())}
		switch id {
		case 0:
			m.customs = append(m.customs, sec.name())
		case 1:
			for n, i := sec.u32(), uint32(0); i < n && sec.err == nil; i++ {
				if form := sec.byte(); form != 0x60 {
					sec.fail("type form %#x", form)
				}
				params, results := sec.valTypes(), sec.valTypes()
				res := "()"
				switch len(results) {
				case 0:
				case 1:
					res = results[0]
				default:
					res = "(" + strings.Join(results, ", ") + ")"
				}
				types = append(types, "("+strings.Join(params, ", ")+") -> "+res)
			}
		case 2:
			for n, i := sec.u32(), uint32(0); i < n && sec.err == nil; i++ {
				imp := wasmImport{module: sec.name(), name: sec.name(), kind: sec.byte()}
				switch imp.kind {
				case 0:
					ti := sec.u32()
					if int(ti) >= len(types) {
						sec.fail("type index %d", ti)
						break
					}
					imp.sig = types[ti]
					funcTypes = append(funcTypes, ti)
				case 1:
					sec.byte()
					sec.limits()
				case 2:
					sec.limits()
				case 3:
					sec.byte()
					sec.byte()
				default:
					sec.fail("import kind %d", imp.kind)
				}
				m.imports = append(m.imports, imp)
			}
		case 3:
			for n, i := sec.u32(), uint32(0); i < n && sec.err == nil; i++ {
				funcTypes = append(funcTypes, sec.u32())
			}
		case 7:
			for n, i := sec.u32(), uint32(0); i < n && sec.err == nil; i++ {
				exports = append(exports, export{sec.name(), sec.byte(), sec.u32()})
			}
		}
		if sec.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, sec.err)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	for _, e := range exports {
		ex := wasmExport{name: e.name, kind: e.kind}
		if e.kind == 0 {
			if int(e.index) >= len(funcTypes) || int(funcTypes[e.index]) >= len(types) {
				return nil, fmt.Errorf("wasm: export %q: bad function index %d", e.name, e.index)
			}
			ex.sig = types[funcTypes[e.index]]
		}
		m.exports = append(m.exports, ex)
	}
	return m, nil
}
