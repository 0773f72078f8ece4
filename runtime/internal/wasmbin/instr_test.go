package wasmbin

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// decodeAll decodes body and returns its instructions, or the first error.
func decodeAll(body []byte) ([]Instr, error) {
	d := NewInstrReader(body, 100)
	var out []Instr
	for {
		var in Instr
		err := d.Next(&in)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		in.Targets = append([]uint32(nil), in.Targets...)
		out = append(out, in)
	}
}

func TestInstrReader(t *testing.T) {
	tests := []struct {
		name  string
		code  []byte
		check func(t *testing.T, in Instr)
	}{
		{"unreachable", raw(0x00), func(t *testing.T, in Instr) {}},
		{"block empty", raw(0x02, 0x40), func(t *testing.T, in Instr) {
			if !in.Block.Empty {
				t.Errorf("block type %+v", in.Block)
			}
		}},
		{"loop i64", raw(0x03, 0x7E), func(t *testing.T, in Instr) {
			if in.Block.Value != I64 {
				t.Errorf("block type %+v", in.Block)
			}
		}},
		{"if type index 300", raw(0x04, 0xAC, 0x02), func(t *testing.T, in Instr) {
			if in.Block.Index != 300 || in.Block.Empty || in.Block.Value != 0 {
				t.Errorf("block type %+v", in.Block)
			}
		}},
		{"br_table", raw(0x0E, 0x03, 0x00, 0x01, 0x80, 0x01, 0x05), func(t *testing.T, in Instr) {
			if len(in.Targets) != 3 || in.Targets[2] != 128 || in.Index != 5 {
				t.Errorf("targets %v default %d", in.Targets, in.Index)
			}
		}},
		{"call_indirect", raw(0x11, 0x02, 0x01), func(t *testing.T, in Instr) {
			if in.Index != 2 || in.Index2 != 1 {
				t.Errorf("type %d table %d", in.Index, in.Index2)
			}
		}},
		{"select t", raw(0x1C, 0x01, 0x7F), func(t *testing.T, in Instr) {}},
		{"i64.load memarg", raw(0x29, 0x03, 0x90, 0x4E), func(t *testing.T, in Instr) {
			if in.Align != 3 || in.Offset != 10000 {
				t.Errorf("align %d offset %d", in.Align, in.Offset)
			}
		}},
		{"i32.const -1", raw(0x41, 0x7F), func(t *testing.T, in Instr) {
			if int64(in.Const) != -1 {
				t.Errorf("const %d", int64(in.Const))
			}
		}},
		{"i64.const min", append([]byte{0x42}, AppendSLEB128(nil, -1<<63)...), func(t *testing.T, in Instr) {
			if int64(in.Const) != -1<<63 {
				t.Errorf("const %d", int64(in.Const))
			}
		}},
		{"f64.const", raw(0x44, 1, 2, 3, 4, 5, 6, 7, 8), func(t *testing.T, in Instr) {
			if in.Const != 0x0807060504030201 {
				t.Errorf("const %#x", in.Const)
			}
		}},
		{"memory.grow", raw(0x40, 0x00), func(t *testing.T, in Instr) {}},
		{"ref.null extern", raw(0xD0, 0x6F), func(t *testing.T, in Instr) {}},
		{"ref.func", raw(0xD2, 0x07), func(t *testing.T, in Instr) {
			if in.Index != 7 {
				t.Errorf("index %d", in.Index)
			}
		}},
		{"i32.extend8_s", raw(0xC0), func(t *testing.T, in Instr) {}},
		{"i32.trunc_sat_f32_s", raw(0xFC, 0x00), func(t *testing.T, in Instr) {}},
		{"memory.init", raw(0xFC, 0x08, 0x03, 0x00), func(t *testing.T, in Instr) {
			if in.Sub != SubMemoryInit || in.Index != 3 {
				t.Errorf("sub %d index %d", in.Sub, in.Index)
			}
		}},
		{"memory.copy", raw(0xFC, 0x0A, 0x00, 0x00), func(t *testing.T, in Instr) {}},
		{"memory.fill", raw(0xFC, 0x0B, 0x00), func(t *testing.T, in Instr) {}},
		{"table.copy", raw(0xFC, 0x0E, 0x01, 0x02), func(t *testing.T, in Instr) {
			if in.Index != 1 || in.Index2 != 2 {
				t.Errorf("tables %d %d", in.Index, in.Index2)
			}
		}},
		{"table.fill", raw(0xFC, 0x11, 0x00), func(t *testing.T, in Instr) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ins, err := decodeAll(tt.code)
			if err != nil {
				t.Fatal(err)
			}
			if len(ins) != 1 || ins[0].Start != 0 || ins[0].End != len(tt.code) {
				t.Fatalf("decoded %+v, want one instruction spanning %d bytes", ins, len(tt.code))
			}
			tt.check(t, ins[0])
		})
	}
}

func TestInstrReaderRefuses(t *testing.T) {
	tests := []struct {
		name    string
		code    []byte
		feature string // or empty for a *FormatError
		msg     string
	}{
		{"unknown opcode", raw(0x27), "", "unknown opcode 0x27"},
		{"unknown 0xfc", raw(0xFC, 0x12), "", "unknown instruction 0xfc 18"},
		{"truncated LEB", raw(0x41, 0x80), "", "unexpected end"},
		{"truncated f32", raw(0x43, 1, 2), "", "f32.const"},
		{"select of two types", raw(0x1C, 0x02, 0x7F, 0x7F), "", "select with 2 types"},
		{"bad block type", raw(0x02, 0x50), "", "invalid block type"},
		{"negative block type index", raw(0x02, 0xFF, 0x7F), "", "invalid block type"},
		{"br_table count past the end", raw(0x0E, 0x10, 0x00), "", "cannot fit"},
		{"simd", raw(0xFD, 0x0C), FeatureSIMD, ""},
		{"v128 block type", raw(0x02, 0x7B), FeatureSIMD, ""},
		{"atomics", raw(0xFE, 0x00), FeatureThreads, ""},
		{"return_call", raw(0x12, 0x00), FeatureTailCall, ""},
		{"return_call_indirect", raw(0x13, 0x00, 0x00), FeatureTailCall, ""},
		{"try", raw(0x06, 0x40), FeatureExceptionHandling, ""},
		{"throw", raw(0x08, 0x00), FeatureExceptionHandling, ""},
		{"try_table", raw(0x1F, 0x40), FeatureExceptionHandling, ""},
		{"gc prefix", raw(0xFB, 0x00), FeatureGC, ""},
		{"call_ref", raw(0x14, 0x00), FeatureGC, ""},
		{"memory index 1", raw(0x3F, 0x01), FeatureMultiMemory, ""},
		{"memarg with memory index", raw(0x28, 0x40, 0x01, 0x00), FeatureMultiMemory, ""},
		{"memory.copy between memories", raw(0xFC, 0x0A, 0x00, 0x01), FeatureMultiMemory, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeAll(tt.code)
			if err == nil {
				t.Fatal("decoded without error")
			}
			if tt.feature != "" {
				var fe *FeatureError
				if !errors.As(err, &fe) || fe.Feature != tt.feature {
					t.Fatalf("got %v, want a %s FeatureError", err, tt.feature)
				}
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want a FormatError containing %q", err, tt.msg)
			}
			if fe.Offset < 100 || fe.Offset > 100+len(tt.code) {
				t.Errorf("offset %d is not inside the body at 100", fe.Offset)
			}
		})
	}
}

// TestInstrReaderFixture decodes every body of the fixture and checks that
// the instructions tile each body exactly.
func TestInstrReaderFixture(t *testing.T) {
	m := mustParse(t, readFixture(t), Limits{})
	for i, c := range m.Code {
		ins, err := decodeAll(c.Body)
		if err != nil {
			t.Fatalf("function %d: %v", i, err)
		}
		checkTiling(t, c.Body, ins)
	}
}

func checkTiling(t *testing.T, body []byte, ins []Instr) {
	t.Helper()
	var joined []byte
	pos := 0
	for _, in := range ins {
		if in.Start != pos || in.End <= in.Start {
			t.Fatalf("instruction %+v does not start at %d", in, pos)
		}
		joined = append(joined, body[in.Start:in.End]...)
		pos = in.End
	}
	if !bytes.Equal(joined, body) {
		t.Fatal("the instructions do not tile the body")
	}
}

func TestStackEffectCoversEveryOpcode(t *testing.T) {
	special := map[byte]bool{OpUnreachable: true, OpBlock: true, OpLoop: true, OpIf: true, OpElse: true,
		OpEnd: true, OpBr: true, OpBrTable: true, OpReturn: true, OpCall: true, OpCallIndirect: true}
	for op := 0; op < 256; op++ {
		// A body of the opcode followed by enough zero bytes for any
		// immediate.
		code := append([]byte{byte(op)}, make([]byte, 16)...)
		if op == int(OpBrTable) || op == int(OpSelectT) {
			continue // their immediates are vectors
		}
		d := NewInstrReader(code, 0)
		var in Instr
		if err := d.Next(&in); err != nil {
			continue // not an instruction we decode
		}
		_, _, ok := StackEffect(&in)
		if ok == special[byte(op)] {
			t.Errorf("opcode 0x%02x: StackEffect ok = %v", op, ok)
		}
	}
	for sub := uint32(0); sub <= SubTableFill; sub++ {
		in := Instr{Op: OpPrefixFC, Sub: sub}
		if _, _, ok := StackEffect(&in); !ok {
			t.Errorf("0xfc %d has no stack effect", sub)
		}
	}
}

// FuzzInstrReader decodes arbitrary bytes: it must never panic, every error
// must be typed, and the decoded instructions must tile the bytes read.
func FuzzInstrReader(f *testing.F) {
	m := mustParse(f, readFixture(f), Limits{})
	for _, c := range m.Code {
		f.Add(c.Body)
	}
	f.Add([]byte{0x0E, 0x02, 0x00, 0x01, 0x00, 0x0B})
	f.Add([]byte{0xFC, 0x0A, 0x00, 0x00, 0x0B})
	f.Add([]byte{0x02, 0x80, 0x80, 0x80, 0x80, 0x00, 0x0B})
	f.Fuzz(func(t *testing.T, body []byte) {
		d := NewInstrReader(body, 0)
		pos := 0
		for {
			var in Instr
			err := d.Next(&in)
			if err == io.EOF {
				if pos != len(body) {
					t.Fatalf("EOF at %d of %d", pos, len(body))
				}
				return
			}
			if err != nil {
				var fe *FormatError
				var xe *FeatureError
				if !errors.As(err, &fe) && !errors.As(err, &xe) {
					t.Fatalf("untyped error %T: %v", err, err)
				}
				return
			}
			if in.Start != pos || in.End <= in.Start || in.End > len(body) {
				t.Fatalf("bad span %d..%d at %d", in.Start, in.End, pos)
			}
			pos = in.End
		}
	})
}
