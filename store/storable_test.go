package store

import "testing"

func TestStorable(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{"", true},
		{"acme", true},
		{"a\u00e9\U0001F600", true},
		{"a\x00b", false},
		{"a\xffb", false},
		{"\xed\xa0\x80", false}, // a surrogate's bytes
	} {
		if got := Storable(tt.s); got != tt.want {
			t.Errorf("Storable(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}
