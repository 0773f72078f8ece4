package abi

import (
	"fmt"
	"strings"
	"testing"
)

// bigObject returns an object of n keys k0..k(n-1), then extra members.
func bigObject(n int, extra string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(extra)
	b.WriteString("}")
	return b.String()
}

func TestLexerSkipDuplicates(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		dup      bool
	}{
		{"small", `{"a":1,"b":2}`, false},
		{"small duplicate", `{"a":1,"b":2,"a":3}`, true},
		{"escaped duplicate", `{"a":1,"\u0061":2}`, true},
		{"same bytes, different escapes", `{"\u00e9":1,"é":2}`, true},
		{"nested objects do not share keys", `{"a":{"a":1},"b":{"a":2}}`, false},
		{"a key after a nested object", `{"a":{"b":1},"b":2}`, false},
		{"large, unique", bigObject(3*keySetLinear, `"x":0`), false},
		{"large, duplicate of an early key", bigObject(3*keySetLinear, `"k3":0`), true},
		{"large, escaped duplicate", bigObject(3*keySetLinear, `"k\u0031":0`), true},
		{"large, duplicate at the switch", bigObject(keySetLinear, `"k0":0`), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, perr := ParseJSON([]byte(tt.in), JSONLimits{})
			if (perr != nil) != tt.dup {
				t.Fatalf("ParseJSON error %v, want a duplicate: %t", perr, tt.dup)
			}
			checkSkip(t, []byte(tt.in), perr)
		})
	}
}

func TestLexerSkipAllocatesNothing(t *testing.T) {
	doc := []byte(`{"abi":1,"point":"message.outbound","context":{"outgoing":"h\u00e9llo","n":[1,2.5,-3e2,true,null]},"settings":{},"meta":{"hook":"h"}}`)
	var l Lexer
	keys := make([]Span, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		l.Reset(doc, 0)
		l.KeySpace(keys)
		if !l.Skip(0) {
			t.Fatal(l.Err())
		}
	})
	if allocs != 0 {
		t.Errorf("Skip allocates %v times, want 0", allocs)
	}
}

func TestLexerText(t *testing.T) {
	doc := []byte(`["plain","esc\\aped \u00e9 \ud83d\ude00"]`)
	for _, alias := range []bool{false, true} {
		var l Lexer
		l.Reset(doc, 0)
		l.AliasStrings(alias)
		l.Consume('[')
		a, _ := l.String()
		l.Consume(',')
		b, _ := l.String()
		if got := l.Text(a); got != "plain" || a.Escaped() || a.Len() != 5 {
			t.Errorf("alias %t: Text = %q, escaped %t, len %d", alias, got, a.Escaped(), a.Len())
		}
		want := "esc\\aped é 😀"
		if got := l.Text(b); got != want || !b.Escaped() || b.Len() != len(want) {
			t.Errorf("alias %t: Text = %q, escaped %t, len %d; want %q", alias, got, b.Escaped(), b.Len(), want)
		}
		if !l.Equal(b, want) || l.Equal(b, "esc") || !l.Equal(a, "plain") {
			t.Errorf("alias %t: Equal is wrong", alias)
		}
		// Without aliasing, Text is a copy the document does not change.
		if !alias {
			s := l.Text(a)
			doc[2] = 'P'
			if s != "plain" {
				t.Errorf("Text without aliasing shares the document: %q", s)
			}
			doc[2] = 'p'
		}
	}
}
