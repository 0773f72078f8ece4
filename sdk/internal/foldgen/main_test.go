package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestTablesCurrent fails while a checked-in table differs from what
// foldgen writes now (a Go upgrade moved Unicode, or a hand edit): run go
// generate ./sdk/internal/foldgen.
func TestTablesCurrent(t *testing.T) {
	fs, err := files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		have, err := os.ReadFile(filepath.Join("..", "..", "..", f.path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, f.text) {
			t.Errorf("%s is stale: run go generate ./sdk/internal/foldgen", f.path)
		}
	}
}

// TestTableIsSimpleFold: the table reproduces unicode.SimpleFold for
// every rune, and its orbits fit the engines' classes (files checks both).
func TestTableIsSimpleFold(t *testing.T) {
	tab := ranges()
	if err := check(tab); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ r, want rune }{{'k', 0x212a}, {0x212a, 'K'}, {'s', 0x17f}, {0x17f, 'S'}, {'e', 'E'}, {0xdf, 0x1e9e}, {0x3c3, 0x3a3}, {0x3c2, 0x3c3}, {'1', '1'}} {
		if got := next(tab, c.r); got != c.want {
			t.Errorf("next(%U) = %U, want %U", c.r, got, c.want)
		}
	}
}
