package wasmbin

import (
	"bytes"
	"errors"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// tightLimits are small enough for fuzzed inputs to reach every limit.
var tightLimits = Limits{
	MaxModuleBytes: 300, MaxCodeBytes: 64, MaxFunctionBodyBytes: 16, MaxFunctions: 4, MaxLocals: 8,
	MaxParams: 3, MaxResults: 2, MaxTypes: 3, MaxImports: 2, MaxExports: 2, MaxGlobals: 2, MaxTables: 1,
	MaxTableElements: 8, MaxMemories: 1, MaxMemoryPages: 2, MaxDataSegments: 2, MaxElementSegments: 1,
	MaxCustomSections: 2, MaxNameBytes: 16,
	MaxLocalsTotal: 12, MaxTypeValues: 8, MaxElementItems: 6, MaxDataBytes: 32,
}

// fuzzSeeds are valid modules of various shapes.
func fuzzSeeds(tb testing.TB) [][]byte {
	simd := mod(sec(SectionType, u32(1), functype([]ValueType{V128}, nil)))
	return [][]byte{
		hookModule(),
		readFixture(tb),
		mod(),
		voidModule,
		mod(custom("a", []byte{1}), typeVoid, oneFunc, oneTable, oneMemory, sec(SectionStart, u32(0)), oneBody),
		mod(oneMemory, sec(SectionDataCount, u32(1)), sec(SectionData, u32(1), raw(0x01, 0x02, 'h', 'i'))),
		simd,
	}
}

// checkParseResult checks the contract of parse on any input: a module that
// satisfies the invariants, or one of the three error types and no module.
func checkParseResult(t *testing.T, data []byte, m *Module, err error) {
	t.Helper()
	if err != nil {
		var fe *FormatError
		var le *LimitError
		var xe *FeatureError
		if !errors.As(err, &fe) && !errors.As(err, &le) && !errors.As(err, &xe) {
			t.Fatalf("untyped error %T: %v", err, err)
		}
		if m != nil {
			t.Fatal("module returned with an error")
		}
		if fe != nil && (fe.Offset < 0 || fe.Offset > len(data)) {
			t.Fatalf("error offset %d outside the %d-byte input: %v", fe.Offset, len(data), err)
		}
		return
	}
	checkInvariants(t, data, m)
}

// FuzzParse feeds arbitrary bytes to the parser (without the recover in
// Parse, so a panic fails) under the default and under tight limits.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x01\xff\xff\xff\xff\x0f"))
	f.Add([]byte("(module)"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parse(data, Limits{})
		checkParseResult(t, data, m, err)
		m, err = parse(data, tightLimits)
		checkParseResult(t, data, m, err)
		// Only the framing matters to RemoveCustomSections: it must agree
		// with Parse on every module Parse accepts.
		if err == nil {
			if _, rerr := RemoveCustomSections(data, "x"); rerr != nil {
				t.Fatalf("Parse accepted what RemoveCustomSections refused: %v", rerr)
			}
		} else if out, rerr := RemoveCustomSections(data, "x"); rerr != nil {
			checkParseResult(t, data, nil, rerr)
		} else if len(out) > len(data) {
			t.Fatal("RemoveCustomSections grew the module")
		}
	})
}

// mutate applies edit operations to a copy of base. Each operation is four
// bytes: kind, position (16 bits, modulo the length) and a value.
func mutate(base, ops []byte) []byte {
	return testutil.Mutate(base, ops, testutil.FlipBits, testutil.SetByte, testutil.InsertByte, testutil.DeleteByte,
		testutil.Truncate, testutil.DuplicateRun, testutil.LyingLEB)
}

// FuzzParseMutated mutates valid modules. Whatever the mutation, parse does
// not panic; when the result parses, appending a custom section keeps it
// valid and keeps every section where it was, removing the section again
// gives back the same bytes, and setting a manifest works.
func FuzzParseMutated(f *testing.F) {
	testutil.FuzzMutants(f, fuzzSeeds(f), [][]byte{
		{},
		{0, 10, 0, 0xFF},
		{6, 12, 0, 31, 4, 40, 0, 0},
		{5, 20, 0, 9, 2, 9, 0, 0x0B, 3, 30, 0, 0},
	}, mutate, func(t *testing.T, b, ops []byte) {
		m, err := parse(b, Limits{})
		checkParseResult(t, b, m, err)
		if err != nil {
			return
		}
		const extra = "fuzz.extra"
		out := AppendCustomSection(b, extra, ops)
		m2, err := parse(out, Limits{})
		if err != nil {
			t.Fatalf("Parse accepted the module but not with a custom section appended: %v", err)
		}
		if len(m2.Sections) != len(m.Sections)+1 {
			t.Fatalf("%d sections after append, want %d", len(m2.Sections), len(m.Sections)+1)
		}
		for i, s := range m.Sections {
			g := m2.Sections[i]
			if g.ID != s.ID || g.Offset != s.Offset || g.Size != s.Size || g.Name != s.Name {
				t.Fatalf("section %d changed: %+v -> %+v", i, s, g)
			}
		}
		last := m2.Customs[len(m2.Customs)-1]
		if last.Name != extra || !bytes.Equal(last.Data, ops) || last.Offset != len(b) {
			t.Fatalf("appended section = %+v", last)
		}
		if _, had := m.CustomSection(extra); !had {
			back, err := RemoveCustomSections(out, extra)
			if err != nil || !bytes.Equal(back, b) {
				t.Fatalf("Remove(Append(m)) != m: %v", err)
			}
		}
		withManifest(t, parse, b, ops)
	})
}

func TestMutate(t *testing.T) {
	// The mutator itself must not panic on any operation at any position.
	base := hookModule()
	for kind := 0; kind < 7; kind++ {
		for pos := 0; pos < len(base)+3; pos++ {
			for _, val := range []byte{0, 1, 0x7F, 0xFF} {
				b := mutate(base, []byte{byte(kind), byte(pos), byte(pos >> 8), val})
				m, err := parse(b, Limits{})
				checkParseResult(t, b, m, err)
			}
		}
	}
}
