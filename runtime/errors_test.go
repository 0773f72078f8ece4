package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TestCode maps each kind of error the runtime returns, real ones where
// they are cheap to provoke, to its code, and checks that every code Code
// returns is in abi's closed list.
func TestCode(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	_, badModule := r.Load(context.Background(), []byte("\x00asm\x01\x00\x00\x00\x05"))
	_, noTenant := r.Invoke(context.Background(), m, runtime.Request{Point: "message.outbound"})
	_, tooBig := r.Invoke(context.Background(), m, runtime.Request{Tenant: "t",
		Context: map[string]any{"text": strings.Repeat("x", 1<<10)}, Limits: runtime.Limits{MaxInputBytes: 64}})
	_, trap := runScript(t, r, m, echoHost(), runtime.Limits{}, "U")
	_, timeout := runScript(t, r, m, echoHost(), runtime.Limits{Timeout: 50 * time.Millisecond}, "L")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, abandoned := r.Invoke(ctx, m, runtime.Request{Tenant: "t", Context: map[string]any{"s": "@@L"}})
	closed := newRuntime(t, runtime.Config{})
	cm := load(t, closed, scripted(t))
	_ = closed.Close(context.Background())
	_, afterClose := closed.Invoke(context.Background(), cm, runtime.Request{Tenant: "t"})

	tests := []struct {
		name string
		err  error
		want abi.FailureCode
	}{
		{"nil", nil, ""},
		{"trap", trap, abi.FailTrap},
		{"timeout", timeout, abi.FailTimeout},
		{"failure wrapped", fmt.Errorf("step: %w", &abi.Failure{Code: abi.FailFuelExhausted}), abi.FailFuelExhausted},
		{"failure of an undeclared code", &abi.Failure{Code: "made_up"}, abi.FailInternal},
		{"input over the limit", tooBig, abi.FailLimitExceeded},
		{"limit error", &runtime.LimitError{Limit: "x"}, abi.FailLimitExceeded},
		{"invalid module", badModule, abi.FailInvalidModule},
		{"no tenant", noTenant, abi.FailInvalidRequest},
		{"closed", afterClose, abi.FailRuntimeClosed},
		{"pool exhausted", fmt.Errorf("waiting: %w", runtime.ErrPoolExhausted), abi.FailPoolExhausted},
		{"abandoned", abandoned, abi.FailAbandoned},
		{"unknown error", errors.New("disk on fire"), abi.FailInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != "" && tt.err == nil {
				t.Fatal("no error to classify")
			}
			got := runtime.Code(tt.err)
			if got != tt.want {
				t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.want)
			}
			if tt.err != nil && !got.Known() {
				t.Errorf("Code(%v) = %q, not in abi.FailureCodes", tt.err, got)
			}
			if is := errors.Is(tt.err, context.DeadlineExceeded); is != (tt.want == abi.FailTimeout) {
				t.Errorf("errors.Is(%v, context.DeadlineExceeded) = %v", tt.err, is)
			}
		})
	}
}

// TestNoUndeclaredCodes reads the runtime's sources: no failure code is made
// from a string literal or converted from a string; every code the runtime
// names is an abi constant, so it is in the closed list (TestCode,
// abi.TestFailureCodesDocumented).
func TestNoUndeclaredCodes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr: // abi.FailureCode(x)
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "FailureCode" {
					t.Errorf("%s: a failure code converted from a string", fset.Position(n.Pos()))
				}
			case *ast.KeyValueExpr: // abi.Failure{Code: "..."}
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Code" {
					if lit, ok := n.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						t.Errorf("%s: failure code %s is a literal", fset.Position(n.Pos()), lit.Value)
					}
				}
			case *ast.FuncDecl:
				if n.Name.Name != "Code" || n.Recv != nil {
					return true
				}
				ast.Inspect(n.Body, func(n ast.Node) bool {
					ret, ok := n.(*ast.ReturnStmt)
					if !ok {
						return true
					}
					for _, e := range ret.Results {
						if lit, ok := e.(*ast.BasicLit); ok {
							if v, _ := strconv.Unquote(lit.Value); v != "" && !abi.FailureCode(v).Known() {
								t.Errorf("%s: Code returns %s, not in abi.FailureCodes", fset.Position(lit.Pos()), lit.Value)
							} else if v != "" {
								t.Errorf("%s: Code returns the literal %s, not the abi constant", fset.Position(lit.Pos()), lit.Value)
							}
						}
					}
					return true
				})
			}
			return true
		})
	}
}

func TestInvalidRequests(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, scripted(t))
	tests := []struct {
		name string
		req  runtime.Request
	}{
		{"no tenant", runtime.Request{}},
		{"unknown point", runtime.Request{Tenant: "t", Point: "message.sideways"}},
		{"memory over the ceiling", runtime.Request{Tenant: "t", Limits: runtime.Limits{MemoryPages: 100000}}},
		{"memory under the module's minimum", runtime.Request{Tenant: "t", Limits: runtime.Limits{MemoryPages: 2}}},
		{"input too large", runtime.Request{Tenant: "t", Context: map[string]any{"s": string(make([]byte, 100))}, Limits: runtime.Limits{MaxInputBytes: 50}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Invoke(context.Background(), m, tt.req)
			if !errors.Is(err, runtime.ErrInvalidRequest) {
				t.Fatalf("err = %v, want ErrInvalidRequest", err)
			}
		})
	}
}
