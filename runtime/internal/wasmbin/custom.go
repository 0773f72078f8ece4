package wasmbin

import (
	"fmt"
	"math"
)

// AppendCustomSection returns a new module: module followed by a custom
// section with the given name and payload. A custom section may appear
// anywhere, so the result is a valid module whenever module is and name is
// valid UTF-8. module itself is not modified and not checked; use
// RemoveCustomSections first to replace rather than add a section.
//
// This is how a hook built with a toolchain that cannot emit custom sections
// (Go) gets its hook_v1.manifest. It panics only if the section would exceed
// the format's 4 GiB section size, which no module accepted by Parse nears.
func AppendCustomSection(module []byte, name string, payload []byte) []byte {
	content := uint64(lebLen(uint64(len(name)))) + uint64(len(name)) + uint64(len(payload))
	if content > math.MaxUint32 {
		panic(fmt.Sprintf("wasmbin: custom section %q of %d bytes exceeds 4 GiB", name, content))
	}
	out := make([]byte, 0, len(module)+1+lebLen(content)+int(content))
	out = append(out, module...)
	out = append(out, byte(SectionCustom))
	out = appendULEB(out, content)
	out = appendULEB(out, uint64(len(name)))
	out = append(out, name...)
	out = append(out, payload...)
	return out
}

// RemoveCustomSections returns a copy of module without the custom sections
// named name (all of them). It checks the header and
// the section framing (ids, sizes, custom section names) but not the
// sections' contents; the error is a *FormatError, or a *FeatureError for a
// component-model binary. module is not modified.
func RemoveCustomSections(module []byte, name string) ([]byte, error) {
	out, _, err := removeCustom(module, name)
	return out, err
}

// StripCustomSections returns a copy of module without any custom section
// (names, DWARF, producers, the manifest). Errors are as for
// RemoveCustomSections.
func StripCustomSections(module []byte) ([]byte, error) {
	out, _, err := removeCustomIf(module, func(string) bool { return true })
	return out, err
}

// SetCustomSection returns a copy of module in which the custom section
// named name holds payload: any existing sections of that name are removed
// and one is appended at the end. Errors are as for RemoveCustomSections.
func SetCustomSection(module []byte, name string, payload []byte) ([]byte, error) {
	out, _, err := removeCustom(module, name)
	if err != nil {
		return nil, err
	}
	return AppendCustomSection(out, name, payload), nil
}

func removeCustom(b []byte, name string) ([]byte, int, error) {
	return removeCustomIf(b, func(n string) bool { return n == name })
}

// removeCustomIf returns b without the custom sections whose name drop
// reports, and how many it removed.
func removeCustomIf(b []byte, drop func(name string) bool) ([]byte, int, error) {
	if err := checkHeader(b); err != nil {
		return nil, 0, err
	}
	out := make([]byte, 0, len(b))
	out = append(out, b[:HeaderSize]...)
	removed := 0
	pos := HeaderSize
	for pos < len(b) {
		start := pos
		id := SectionID(b[pos])
		r := &reader{b: b, pos: pos + 1, end: len(b), section: id.String()}
		size, err := r.u32("section size")
		if err != nil {
			return nil, 0, err
		}
		if uint64(size) > uint64(r.remaining()) {
			return nil, 0, r.errorf(start, "section size %d exceeds the %d bytes left in the module", size, r.remaining())
		}
		end := r.pos + int(size)
		if id == SectionCustom {
			r.end = end
			n, err := r.u32("custom section name length")
			if err != nil {
				return nil, 0, err
			}
			if uint64(n) > uint64(r.remaining()) {
				return nil, 0, r.errorf(start, "custom section name of %d bytes exceeds the section", n)
			}
			if drop(string(b[r.pos : r.pos+int(n)])) {
				removed++
				pos = end
				continue
			}
		}
		out = append(out, b[start:end]...)
		pos = end
	}
	return out, removed, nil
}

func lebLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func appendULEB(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
