//go:build !wasip1

package abi

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestFailureCodesDocumented checks that ABI.md's failure-code table lists
// every code of the closed list, and nothing else.
func TestFailureCodesDocumented(t *testing.T) {
	sec := docSection(t, abiDoc(t), "## Failure codes")
	seen := map[string]bool{}
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		code := strings.TrimPrefix(line, "| `")
		code = code[:strings.IndexByte(code, '`')]
		if !FailureCode(code).Known() {
			t.Errorf("ABI.md lists %q, which is not in FailureCodes", code)
		}
		if seen[code] {
			t.Errorf("ABI.md lists %q twice", code)
		}
		seen[code] = true
	}
	for _, c := range FailureCodes() {
		if !seen[string(c)] {
			t.Errorf("ABI.md's failure-code table has no row for %q", c)
		}
		if c == "" || strings.ToLower(string(c)) != string(c) || strings.ContainsAny(string(c), " -") {
			t.Errorf("code %q is not lower-case snake case", c)
		}
	}
	if FailureCode("").Known() || FailureCode("Trap").Known() {
		t.Error("Known accepts a code outside the list")
	}
}

// TestFailureIs checks what errors.Is matches on a *Failure: its code, any
// failure, and context.DeadlineExceeded for a timeout only.
func TestFailureIs(t *testing.T) {
	for _, c := range FailureCodes() {
		err := fmt.Errorf("wrapped: %w", &Failure{Code: c, Message: "m"})
		if !errors.Is(err, &Failure{Code: c}) || !errors.Is(err, &Failure{}) {
			t.Errorf("%s: errors.Is does not match its own code", c)
		}
		if other := FailTrap; c != other && errors.Is(err, &Failure{Code: other}) {
			t.Errorf("%s: errors.Is matches %s", c, other)
		}
		if got, want := errors.Is(err, context.DeadlineExceeded), c == FailTimeout; got != want {
			t.Errorf("%s: errors.Is(err, context.DeadlineExceeded) = %v, want %v", c, got, want)
		}
		if errors.Is(err, context.Canceled) {
			t.Errorf("%s: errors.Is(err, context.Canceled)", c)
		}
		if f, ok := AsFailure(err); !ok || f.Code != c {
			t.Errorf("%s: AsFailure = %v, %v", c, f, ok)
		}
	}
}

// TestFailureCodesClosed checks that every FailureCode constant declared in
// this package is in the closed list: a code added without its place in
// FailureCodes (and so in ABI.md) fails here.
func TestFailureCodesClosed(t *testing.T) {
	fset := token.NewFileSet()
	f, err := goparser.ParseFile(fset, "failure.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "FailureCode" {
				continue
			}
			for i, v := range vs.Values {
				code, _ := strconv.Unquote(v.(*ast.BasicLit).Value)
				n++
				if !FailureCode(code).Known() {
					t.Errorf("%s = %q is not in FailureCodes", vs.Names[i].Name, code)
				}
			}
		}
	}
	if n != len(FailureCodes()) {
		t.Errorf("failure.go declares %d codes, FailureCodes lists %d", n, len(FailureCodes()))
	}
}
