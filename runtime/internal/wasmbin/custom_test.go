package wasmbin

import (
	"bytes"
	"errors"
	"testing"
)

func TestAppendCustomSection(t *testing.T) {
	var b Builder
	b.Memory(MemoryType{Min: 1})
	b.Export("memory", KindMemory, 0)
	orig := b.Bytes() // no custom sections, like Go's output before embedding
	origCopy := bytes.Clone(orig)
	before := mustParse(t, orig, Limits{})

	out := AppendCustomSection(orig, ManifestSection, manifest)
	if !bytes.Equal(orig, origCopy) {
		t.Fatal("AppendCustomSection modified its input")
	}
	if !bytes.HasPrefix(out, orig) {
		t.Fatal("AppendCustomSection changed the existing sections")
	}
	m := mustParse(t, out, Limits{})
	if got, ok := m.CustomSection(ManifestSection); !ok || !bytes.Equal(got, manifest) {
		t.Fatalf("manifest = %q, %v", got, ok)
	}
	if len(m.Sections) != len(before.Sections)+1 {
		t.Fatalf("%d sections, want %d", len(m.Sections), len(before.Sections)+1)
	}
	for i, s := range before.Sections {
		g := m.Sections[i]
		if g.ID != s.ID || g.Offset != s.Offset || g.Size != s.Size {
			t.Errorf("section %d moved: %+v -> %+v", i, s, g)
		}
	}
	last := m.Sections[len(m.Sections)-1]
	if last.ID != SectionCustom || last.Name != ManifestSection || last.Offset != len(orig) {
		t.Errorf("appended section = %+v", last)
	}

	// Appending a second manifest is refused by Parse; SetCustomSection replaces it.
	twice := AppendCustomSection(out, ManifestSection, []byte(`{}`))
	if _, err := Parse(twice, Limits{}); err == nil {
		t.Error("two manifests accepted")
	}
	replaced, err := SetCustomSection(out, ManifestSection, []byte(`{"name":"v2"}`))
	if err != nil {
		t.Fatal(err)
	}
	m = mustParse(t, replaced, Limits{})
	if got, _ := m.CustomSection(ManifestSection); string(got) != `{"name":"v2"}` || len(m.Customs) != 1 {
		t.Errorf("after Set: %q, %d customs", got, len(m.Customs))
	}

	// Remove restores the original bytes exactly.
	removed, err := RemoveCustomSections(out, ManifestSection)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(removed, orig) {
		t.Errorf("Remove(Append(m)) != m")
	}

	// Large payloads (a multi-byte size field) and empty ones.
	for _, n := range []int{0, 1, 127, 128, 16384, 1 << 20} {
		payload := bytes.Repeat([]byte{'x'}, n)
		m := mustParse(t, AppendCustomSection(orig, "big", payload), Limits{})
		if got, _ := m.CustomSection("big"); len(got) != n {
			t.Errorf("payload of %d bytes read back as %d", n, len(got))
		}
	}
}

func TestRemoveCustomSections(t *testing.T) {
	in := mod(custom("a", []byte{1}), typeVoid, custom("b", nil), oneFunc, custom("a", []byte{2, 3}), oneBody, custom("aa", nil), custom("", []byte{4}))
	out, err := RemoveCustomSections(in, "a")
	if err != nil {
		t.Fatal(err)
	}
	m := mustParse(t, out, Limits{})
	var names []string
	for _, c := range m.Customs {
		names = append(names, c.Name)
	}
	if len(names) != 3 || names[0] != "b" || names[1] != "aa" || names[2] != "" {
		t.Errorf("customs left: %q", names)
	}
	if len(m.Functions) != 1 || len(m.Code) != 1 {
		t.Error("non-custom sections lost")
	}
	// Nothing to remove: an equal copy, not the same array.
	same, err := RemoveCustomSections(in, "zzz")
	if err != nil || !bytes.Equal(same, in) || &same[0] == &in[0] {
		t.Errorf("no-op remove: %v", err)
	}
	// The real manifest of the hook module goes; its other custom section stays.
	h := hookModule()
	out, err = RemoveCustomSections(h, ManifestSection)
	if err != nil {
		t.Fatal(err)
	}
	m = mustParse(t, out, Limits{})
	if _, ok := m.CustomSection(ManifestSection); ok || len(m.Customs) != 1 || m.Customs[0].Name != "name" {
		t.Errorf("customs after remove: %+v", m.Customs)
	}

	bad := []struct {
		name string
		in   []byte
	}{
		{"bad magic", []byte("not wasm")},
		{"truncated", []byte{0, 'a', 's'}},
		{"section past end", mod(raw(0x01, 0x09, 0x00))},
		{"size LEB too long", mod(raw(0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00))},
		{"custom name past section", mod(raw(0x00, 0x02, 0x05, 'a'))},
		{"custom without name", mod(raw(0x00, 0x00))},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RemoveCustomSections(tt.in, "a")
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("got %v, want *FormatError", err)
			}
			t.Log(err)
			if _, err := SetCustomSection(tt.in, "a", nil); err == nil {
				t.Error("SetCustomSection accepted it")
			}
		})
	}
}

func TestBuilderRoundTrip(t *testing.T) {
	// The builder's output for the hook parses back to what was put in, and
	// sections come out in the canonical order.
	m := mustParse(t, hookModule(), Limits{})
	if len(m.Types) != 5 || len(m.Exports) != 3 {
		t.Fatalf("got %d types, %d exports", len(m.Types), len(m.Exports))
	}
	var b Builder
	f := b.Func(voidType, nil, nil)
	b.Start(f)
	m = mustParse(t, b.Bytes(), Limits{})
	if m.Start == nil || *m.Start != f || m.StartIsImport() {
		t.Errorf("Start = %v", m.Start)
	}
	defer func() {
		if recover() == nil {
			t.Error("ImportFunc after Func did not panic")
		}
	}()
	b.ImportFunc("m", "late", voidType)
}

func TestStripCustomSections(t *testing.T) {
	in := hookModule() // a manifest and a name section, among the others
	in = AppendCustomSection(in, ".debug_info", []byte{1, 2, 3})
	before := mustParse(t, in, Limits{})
	out, err := StripCustomSections(in)
	if err != nil {
		t.Fatal(err)
	}
	m := mustParse(t, out, Limits{})
	if len(m.Customs) != 0 {
		t.Errorf("%d custom sections left", len(m.Customs))
	}
	if want := len(before.Sections) - len(before.Customs); len(m.Sections) != want {
		t.Errorf("%d sections, want %d", len(m.Sections), want)
	}
	again, err := StripCustomSections(out)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("stripping a stripped module changed it (%v)", err)
	}
	if _, err := StripCustomSections([]byte("\x00asm\x01\x00\x00\x00\x00\x05")); err == nil {
		t.Error("a section size past the end was accepted")
	}
}
