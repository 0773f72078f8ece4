package wasmbin

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestParseErrors covers every refusal path: each case is a module that is
// wrong in exactly one way.
func TestParseErrors(t *testing.T) {
	big := uint64(0xFFFFFFFF)
	valid := hookModule()
	tests := []struct {
		name string
		in   []byte
		lim  Limits
		want wantErr
	}{
		// Header.
		{"empty input", nil, Limits{}, wantErr{format: "truncated"}},
		{"truncated magic", []byte{0x00, 'a', 's'}, Limits{}, wantErr{format: "truncated"}},
		{"garbage", []byte("garbage bytes, not wasm"), Limits{}, wantErr{format: "bad magic"}},
		{"ELF binary", []byte{0x7F, 'E', 'L', 'F', 2, 1, 1, 0}, Limits{}, wantErr{format: "bad magic"}},
		{"text format", []byte("  (module (func))"), Limits{}, wantErr{format: "text format"}},
		{"truncated version", []byte{0x00, 'a', 's', 'm', 0x01}, Limits{}, wantErr{format: "truncated"}},
		{"version 2", []byte{0x00, 'a', 's', 'm', 0x02, 0, 0, 0}, Limits{}, wantErr{format: "unsupported binary version"}},
		{"component", []byte{0x00, 'a', 's', 'm', 0x0d, 0x00, 0x01, 0x00}, Limits{}, wantErr{feature: FeatureComponentModel}},

		// Module size.
		{"module over MaxModuleBytes", valid, Limits{MaxModuleBytes: uint64(len(valid) - 1)}, wantErr{limit: "MaxModuleBytes"}},

		// Section framing.
		{"unknown section id", mod(sec(14)), Limits{}, wantErr{format: "unknown section id 14"}},
		{"section id 255", mod(raw(0xFF, 0x00)), Limits{}, wantErr{format: "unknown section id 255"}},
		{"tag section", mod(sec(SectionTag, u32(0))), Limits{}, wantErr{feature: FeatureExceptionHandling}},
		{"section size past the end", mod(raw(byte(SectionType), 0x05, 0x00)), Limits{}, wantErr{format: "exceeds the 1 bytes left"}},
		{"section size 2^32-1", mod(raw(byte(SectionType), 0xFF, 0xFF, 0xFF, 0xFF, 0x0F)), Limits{}, wantErr{format: "section size 4294967295"}},
		{"section size missing", mod(raw(byte(SectionType))), Limits{}, wantErr{format: "unexpected end"}},
		{"section size LEB of 6 bytes", mod(raw(byte(SectionCustom), 0x80, 0x80, 0x80, 0x80, 0x80, 0x00)), Limits{}, wantErr{format: "longer than 5 bytes"}},
		{"section size LEB unused bits", mod(raw(byte(SectionCustom), 0x80, 0x80, 0x80, 0x80, 0x10)), Limits{}, wantErr{format: "unused bits"}},
		{"section size LEB truncated", mod(raw(byte(SectionCustom), 0x80, 0x80)), Limits{}, wantErr{format: "unexpected end"}},
		{"duplicate type section", mod(typeVoid, typeVoid), Limits{}, wantErr{format: "duplicate section"}},
		{"duplicate start section", mod(typeVoid, oneFunc, sec(SectionStart, u32(0)), sec(SectionStart, u32(0)), oneBody), Limits{}, wantErr{format: "duplicate section"}},
		{"import after function", mod(typeVoid, oneFunc, sec(SectionImport, u32(0)), oneBody), Limits{}, wantErr{format: "out of order"}},
		{"code before function", mod(typeVoid, sec(SectionCode, u32(0)), oneFunc), Limits{}, wantErr{format: "out of order"}},
		{"datacount after code", mod(typeVoid, oneFunc, oneBody, sec(SectionDataCount, u32(0))), Limits{}, wantErr{format: "out of order"}},
		{"data before code", mod(oneMemory, sec(SectionData, u32(0)), sec(SectionCode, u32(0))), Limits{}, wantErr{format: "out of order"}},
		{"global before memory", mod(sec(SectionGlobal, u32(0)), oneMemory), Limits{}, wantErr{format: "out of order"}},
		{"bytes left over in section", mod(sec(SectionType, u32(0), raw(0x00))), Limits{}, wantErr{format: "1 bytes left over"}},
		{"section content short", mod(sec(SectionType, u32(1), raw(0x60, 0x01, byte(I32)))), Limits{}, wantErr{format: "result: unexpected end of section reading count"}},

		// Type section.
		{"type count lies", mod(sec(SectionType, u32(big))), Limits{}, wantErr{format: "type count 4294967295 cannot fit"}},
		{"type count LEB overlong", mod(sec(SectionType, raw(0x81, 0x80, 0x80, 0x80, 0x80, 0x00), functype(nil, nil))), Limits{}, wantErr{format: "longer than 5 bytes"}},
		{"type form 0x61", mod(sec(SectionType, u32(1), raw(0x61, 0x00, 0x00))), Limits{}, wantErr{format: "invalid form 0x61"}},
		{"type form struct (GC)", mod(sec(SectionType, u32(1), raw(0x5F, 0x00, 0x00))), Limits{}, wantErr{feature: FeatureGC}},
		{"type form rec (GC)", mod(sec(SectionType, u32(1), raw(0x4E, 0x00, 0x00))), Limits{}, wantErr{feature: FeatureGC}},
		{"param type 0x40", mod(sec(SectionType, u32(1), raw(0x60, 0x01, 0x40, 0x00))), Limits{}, wantErr{format: "invalid value type 0x40"}},
		{"param count lies", mod(sec(SectionType, u32(1), raw(0x60), u32(big))), Limits{}, wantErr{format: "param count 4294967295 cannot fit"}},
		{"v128 param", mod(sec(SectionType, u32(1), functype([]ValueType{V128}, nil))), Limits{}, wantErr{feature: FeatureSIMD}},
		{"v128 result", mod(sec(SectionType, u32(1), functype(nil, []ValueType{V128}))), Limits{}, wantErr{feature: FeatureSIMD}},
		{"exnref param", mod(sec(SectionType, u32(1), raw(0x60, 0x01, 0x69, 0x00))), Limits{}, wantErr{feature: FeatureExceptionHandling}},
		{"anyref param (GC)", mod(sec(SectionType, u32(1), raw(0x60, 0x01, 0x6E, 0x00))), Limits{}, wantErr{feature: FeatureGC}},
		{"typed ref param (GC)", mod(sec(SectionType, u32(1), raw(0x60, 0x01, 0x64, 0x00, 0x00))), Limits{}, wantErr{feature: FeatureGC}},
		{"too many params", mod(sec(SectionType, u32(1), functype([]ValueType{I32, I32, I32}, nil))), Limits{MaxParams: 2}, wantErr{limit: "MaxParams"}},
		{"too many results", mod(sec(SectionType, u32(1), functype(nil, []ValueType{I32, I32}))), Limits{MaxResults: 1}, wantErr{limit: "MaxResults"}},
		{"type values over MaxTypeValues (params and results over types)", mod(sec(SectionType, u32(2), functype([]ValueType{I32, I32}, []ValueType{I32}), functype([]ValueType{I64}, []ValueType{I64}))), Limits{MaxTypeValues: 4}, wantErr{limit: "MaxTypeValues"}},
		{"too many types", mod(sec(SectionType, u32(3), functype(nil, nil), functype(nil, nil), functype(nil, nil))), Limits{MaxTypes: 2}, wantErr{limit: "MaxTypes"}},

		// Import section.
		{"import count lies", mod(typeVoid, sec(SectionImport, u32(big))), Limits{}, wantErr{format: "import count 4294967295 cannot fit"}},
		{"import module name not UTF-8", mod(typeVoid, sec(SectionImport, u32(1), str("hook\xff"), str("f"), raw(0x00), u32(0))), Limits{}, wantErr{format: "module name is not valid UTF-8"}},
		{"import field name not UTF-8", mod(typeVoid, sec(SectionImport, u32(1), str("m"), str("\xc0\x80"), raw(0x00), u32(0))), Limits{}, wantErr{format: "field name is not valid UTF-8"}},
		{"import name surrogate", mod(typeVoid, sec(SectionImport, u32(1), str("m"), str("\xed\xa0\x80"), raw(0x00), u32(0))), Limits{}, wantErr{format: "not valid UTF-8"}},
		{"import name too long", mod(typeVoid, sec(SectionImport, u32(1), str(strings.Repeat("m", 65)), str("f"), raw(0x00), u32(0))), Limits{MaxNameBytes: 64}, wantErr{limit: "MaxNameBytes"}},
		{"import name length lies", mod(typeVoid, sec(SectionImport, u32(1), u32(big), raw(0, 0, 0))), Limits{MaxNameBytes: big}, wantErr{format: "exceeds the 3 bytes left"}},
		{"import type index out of range", mod(typeVoid, sec(SectionImport, u32(1), str("m"), str("f"), raw(0x00), u32(1))), Limits{}, wantErr{format: "type index 1 out of range"}},
		{"import type index without types", mod(sec(SectionImport, u32(1), hostImport)), Limits{}, wantErr{format: "type index 0 out of range (0 types)"}},
		{"import kind tag", mod(typeVoid, sec(SectionImport, u32(1), str("m"), str("t"), raw(0x04, 0x00, 0x00))), Limits{}, wantErr{feature: FeatureExceptionHandling}},
		{"import kind 5", mod(typeVoid, sec(SectionImport, u32(1), str("m"), str("x"), raw(0x05, 0x00))), Limits{}, wantErr{format: "invalid import kind 0x05"}},
		{"too many imports", mod(typeVoid, sec(SectionImport, u32(2), hostImport, hostImport)), Limits{MaxImports: 1}, wantErr{limit: "MaxImports"}},
		{"imported functions over MaxFunctions", mod(typeVoid, sec(SectionImport, u32(2), hostImport, hostImport)), Limits{MaxFunctions: 1}, wantErr{limit: "MaxFunctions"}},
		{"imported global shared", mod(sec(SectionImport, u32(1), str("m"), str("g"), raw(0x03, byte(I32), 0x02))), Limits{}, wantErr{feature: FeatureThreads}},
		{"imported global bad mutability", mod(sec(SectionImport, u32(1), str("m"), str("g"), raw(0x03, byte(I32), 0x07))), Limits{}, wantErr{format: "invalid mutability 0x07"}},
		{"imported global v128", mod(sec(SectionImport, u32(1), str("m"), str("g"), raw(0x03, byte(V128), 0x00))), Limits{}, wantErr{feature: FeatureSIMD}},
		{"imported globals over MaxGlobals", mod(sec(SectionImport, u32(2), str("m"), str("a"), raw(0x03, byte(I32), 0x00), str("m"), str("b"), raw(0x03, byte(I32), 0x00))), Limits{MaxGlobals: 1}, wantErr{limit: "MaxGlobals"}},

		// Memories.
		{"shared memory", mod(sec(SectionMemory, u32(1), raw(0x03), u32(1), u32(1))), Limits{}, wantErr{feature: FeatureThreads}},
		{"shared memory without max", mod(sec(SectionMemory, u32(1), raw(0x02), u32(1))), Limits{}, wantErr{feature: FeatureThreads}},
		{"memory64", mod(sec(SectionMemory, u32(1), raw(0x04), u32(1))), Limits{}, wantErr{feature: FeatureMemory64}},
		{"memory64 shared with max", mod(sec(SectionMemory, u32(1), raw(0x07), u32(1), u32(2))), Limits{}, wantErr{feature: FeatureMemory64}},
		{"custom page size", mod(sec(SectionMemory, u32(1), raw(0x08), u32(1), u32(0))), Limits{}, wantErr{feature: FeatureCustomPageSizes}},
		{"memory flags 0x10", mod(sec(SectionMemory, u32(1), raw(0x10), u32(1))), Limits{}, wantErr{format: "invalid limits flags 0x10"}},
		{"memory max below min", mod(sec(SectionMemory, u32(1), raw(0x01), u32(2), u32(1))), Limits{}, wantErr{format: "maximum 1 is below minimum 2"}},
		{"memory min over 65536 pages", mod(sec(SectionMemory, u32(1), raw(0x00), u32(65537))), Limits{}, wantErr{format: "minimum 65537 pages exceeds 65536"}},
		{"memory max over 65536 pages", mod(sec(SectionMemory, u32(1), raw(0x01), u32(1), u32(65537))), Limits{}, wantErr{format: "maximum 65537 pages exceeds 65536"}},
		{"memory min 2^32-1", mod(sec(SectionMemory, u32(1), raw(0x00), u32(big))), Limits{}, wantErr{format: "minimum 4294967295 pages"}},
		{"memory over MaxMemoryPages", mod(sec(SectionMemory, u32(1), raw(0x00), u32(1000))), Limits{MaxMemoryPages: 160}, wantErr{limit: "MaxMemoryPages"}},
		{"memory min LEB unused bits", mod(sec(SectionMemory, u32(1), raw(0x00, 0x81, 0x80, 0x80, 0x80, 0x70))), Limits{}, wantErr{format: "unused bits"}},
		{"two memories", mod(sec(SectionMemory, u32(2), raw(0x00), u32(1), raw(0x00), u32(1))), Limits{}, wantErr{feature: FeatureMultiMemory}},
		{"two imported memories", mod(sec(SectionImport, u32(2), str("m"), str("a"), raw(0x02, 0x00), u32(1), str("m"), str("b"), raw(0x02, 0x00), u32(1))), Limits{}, wantErr{feature: FeatureMultiMemory}},
		{"imported and defined memory", mod(sec(SectionImport, u32(1), str("env"), str("memory"), raw(0x02, 0x00), u32(1)), oneMemory), Limits{}, wantErr{feature: FeatureMultiMemory}},
		{"imported shared memory", mod(sec(SectionImport, u32(1), str("env"), str("memory"), raw(0x02, 0x03), u32(1), u32(1))), Limits{}, wantErr{feature: FeatureThreads}},
		{"memory count lies", mod(sec(SectionMemory, u32(big))), Limits{}, wantErr{format: "memory count 4294967295 cannot fit"}},

		// Tables.
		{"table of i32", mod(sec(SectionTable, u32(1), raw(byte(I32), 0x00), u32(1))), Limits{}, wantErr{format: "i32 is not a reference type"}},
		{"table64", mod(sec(SectionTable, u32(1), raw(byte(FuncRef), 0x04), u32(1))), Limits{}, wantErr{feature: FeatureMemory64}},
		{"shared table", mod(sec(SectionTable, u32(1), raw(byte(FuncRef), 0x03), u32(1), u32(1))), Limits{}, wantErr{feature: FeatureThreads}},
		{"table with initialiser", mod(sec(SectionTable, u32(1), raw(0x40, 0x00, byte(FuncRef), 0x00), u32(1), raw(0xD0, 0x70, 0x0B))), Limits{}, wantErr{feature: FeatureGC}},
		{"table max below min", mod(sec(SectionTable, u32(1), raw(byte(FuncRef), 0x01), u32(5), u32(4))), Limits{}, wantErr{format: "maximum 4 is below minimum 5"}},
		{"table of 2^32-1 elements", mod(sec(SectionTable, u32(1), raw(byte(FuncRef), 0x00), u32(big))), Limits{}, wantErr{limit: "MaxTableElements"}},
		{"tables summing over MaxTableElements", mod(sec(SectionTable, u32(2), raw(byte(FuncRef), 0x00), u32(600), raw(byte(ExternRef), 0x00), u32(600))), Limits{MaxTableElements: 1000}, wantErr{limit: "MaxTableElements"}},
		{"too many tables", mod(sec(SectionTable, u32(3), raw(0x70, 0x00, 0x00, 0x70, 0x00, 0x00, 0x70, 0x00, 0x00))), Limits{MaxTables: 2}, wantErr{limit: "MaxTables"}},
		{"imported and defined tables over MaxTables", mod(sec(SectionImport, u32(1), str("m"), str("t"), raw(0x01, 0x70, 0x00, 0x00)), oneTable), Limits{MaxTables: 1}, wantErr{limit: "MaxTables"}},
		{"table count lies", mod(sec(SectionTable, u32(big))), Limits{}, wantErr{format: "table count 4294967295 cannot fit"}},

		// Function section.
		{"function count lies", mod(typeVoid, sec(SectionFunction, u32(big))), Limits{}, wantErr{format: "function count 4294967295 cannot fit"}},
		{"function type out of range", mod(typeVoid, sec(SectionFunction, u32(1), u32(1)), oneBody), Limits{}, wantErr{format: "function 0: type index 1 out of range"}},
		{"function type index overlong", mod(typeVoid, sec(SectionFunction, u32(1), raw(0x80, 0x80, 0x80, 0x80, 0x80, 0x00)), oneBody), Limits{}, wantErr{format: "longer than 5 bytes"}},
		{"too many functions", mod(typeVoid, sec(SectionFunction, u32(3), u32(0), u32(0), u32(0))), Limits{MaxFunctions: 2}, wantErr{limit: "MaxFunctions"}},
		{"imports and functions over MaxFunctions", mod(typeVoid, sec(SectionImport, u32(1), hostImport), oneFunc, oneBody), Limits{MaxFunctions: 1}, wantErr{limit: "MaxFunctions"}},

		// Global section.
		{"global count lies", mod(sec(SectionGlobal, u32(big))), Limits{}, wantErr{format: "global count 4294967295 cannot fit"}},
		{"global init type mismatch", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00), I64Const(1), raw(OpEnd))), Limits{}, wantErr{format: "has type i64, want i32"}},
		{"global init missing end", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00), I32Const(1))), Limits{}, wantErr{format: "unexpected end"}},
		{"global init empty", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00, OpEnd, 0x00))), Limits{}, wantErr{format: "empty constant expression"}},
		{"global init not constant", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00, 0x20, 0x00, OpEnd))), Limits{}, wantErr{format: "opcode 0x20 is not a constant instruction"}},
		{"global init garbage after", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00), I32Const(1), raw(0x1A, OpEnd))), Limits{}, wantErr{format: "want end (0x0b)"}},
		{"global init extended const", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00), I32Const(1), I32Const(2), raw(0x6A, OpEnd))), Limits{}, wantErr{feature: FeatureExtendedConst}},
		{"global init GC instruction", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00, 0xFB, 0x1C, OpEnd))), Limits{}, wantErr{feature: FeatureGC}},
		{"global init v128.const", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00, 0xFD, 0x0C), make([]byte, 16), raw(OpEnd))), Limits{}, wantErr{feature: FeatureSIMD}},
		{"global init 0xfd not const", mod(sec(SectionGlobal, u32(1), raw(byte(V128), 0x00, 0xFD, 0x00), make([]byte, 16), raw(OpEnd))), Limits{AllowSIMD: true}, wantErr{format: "instruction 0xfd 0 is not constant"}},
		{"global init i32.const LEB of 6 bytes", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00, 0x41, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, OpEnd))), Limits{}, wantErr{format: "longer than 5 bytes"}},
		{"global init i32.const bad sign bits", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00, 0x41, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, OpEnd))), Limits{}, wantErr{format: "not a sign extension"}},
		{"global init i64.const bad sign bits", mod(sec(SectionGlobal, u32(1), raw(byte(I64), 0x00, 0x42, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, OpEnd))), Limits{}, wantErr{format: "not a sign extension"}},
		{"global init i64.const LEB of 11 bytes", mod(sec(SectionGlobal, u32(1), raw(byte(I64), 0x00, 0x42, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, OpEnd))), Limits{}, wantErr{format: "longer than 10 bytes"}},
		{"global init f64 truncated", mod(sec(SectionGlobal, u32(1), raw(byte(F64), 0x00, 0x44, 0x00, 0x00))), Limits{}, wantErr{format: "f64.const of 8 bytes exceeds"}},
		{"global.get out of range", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00, 0x23, 0x00, OpEnd))), Limits{}, wantErr{format: "global.get 0 out of range"}},
		{"global.get of a later global", mod(sec(SectionGlobal, u32(2), raw(byte(I32), 0x00, 0x23, 0x01, OpEnd), raw(byte(I32), 0x00), I32Const(0), raw(OpEnd))), Limits{}, wantErr{format: "global.get 1 out of range"}},
		{"global.get type mismatch", mod(sec(SectionImport, u32(1), str("m"), str("g"), raw(0x03, byte(I64), 0x00)), sec(SectionGlobal, u32(1), raw(byte(I32), 0x00, 0x23, 0x00, OpEnd))), Limits{}, wantErr{format: "has type i64, want i32"}},
		{"ref.func out of range", mod(sec(SectionGlobal, u32(1), raw(byte(FuncRef), 0x00, 0xD2, 0x00, OpEnd))), Limits{}, wantErr{format: "ref.func 0 out of range"}},
		{"ref.null of i32", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x00, 0xD0, byte(I32), OpEnd))), Limits{}, wantErr{format: "not a reference type"}},
		{"ref.null type mismatch", mod(sec(SectionGlobal, u32(1), raw(byte(FuncRef), 0x00, 0xD0, byte(ExternRef), OpEnd))), Limits{}, wantErr{format: "has type externref, want funcref"}},
		{"too many globals", mod(sec(SectionGlobal, u32(2), raw(byte(I32), 0x00), I32Const(0), raw(OpEnd, byte(I32), 0x00), I32Const(0), raw(OpEnd))), Limits{MaxGlobals: 1}, wantErr{limit: "MaxGlobals"}},
		{"shared global", mod(sec(SectionGlobal, u32(1), raw(byte(I32), 0x03), I32Const(0), raw(OpEnd))), Limits{}, wantErr{feature: FeatureThreads}},

		// Export section.
		{"export count lies", mod(sec(SectionExport, u32(big))), Limits{}, wantErr{format: "export count 4294967295 cannot fit"}},
		{"duplicate export name", mod(typeVoid, oneFunc, sec(SectionExport, u32(2), str("f"), raw(0x00), u32(0), str("f"), raw(0x00), u32(0)), oneBody), Limits{}, wantErr{format: `duplicate export name "f"`}},
		{"duplicate export name across kinds", mod(typeVoid, oneFunc, oneMemory, sec(SectionExport, u32(2), str("x"), raw(0x00), u32(0), str("x"), raw(0x02), u32(0)), oneBody), Limits{}, wantErr{format: `duplicate export name "x"`}},
		{"export name not UTF-8", mod(oneMemory, sec(SectionExport, u32(1), str("mem\x80"), raw(0x02), u32(0))), Limits{}, wantErr{format: "export name is not valid UTF-8"}},
		{"export name too long", mod(oneMemory, sec(SectionExport, u32(1), str("memory"), raw(0x02), u32(0))), Limits{MaxNameBytes: 5}, wantErr{limit: "MaxNameBytes"}},
		{"export func out of range", mod(typeVoid, oneFunc, sec(SectionExport, u32(1), str("f"), raw(0x00), u32(1)), oneBody), Limits{}, wantErr{format: "func index 1 out of range"}},
		{"export memory out of range", mod(sec(SectionExport, u32(1), str("memory"), raw(0x02), u32(0))), Limits{}, wantErr{format: "memory index 0 out of range"}},
		{"export table out of range", mod(sec(SectionExport, u32(1), str("t"), raw(0x01), u32(0))), Limits{}, wantErr{format: "table index 0 out of range"}},
		{"export global out of range", mod(sec(SectionExport, u32(1), str("g"), raw(0x03), u32(0))), Limits{}, wantErr{format: "global index 0 out of range"}},
		{"export tag", mod(sec(SectionExport, u32(1), str("t"), raw(0x04), u32(0))), Limits{}, wantErr{feature: FeatureExceptionHandling}},
		{"export kind 9", mod(sec(SectionExport, u32(1), str("t"), raw(0x09), u32(0))), Limits{}, wantErr{format: "invalid export kind 0x09"}},
		{"too many exports", mod(oneMemory, sec(SectionExport, u32(2), str("a"), raw(0x02), u32(0), str("b"), raw(0x02), u32(0))), Limits{MaxExports: 1}, wantErr{limit: "MaxExports"}},

		// Start section.
		{"start out of range", mod(typeVoid, oneFunc, sec(SectionStart, u32(1)), oneBody), Limits{}, wantErr{format: "start function 1 out of range"}},
		{"start with params", mod(typeVoidI32, sec(SectionFunction, u32(1), u32(1)), sec(SectionStart, u32(0)), oneBody), Limits{}, wantErr{format: "has type (i32) -> (), want () -> ()"}},
		{"start without functions", mod(sec(SectionStart, u32(0))), Limits{}, wantErr{format: "start function 0 out of range (0 functions)"}},
		{"start section too long", mod(typeVoid, oneFunc, sec(SectionStart, u32(0), u32(0)), oneBody), Limits{}, wantErr{format: "left over"}},

		// Element section.
		{"element count lies", mod(sec(SectionElement, u32(big))), Limits{}, wantErr{format: "element segment count 4294967295 cannot fit"}},
		{"element flags 8", mod(typeVoid, oneFunc, oneTable, sec(SectionElement, u32(1), raw(0x08, 0x00, 0x00)), oneBody), Limits{}, wantErr{format: "invalid flags 8"}},
		{"active element without table", mod(typeVoid, oneFunc, sec(SectionElement, u32(1), raw(0x00), I32Const(0), raw(OpEnd), u32(1), u32(0)), oneBody), Limits{}, wantErr{format: "no table"}},
		{"element table out of range", mod(typeVoid, oneFunc, oneTable, sec(SectionElement, u32(1), raw(0x02), u32(1), I32Const(0), raw(OpEnd, 0x00), u32(0)), oneBody), Limits{}, wantErr{format: "table 1 out of range"}},
		{"element function out of range", mod(typeVoid, oneFunc, oneTable, sec(SectionElement, u32(1), raw(0x00), I32Const(0), raw(OpEnd), u32(2), u32(0), u32(1)), oneBody), Limits{}, wantErr{format: "item 1: function 1 out of range"}},
		{"element offset i64", mod(typeVoid, oneFunc, oneTable, sec(SectionElement, u32(1), raw(0x00), I64Const(0), raw(OpEnd), u32(0)), oneBody), Limits{}, wantErr{format: "has type i64, want i32"}},
		{"element kind 1", mod(typeVoid, oneFunc, sec(SectionElement, u32(1), raw(0x01, 0x01), u32(0)), oneBody), Limits{}, wantErr{format: "invalid element kind 0x01"}},
		{"element item count lies", mod(typeVoid, oneFunc, sec(SectionElement, u32(1), raw(0x01, 0x00), u32(big)), oneBody), Limits{}, wantErr{format: "item count 4294967295 cannot fit"}},
		{"element expr of wrong type", mod(typeVoid, oneFunc, sec(SectionElement, u32(1), raw(0x05, byte(FuncRef)), u32(1), raw(0xD0, byte(ExternRef), OpEnd)), oneBody), Limits{}, wantErr{format: "has type externref, want funcref"}},
		{"element expr not constant", mod(typeVoid, oneFunc, sec(SectionElement, u32(1), raw(0x05, byte(FuncRef)), u32(1), raw(0x00, OpEnd)), oneBody), Limits{}, wantErr{format: "item 0: opcode 0x00 is not a constant"}},
		{"element reftype i32", mod(typeVoid, oneFunc, sec(SectionElement, u32(1), raw(0x05, byte(I32)), u32(0)), oneBody), Limits{}, wantErr{format: "not a reference type"}},
		{"element items over MaxElementItems (total over segments)", mod(typeVoid, oneFunc, sec(SectionElement, u32(2), raw(0x01, 0x00), u32(2), u32(0), u32(0), raw(0x01, 0x00), u32(2), u32(0), u32(0)), oneBody), Limits{MaxElementItems: 3}, wantErr{limit: "MaxElementItems"}},
		{"element item count over MaxElementItems before the items", mod(typeVoid, oneFunc, sec(SectionElement, u32(1), raw(0x01, 0x00), u32(5), u32(0), u32(0), u32(0), u32(0), u32(0)), oneBody), Limits{MaxElementItems: 4}, wantErr{limit: "MaxElementItems"}},
		{"too many element segments", mod(typeVoid, oneFunc, sec(SectionElement, u32(2), raw(0x01, 0x00, 0x00, 0x01, 0x00, 0x00)), oneBody), Limits{MaxElementSegments: 1}, wantErr{limit: "MaxElementSegments"}},

		// Datacount section.
		{"datacount over MaxDataSegments", mod(sec(SectionDataCount, u32(big))), Limits{}, wantErr{limit: "MaxDataSegments"}},
		{"datacount without data", mod(sec(SectionDataCount, u32(1))), Limits{}, wantErr{format: "no data section"}},
		{"datacount mismatch", mod(oneMemory, sec(SectionDataCount, u32(2)), sec(SectionData, u32(1), raw(0x01, 0x00))), Limits{}, wantErr{format: "1 data segments but the datacount section declares 2"}},
		{"datacount LEB overlong", mod(sec(SectionDataCount, raw(0x80, 0x80, 0x80, 0x80, 0x80, 0x00))), Limits{}, wantErr{format: "longer than 5 bytes"}},

		// Code section.
		{"code count lies", mod(typeVoid, oneFunc, sec(SectionCode, u32(big))), Limits{}, wantErr{format: "function body count 4294967295 cannot fit"}},
		{"missing code section", mod(typeVoid, oneFunc), Limits{}, wantErr{format: "no code section"}},
		{"code without functions", mod(typeVoid, oneBody), Limits{}, wantErr{format: "1 function bodies but the function section declares 0"}},
		{"fewer bodies than functions", mod(typeVoid, sec(SectionFunction, u32(2), u32(0), u32(0)), oneBody), Limits{}, wantErr{format: "1 function bodies but the function section declares 2"}},
		{"body size past section", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(9), raw(0x00, OpEnd))), Limits{}, wantErr{format: "body size 9 exceeds the 2 bytes left"}},
		{"empty body", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(0), raw(0x00))), Limits{}, wantErr{format: "unexpected end"}},
		{"body without instructions", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(1), raw(0x00))), Limits{}, wantErr{format: "no instructions"}},
		{"body without end", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(2), raw(0x00, 0x01))), Limits{}, wantErr{format: "does not end with the end opcode"}},
		{"body over MaxFunctionBodyBytes", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(5), raw(0x00, 0x01, 0x01, 0x01, OpEnd))), Limits{MaxFunctionBodyBytes: 4}, wantErr{limit: "MaxFunctionBodyBytes"}},
		{"code section over MaxCodeBytes", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(5), raw(0x00, 0x01, 0x01, 0x01, OpEnd))), Limits{MaxCodeBytes: 6}, wantErr{limit: "MaxCodeBytes"}},
		{"local decl count lies", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(6), u32(big), raw(OpEnd))), Limits{}, wantErr{format: "local declaration count 4294967295 cannot fit"}},
		{"locals 2^31 + 2^31", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(13), u32(2), u32(1<<31), raw(byte(I32)), u32(1<<31), raw(byte(I64)), raw(OpEnd))), Limits{}, wantErr{limit: "MaxLocals"}},
		{"locals 2^32-1 twice with huge limit", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(13), u32(2), u32(big), raw(byte(I32)), u32(big), raw(byte(I64)), raw(OpEnd))), Limits{MaxLocals: 1 << 32}, wantErr{limit: "MaxLocals"}},
		{"locals over MaxLocals", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(6), u32(2), u32(30), raw(byte(I32)), u32(30), raw(byte(I32)), raw(OpEnd))), Limits{MaxLocals: 59}, wantErr{limit: "MaxLocals"}},
		{"params count toward MaxLocals", mod(typeVoidI32, sec(SectionFunction, u32(1), u32(1)), sec(SectionCode, u32(1), u32(4), u32(1), u32(10), raw(byte(I32)), raw(OpEnd))), Limits{MaxLocals: 10}, wantErr{limit: "MaxLocals"}},
		{"params alone over MaxLocals", mod(sec(SectionType, u32(1), functype([]ValueType{I32, I32}, nil)), oneFunc, oneBody), Limits{MaxLocals: 1}, wantErr{limit: "MaxLocals"}},
		{"locals over MaxLocalsTotal (total over functions)", mod(typeVoid, sec(SectionFunction, u32(2), u32(0), u32(0)), sec(SectionCode, u32(2), u32(4), u32(1), u32(6), raw(byte(I32)), raw(OpEnd), u32(4), u32(1), u32(5), raw(byte(I32)), raw(OpEnd))), Limits{MaxLocalsTotal: 10}, wantErr{limit: "MaxLocalsTotal"}},
		{"params count toward MaxLocalsTotal", mod(typeVoidI32, sec(SectionFunction, u32(2), u32(1), u32(1)), sec(SectionCode, u32(2), u32(4), u32(1), u32(4), raw(byte(I32)), raw(OpEnd), u32(4), u32(1), u32(4), raw(byte(I32)), raw(OpEnd))), Limits{MaxLocalsTotal: 9}, wantErr{limit: "MaxLocalsTotal"}},
		{"v128 local", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(4), u32(1), u32(1), raw(byte(V128)), raw(OpEnd))), Limits{}, wantErr{feature: FeatureSIMD}},
		{"local type invalid", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(4), u32(1), u32(1), raw(0x00), raw(OpEnd))), Limits{}, wantErr{format: "invalid value type 0x00"}},
		{"local count truncated", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(3), u32(1), raw(0x80, 0x80))), Limits{}, wantErr{format: "unexpected end"}},
		{"bytes after last body", mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(2), raw(0x00, OpEnd, 0x00))), Limits{}, wantErr{format: "left over"}},

		// Data section.
		{"data count lies", mod(oneMemory, sec(SectionData, u32(big))), Limits{}, wantErr{format: "data segment count 4294967295 cannot fit"}},
		{"active data without memory", mod(sec(SectionData, u32(1), raw(0x00), I32Const(0), raw(OpEnd), u32(0))), Limits{}, wantErr{format: "no memory"}},
		{"data memory 1", mod(oneMemory, sec(SectionData, u32(1), raw(0x02), u32(1), I32Const(0), raw(OpEnd), u32(0))), Limits{}, wantErr{format: "memory 1 out of range"}},
		{"data flags 3", mod(oneMemory, sec(SectionData, u32(1), raw(0x03, 0x00))), Limits{}, wantErr{format: "invalid flags 3"}},
		{"data offset f32", mod(oneMemory, sec(SectionData, u32(1), raw(0x00, 0x43, 0, 0, 0, 0, OpEnd), u32(0))), Limits{}, wantErr{format: "has type f32, want i32"}},
		{"data size past section", mod(oneMemory, sec(SectionData, u32(1), raw(0x01), u32(100), raw(1, 2, 3))), Limits{}, wantErr{format: "contents of 100 bytes exceeds the 3 bytes left"}},
		{"data size 2^32-1", mod(oneMemory, sec(SectionData, u32(1), raw(0x01), u32(big), raw(1, 2, 3))), Limits{}, wantErr{format: "contents of 4294967295 bytes"}},
		{"data bytes over MaxDataBytes (total over segments)", mod(oneMemory, sec(SectionData, u32(2), raw(0x01), u32(3), raw(1, 2, 3), raw(0x01), u32(2), raw(1, 2))), Limits{MaxDataBytes: 4}, wantErr{limit: "MaxDataBytes"}},
		{"too many data segments", mod(oneMemory, sec(SectionData, u32(2), raw(0x01, 0x00, 0x01, 0x00))), Limits{MaxDataSegments: 1}, wantErr{limit: "MaxDataSegments"}},

		// Custom sections.
		{"custom name not UTF-8", mod(sec(SectionCustom, str("n\xfe"), raw(1))), Limits{}, wantErr{format: "custom section name is not valid UTF-8"}},
		{"custom name past section", mod(sec(SectionCustom, u32(10), raw('a', 'b'))), Limits{}, wantErr{format: "exceeds the 2 bytes left"}},
		{"empty custom section", mod(sec(SectionCustom)), Limits{}, wantErr{format: "unexpected end"}},
		{"duplicate manifest", mod(custom(ManifestSection, manifest), custom(ManifestSection, manifest)), Limits{}, wantErr{format: `duplicate custom section "hook_v1.manifest"`}},
		{"duplicate manifest far apart", AppendCustomSection(valid, ManifestSection, nil), Limits{}, wantErr{format: "duplicate custom section"}},
		{"too many custom sections", mod(custom("a", nil), custom("b", nil), custom("c", nil)), Limits{MaxCustomSections: 2}, wantErr{limit: "MaxCustomSections"}},
		{"custom name too long", mod(custom(strings.Repeat("n", 11), nil)), Limits{MaxNameBytes: 10}, wantErr{limit: "MaxNameBytes"}},
	}
	names := map[string]bool{}
	for _, tt := range tests {
		if names[tt.name] {
			t.Fatalf("duplicate test name %q", tt.name)
		}
		names[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			m, err := parse(tt.in, tt.lim) // no recover: a panic fails the test
			if m != nil {
				t.Errorf("Parse returned a module with its error")
			}
			checkErr(t, err, tt.want)
			t.Log(err)
		})
	}
}

// TestErrorMessages checks that errors name what the caller needs.
func TestErrorMessages(t *testing.T) {
	in := mod(typeVoid, oneFunc, sec(SectionCode, u32(1), u32(9), raw(0x00, OpEnd)))
	_, err := Parse(in, Limits{})
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v", err)
	}
	if fe.Section != "code" || fe.Offset != 8+len(typeVoid)+len(oneFunc)+3 {
		t.Errorf("got section %q offset %d", fe.Section, fe.Offset)
	}
	for _, want := range []string{"code section", "offset 21 (0x15)", "function 0: body size 9", "body size 9"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not contain %q", err, want)
		}
	}

	le := &LimitError{Limit: "MaxFunctions", Max: 10, Got: 11}
	if got, want := le.Error(), "wasm: module exceeds limit MaxFunctions: 11 > 10"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	xe := &FeatureError{Feature: FeatureThreads, Reason: "memory 0: shared"}
	if got, want := xe.Error(), "wasm: unsupported feature threads: memory 0: shared"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}

	_, err = Parse(mod(sec(SectionImport, u32(1), str("env"), str("memory"), raw(0x02, 0x03), u32(1), u32(1))), Limits{})
	if !strings.Contains(err.Error(), `import 0: "env"."memory": shared`) {
		t.Errorf("import context missing: %v", err)
	}
}

// TestTruncations parses every proper prefix of a valid module. A prefix
// that ends inside a section must be refused with a *FormatError; one that
// ends exactly at a section boundary may be a valid (smaller) module, unless
// it stops between the function and code sections or between datacount and
// data, which must be refused too.
func TestTruncations(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"builder", hookModule()},
		{"fixture", readFixture(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, err := parse(tc.b, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			boundaries := map[int]int{} // end offset -> number of sections before it
			for i, s := range full.Sections {
				boundaries[s.End()] = i + 1
			}
			boundaries[HeaderSize] = 0
			for n := 0; n < len(tc.b); n++ {
				prefix := tc.b[:n:n] // cap n: reading past the prefix would fault under -race
				m, err := parse(prefix, Limits{})
				k, atBoundary := boundaries[n]
				if !atBoundary {
					var fe *FormatError
					if !errors.As(err, &fe) {
						t.Fatalf("prefix of %d bytes: got %v, want a *FormatError", n, err)
					}
					continue
				}
				if err != nil {
					continue
				}
				if len(m.Sections) != k {
					t.Fatalf("prefix of %d bytes: %d sections, want %d", n, len(m.Sections), k)
				}
				for _, s := range m.Sections {
					if s.ID == SectionFunction && len(m.Functions) > 0 && len(m.Code) == 0 {
						t.Fatalf("prefix of %d bytes accepted without code", n)
					}
				}
				if m.DataCount != nil && *m.DataCount > 0 && len(m.Data) == 0 {
					t.Fatalf("prefix of %d bytes accepted without data", n)
				}
				checkInvariants(t, prefix, m)
			}
		})
	}
}

// TestBitFlips flips every bit of a valid module: the result is refused or
// parses with the invariants intact, and never panics.
func TestBitFlips(t *testing.T) {
	b := hookModule()
	for i := range b {
		for bit := 0; bit < 8; bit++ {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			m, err := parse(c, Limits{})
			if err == nil {
				checkInvariants(t, c, m)
			}
		}
	}
}
