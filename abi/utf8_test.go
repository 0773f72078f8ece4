package abi

import (
	"testing"
	"unicode/utf8"
)

func TestLostUTF8(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    any
		lost bool
	}{
		{"ascii", map[string]any{"a": "plain"}, false},
		{"U+FFFD itself", map[string]any{"a": "a\ufffdb"}, false},
		{"the escape's six characters", map[string]any{"a": `\ufffd`}, false},
		{"a backslash, then the six characters", map[string]any{"a": `\\ufffd`}, false},
		{"a byte that is not UTF-8", map[string]any{"a": "forb\xffidden"}, true},
		{"after a backslash", map[string]any{"a": "\\\xff"}, true},
		{"in a key", map[string]any{"k\xff": "v"}, true},
		{"deep in a list", map[string]any{"a": []any{"x", map[string]any{"b": "\xc3"}}}, true},
		{"in a []string", map[string]any{"a": []string{"\xed\xa0\x80"}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var o Object
			if err := o.SetMap(tt.v.(map[string]any)); err != nil {
				t.Fatal(err)
			}
			m, err := Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if got := LostUTF8(o.Bytes()); got != tt.lost {
				t.Errorf("SetMap's %s: LostUTF8 %v, want %v", o.Bytes(), got, tt.lost)
			}
			if got := LostUTF8(m); got != tt.lost {
				t.Errorf("Marshal's %s: LostUTF8 %v, want %v", m, got, tt.lost)
			}
		})
	}
}

// FuzzLostUTF8: for any string, as a value and as a key, LostUTF8 of its
// encoding says whether it was valid UTF-8.
func FuzzLostUTF8(f *testing.F) {
	for _, s := range []string{"", "plain", "a\ufffdb", `\ufffd`, `\\ufffd`, "\\\xff", "forb\xffidden", "\xed\xa0\x80", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := !utf8.ValidString(s)
		for _, v := range []map[string]any{{"v": s}, {s: 1}} {
			var o Object
			if err := o.SetMap(v); err != nil {
				t.Fatal(err)
			}
			if got := LostUTF8(o.Bytes()); got != want {
				t.Fatalf("%q encoded %s: LostUTF8 %v, want %v", s, o.Bytes(), got, want)
			}
		}
	})
}
