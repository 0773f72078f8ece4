package wasmbin

import (
	"bytes"
	"fmt"
	"testing"
)

// item is the part of a ConstExpr that TestItemExprs compares.
type item struct {
	op    byte
	value uint64
	ref   ValueType
	raw   string // Raw, in hex
}

func (i item) String() string { return fmt.Sprintf("{%#02x %d %s %s}", i.op, i.value, i.ref, i.raw) }

func items(s *ElementSegment) []item {
	var got []item
	for e := range s.ItemExprs() {
		got = append(got, item{e.Op, e.Value, e.RefType, fmt.Sprintf("%x", e.Raw)})
	}
	return got
}

func TestItemExprs(t *testing.T) {
	// Every segment form, with two functions and an imported funcref
	// global for global.get.
	two := sec(SectionFunction, u32(2), u32(0), u32(0))
	twoBodies := sec(SectionCode, u32(2), u32(2), raw(0x00, OpEnd), u32(2), raw(0x00, OpEnd))
	globalImport := sec(SectionImport, u32(1), str("env"), str("g"), raw(byte(KindGlobal), byte(FuncRef), 0x00))
	m := mustParse(t, mod(typeVoid, globalImport, two, sec(SectionTable, u32(1), raw(byte(FuncRef), 0x00), u32(8)),
		sec(SectionElement, u32(5),
			raw(0x00), I32Const(0), raw(OpEnd), u32(2), u32(1), u32(0), // indices
			raw(0x01, 0x00), u32(0), // no items
			raw(0x04), I32Const(2), raw(OpEnd), u32(3), raw(0xD2, 0x01, OpEnd, 0xD0, byte(FuncRef), OpEnd, OpGlobalGet, 0x00, OpEnd),
			raw(0x07, byte(FuncRef)), u32(1), raw(0xD2, 0x80, 0x00, OpEnd), // a padded index
			raw(0x03, 0x00), u32(1), raw(0x81, 0x00)), // a padded index
		twoBodies), Limits{})

	tests := []struct {
		name string
		seg  *ElementSegment
		want []item
	}{
		{"indices", &m.Elements[0], []item{{op: OpRefFunc, value: 1}, {op: OpRefFunc, value: 0}}},
		{"empty", &m.Elements[1], nil},
		{"expressions", &m.Elements[2], []item{
			{OpRefFunc, 1, 0, "d2010b"}, {OpRefNull, 0, FuncRef, "d0700b"}, {OpGlobalGet, 0, 0, "23000b"}}},
		{"padded expression", &m.Elements[3], []item{{OpRefFunc, 0, 0, "d280000b"}}},
		{"padded index", &m.Elements[4], []item{{op: OpRefFunc, value: 1}}},
		// Bytes Parse did not check: the iteration stops before the
		// first malformed item.
		{"truncated indices", &ElementSegment{Count: 3, Items: []byte{0x01, 0x02}}, []item{{op: OpRefFunc, value: 1}, {op: OpRefFunc, value: 2}}},
		{"overlong index", &ElementSegment{Count: 2, Items: []byte{0x05, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}}, []item{{op: OpRefFunc, value: 5}}},
		{"count below the items", &ElementSegment{Count: 1, Items: []byte{0x01, 0x02}}, []item{{op: OpRefFunc, value: 1}}},
		{"expression without end", &ElementSegment{Count: 2, Exprs: true, Items: []byte{0xD2, 0x00, OpEnd, 0xD2, 0x00}}, []item{{OpRefFunc, 0, 0, "d2000b"}}},
		{"non-constant expression", &ElementSegment{Count: 1, Exprs: true, Items: []byte{OpI32Const, 0x00, OpEnd}}, nil},
		{"ref.null of a number type", &ElementSegment{Count: 1, Exprs: true, Items: []byte{OpRefNull, byte(I32), OpEnd}}, nil},
		{"two instructions", &ElementSegment{Count: 1, Exprs: true, Items: []byte{0xD2, 0x00, 0xD2, 0x00, OpEnd}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := items(tt.seg); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("items = %v, want %v", got, tt.want)
			}
		})
	}

	// Raw aliases the segment's bytes; breaking out of the loop stops the
	// iteration.
	for e := range m.Elements[2].ItemExprs() {
		if !bytes.Equal(e.Raw, m.Elements[2].Items[:3]) || &e.Raw[0] != &m.Elements[2].Items[0] {
			t.Errorf("Raw = %x, want an alias of the first item", e.Raw)
		}
		break
	}
}
