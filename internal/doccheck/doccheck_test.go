// Package doccheck keeps the repository's design and security documents true
// to the code: every Go test, fuzz target, benchmark or example they cite
// (`TestFoo`, `chain.TestFoo` or `chain` `TestFoo`, which must be that
// package's, `TestFoo/sub case`, `TestAudit{SQLite,Postgres}`, a
// `go test -run` pattern; in backticks, a fenced or an indented block, or
// plain text, as Go's rule keeps words like Testing out) is declared in some
// *_test.go of the repository, and every exported identifier they cite as
// `pkg.Name` or `pkg.Type.Member`, pkg being one of the module's own packages,
// is declared in that package; and every link to a heading (a document's
// FILE.md#anchor, or a Go comment's "See RATIONALE.md#why-...") names a
// heading that exists. A rename or a removal that leaves a document citing
// what no longer exists fails here, with the citing file and line.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// docs are the documents checked, relative to the repository root.
// core are the documents the project keeps true as a matter of course
// (HELPERS.md, STYLE.md); documents walks for every other markdown file too.
var core = []string{"SECURITY.md", "RATIONALE.md", "BENCHMARKS.md", "README.md", "ABI.md"}

// span is a piece of a document: a code span or fenced block, or one line
// of the text around them, and the line it starts on.
type span struct {
	text string
	line int
	code bool   // a code span or block: `pkg.Name` is read as Go only in these
	qual string // the code span just before a code span, with only blanks between: "`chain` `TestFoo`"
}

// spans cuts a markdown document into its code spans and the lines of text
// between them. A run of n backticks opens a code span that the next run of
// exactly n closes (CommonMark's rule, which also makes a ``` fence and its
// closing fence one span); an unclosed run is literal text. Text outside code
// spans is kept too, a line at a time: an indented code block is text to this
// cut, and a name like TestFoo is a name wherever it stands.
func spans(doc string) []span {
	var out []span
	line := 1
	text := func(s string) {
		for i, l := range strings.Split(s, "\n") {
			if l != "" {
				out = append(out, span{text: l, line: line + i})
			}
		}
		line += strings.Count(s, "\n")
	}
	last := 0
	prev, prevEnd := "", -1 // the last code span and where it ended
	for i := 0; i < len(doc); {
		if doc[i] != '`' {
			i++
			continue
		}
		n := run(doc, i)
		start := i + n
		end := -1
		for j := start; j < len(doc); {
			if doc[j] != '`' {
				j++
				continue
			}
			m := run(doc, j)
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			i = start
			continue
		}
		text(doc[last:i])
		code := doc[start:end]
		sp := span{text: code, line: line, code: true}
		if prevEnd >= 0 && strings.TrimSpace(doc[prevEnd:i]) == "" {
			sp.qual = prev
		}
		prev, prevEnd = code, end+n
		out = append(out, sp)
		line += strings.Count(code, "\n")
		i = end + n
		last = i
	}
	text(doc[last:])
	return out
}

// run returns the length of the run of backticks starting at doc[i].
func run(doc string, i int) int {
	n := 0
	for i+n < len(doc) && doc[i+n] == '`' {
		n++
	}
	return n
}

// braces matches an innermost {a,b,...} of identifier parts, which the
// documents use as shell-style alternatives: `TestAudit{SQLite,Postgres}`.
var braces = regexp.MustCompile(`\{([A-Za-z0-9_]*(?:,[A-Za-z0-9_]*)+)\}`)

// expand returns s with its brace alternatives expanded, shell-style.
func expand(s string) []string {
	loc := braces.FindStringSubmatchIndex(s)
	if loc == nil {
		return []string{s}
	}
	var out []string
	for _, alt := range strings.Split(s[loc[2]:loc[3]], ",") {
		out = append(out, expand(s[:loc[0]]+alt+s[loc[1]:])...)
	}
	return out
}

// testName matches a test, fuzz target, benchmark or example name, with the
// package or other identifier that qualifies it, if any. Go's rule applies:
// what follows the prefix does not start with a lower-case letter (so
// `Testing` is not a test); a bare prefix is not taken as a citation.
var testName = regexp.MustCompile(`(?:([A-Za-z_][A-Za-z0-9_]*)\.)?\b((?:Test|Fuzz|Benchmark|Example)[A-Z0-9_][A-Za-z0-9_]*)`)

// qualified matches an exported identifier qualified by a lower-case name,
// and the exported member that follows it, if any: `runtime.Limits`,
// `runtime.Limits.MaxMemoryPages`, `store.Modules.Put`.
var qualified = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)

// command reports whether a span is a go command line, whose -run and -bench
// arguments are regular expressions rather than names.
func command(s string) bool {
	for _, w := range []string{"go test", "-run", "-bench", "-test.run", "-test.bench"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// citation is one name a document cites, and where.
type citation struct {
	pkg, name string // pkg is "" when the name is not qualified by a module package
	member    string // for qualified identifiers: the member after the name, if any
	where     string // file:line
	anchorL   bool   // in a go command's pattern: preceded by ^
	anchorR   bool   // in a go command's pattern: followed by $
	pattern   bool   // in a go command's pattern
}

// repo is what the check needs to know of the repository's Go code.
type repo struct {
	tests map[string][]string          // test function name -> package directories declaring it
	names map[string][]string          // package name -> directories (non-test files)
	decls map[string]map[string]*decls // directory -> package name -> its exported declarations
}

// decls are a package's top-level names and the members of its types.
type decls struct {
	top     map[string]bool
	members map[string]map[string]bool // type -> fields and methods
	methods map[string]map[string]bool // type -> methods
	embeds  map[string][]string        // type -> types it embeds from the same package
}

// has reports whether the package declares name and, when member is not "",
// a field or method of the type name (its embedded types' included).
func (d *decls) has(name, member string) bool {
	if !d.top[name] {
		// `runtime.Prepare` for the method Runtime.Prepare, as the documents
		// write a package's main type's methods.
		if member == "" {
			for typ, ms := range d.methods {
				if ms[name] && d.top[typ] && token.IsExported(typ) {
					return true
				}
			}
		}
		return false
	}
	if member == "" {
		return true
	}
	seen := map[string]bool{}
	var walk func(string) bool
	walk = func(t string) bool {
		if seen[t] {
			return false
		}
		seen[t] = true
		if d.members[t][member] {
			return true
		}
		for _, e := range d.embeds[t] {
			if walk(e) {
				return true
			}
		}
		return false
	}
	return walk(name)
}

// skipDir reports whether the go command would ignore a directory, or it
// holds only build output.
func skipDir(root, path, name string) bool {
	if path == root {
		return false
	}
	return name == "testdata" || name == "build" && filepath.Dir(path) == root ||
		strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "node_modules" || name == "target"
}

// load parses every Go file of the repository (nested modules included, as
// bench/ is one and BENCHMARKS.md cites it), under any build constraint.
func load(t *testing.T, root string) *repo {
	t.Helper()
	r := &repo{tests: map[string][]string{}, names: map[string][]string{}, decls: map[string]map[string]*decls{}}
	fset := token.NewFileSet()
	for _, rel := range files(t, root, ".go") {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(rel)
		if !strings.HasSuffix(rel, "_test.go") {
			r.add(dir, f)
			continue
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && testName.MatchString(fn.Name.Name) {
				r.tests[fn.Name.Name] = append(r.tests[fn.Name.Name], dir)
			}
		}
	}
	return r
}

// files returns the repository's files whose names end in one of exts,
// relative to root, outside the directories skipDir skips.
func files(t *testing.T, root string, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(root, path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		for _, e := range exts {
			if strings.HasSuffix(path, e) {
				rel, err := filepath.Rel(root, path)
				out = append(out, rel)
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// add records the exported declarations of one non-test file of dir.
func (r *repo) add(dir string, f *ast.File) {
	pkg := f.Name.Name
	if r.decls[dir] == nil {
		r.decls[dir] = map[string]*decls{}
	}
	d := r.decls[dir][pkg]
	if d == nil {
		d = &decls{top: map[string]bool{}, members: map[string]map[string]bool{}, methods: map[string]map[string]bool{}, embeds: map[string][]string{}}
		r.decls[dir][pkg] = d
		r.names[pkg] = append(r.names[pkg], dir)
	}
	member := func(typ, name string) {
		if d.members[typ] == nil {
			d.members[typ] = map[string]bool{}
		}
		d.members[typ][name] = true
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv == nil {
				d.top[decl.Name.Name] = true
			} else if len(decl.Recv.List) == 1 {
				typ := typeName(decl.Recv.List[0].Type)
				member(typ, decl.Name.Name)
				if d.methods[typ] == nil {
					d.methods[typ] = map[string]bool{}
				}
				d.methods[typ][decl.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range decl.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						d.top[n.Name] = true
					}
				case *ast.TypeSpec:
					typ := s.Name.Name
					d.top[typ] = true
					var fields *ast.FieldList
					switch tt := s.Type.(type) {
					case *ast.StructType:
						fields = tt.Fields
					case *ast.InterfaceType:
						fields = tt.Methods
					}
					if fields == nil {
						continue
					}
					for _, fl := range fields.List {
						if len(fl.Names) == 0 {
							if e := typeName(fl.Type); e != "" {
								d.embeds[typ] = append(d.embeds[typ], e)
								member(typ, e)
							}
						}
						for _, n := range fl.Names {
							member(typ, n.Name)
						}
					}
				}
			}
		}
	}
}

// typeName returns the name of a receiver or embedded type: T, *T, T[P] and
// pkg.T all give their last identifier; anything else gives "".
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// citations returns the test names and qualified identifiers a document cites.
func (r *repo) citations(file, doc string) (tests, idents []citation) {
	for _, sp := range spans(doc) {
		cmd := command(sp.text)
		for _, text := range expand(sp.text) {
			for _, m := range testName.FindAllStringSubmatchIndex(text, -1) {
				// A name after a slash is a subtest's or a path's (`TestFoo/TestBar case`,
				// `testdata/fuzz/FuzzX`): the part before the slash is what is checked.
				if m[0] > 0 && text[m[0]-1] == '/' {
					continue
				}
				c := citation{name: text[m[4]:m[5]], where: file + ":" + itoa(sp.line+strings.Count(text[:m[0]], "\n"))}
				if m[2] >= 0 {
					q := text[m[2]:m[3]]
					if len(r.names[q]) == 0 {
						continue // another package's identifier: `testing.BenchmarkResult`
					}
					c.pkg = q
				} else if m[0] == 0 && r.isPackage(sp.qual) {
					c.pkg = sp.qual // "`chain/audit` `TestVerify`"
				}
				if cmd {
					c.pattern = true
					c.anchorL = m[0] > 0 && text[m[0]-1] == '^'
					c.anchorR = m[1] < len(text) && text[m[1]] == '$'
				}
				tests = append(tests, c)
			}
			if !sp.code {
				continue
			}
			for _, m := range qualified.FindAllStringSubmatchIndex(text, -1) {
				pkg, name := text[m[2]:m[3]], text[m[4]:m[5]]
				if m[0] > 0 && (text[m[0]-1] == '.' || isIdent(text[m[0]-1])) {
					continue // a field or method of something else: `x.runtime.Foo`
				}
				if len(r.names[pkg]) == 0 || pkg == "main" || isTestName(name) {
					continue // not the module's, or a test, which the other check takes
				}
				c := citation{pkg: pkg, name: name, where: file + ":" + itoa(sp.line+strings.Count(text[:m[0]], "\n"))}
				if m[6] >= 0 {
					c.member = text[m[6]:m[7]]
				}
				idents = append(idents, c)
			}
		}
	}
	return tests, idents
}

func isIdent(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// isTestName reports whether name is, as a whole, a test function's name.
func isTestName(name string) bool {
	loc := testName.FindStringIndex(name)
	return loc != nil && loc[0] == 0 && loc[1] == len(name)
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// declared reports whether a cited test exists: by its exact name, or for a
// go command's pattern, as the regular expression it is (unanchored, a
// pattern matches every name containing it). A package qualifier restricts
// the search to that package's directories.
func (r *repo) declared(c citation) bool {
	in := func(dirs []string) bool {
		if c.pkg == "" {
			return true
		}
		for _, d := range dirs {
			if r.inPackage(d, c.pkg) {
				return true
			}
		}
		return false
	}
	if dirs, ok := r.tests[c.name]; ok && in(dirs) {
		return true
	}
	if !c.pattern {
		return false
	}
	for name, dirs := range r.tests {
		ok := strings.Contains(name, c.name)
		if c.anchorL {
			ok = strings.HasPrefix(name, c.name)
		}
		if c.anchorR {
			ok = ok && strings.HasSuffix(name, c.name)
		}
		if ok && in(dirs) {
			return true
		}
	}
	return false
}

// isPackage reports whether q names one of the repository's packages: by its
// name (`chain`) or its directory (`chain/audit`).
func (r *repo) isPackage(q string) bool {
	if q == "" {
		return false
	}
	if len(r.names[q]) > 0 {
		return true
	}
	_, ok := r.decls[filepath.FromSlash(q)]
	return ok
}

// inPackage reports whether the test directory dir is package q's: q is its
// path, its package's name, or the name of the directory (tests of an
// external _test package, or a directory of tests only).
func (r *repo) inPackage(dir, q string) bool {
	if dir == filepath.FromSlash(q) || filepath.Base(dir) == q {
		return true
	}
	for _, p := range r.names[q] {
		if dir == p {
			return true
		}
	}
	return false
}

// stdlib returns the exported top-level names of a standard library package,
// for module packages whose name is also one (runtime): `runtime.GC` in a
// document is Go's.
func stdlib(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	//lint:ignore SA1019 tests run on the machine that built them, so the build's GOROOT holds its sources.
	dir := filepath.Join(goruntime.GOROOT(), "src", pkg)
	names := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return names // not a standard library package: the module's alone answers
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil && decl.Name.IsExported() {
					names[decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range decl.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					}
				}
			}
		}
	}
	return names
}

// documents returns the repository's markdown files, relative to root: the
// core ones and every other one outside testdata, build output and vendored
// trees.
func documents(t *testing.T, root string) []string {
	t.Helper()
	out := append([]string(nil), core...)
	for _, rel := range files(t, root, ".md") {
		if !slices.Contains(core, rel) {
			out = append(out, rel)
		}
	}
	return out
}

// missing returns the citations of one document that nothing declares, as
// "file:line: name", in the document's order: tests, then identifiers. std
// reports whether a standard library package of the same name declares an
// identifier (`runtime.GC` is Go's).
func (r *repo) missing(file, doc string, std func(pkg, name string) bool) (tests, idents []string) {
	ts, is := r.citations(file, doc)
	for _, c := range ts {
		if !r.declared(c) {
			name := c.name
			if c.pkg != "" {
				name = c.pkg + "." + name
			}
			tests = append(tests, c.where+": "+name)
		}
	}
	for _, c := range is {
		if r.identDeclared(c) || std(c.pkg, c.name) {
			continue
		}
		name := c.pkg + "." + c.name
		if c.member != "" {
			name += "." + c.member
		}
		idents = append(idents, c.where+": "+name)
	}
	return tests, idents
}

// TestDocsCiteWhatExists fails for every test, fuzz target, benchmark or
// example, and every exported identifier of the module's packages, that a
// markdown document of the repository cites and nothing declares.
func TestDocsCiteWhatExists(t *testing.T) {
	root := testutil.Root(t)
	r := load(t, root)
	stds := map[string]map[string]bool{}
	std := func(pkg, name string) bool {
		if stds[pkg] == nil {
			stds[pkg] = stdlib(t, pkg)
		}
		return stds[pkg][name]
	}
	var tests, idents []string
	for _, file := range documents(t, root) {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		ts, is := r.missing(file, string(b), std)
		tests, idents = append(tests, ts...), append(idents, is...)
	}
	report(t, "tests, fuzz targets, benchmarks or examples that no *_test.go declares", tests)
	report(t, "identifiers that the module's packages do not declare", idents)
}

// identDeclared reports whether some package of the cited name declares the
// identifier (and its member, a field or method of the type, when one is
// cited).
func (r *repo) identDeclared(c citation) bool {
	for _, dir := range r.names[c.pkg] {
		if d := r.decls[dir][c.pkg]; d != nil && d.has(c.name, c.member) {
			return true
		}
	}
	return false
}

func report(t *testing.T, what string, missing []string) {
	t.Helper()
	if len(missing) == 0 {
		return
	}
	t.Errorf("the documents cite %d %s (rename the citation to what exists, or rewrite the sentence):\n\t%s",
		len(missing), what, strings.Join(missing, "\n\t"))
}

// TestMissingFindsEveryForm runs the check over small documents against a
// made-up repository: each form the documents use is read, and only what the
// repository lacks is reported.
func TestMissingFindsEveryForm(t *testing.T) {
	r := &repo{
		tests: map[string][]string{
			"TestFoo": {"chain"}, "TestAuditSQLite": {"store"}, "BenchmarkBar": {"runtime"},
			"FuzzBaz": {"abi"}, "ExampleLoad": {"runtime"},
		},
		names: map[string][]string{},
		decls: map[string]map[string]*decls{},
	}
	for dir, src := range map[string]string{
		"runtime": `package runtime
type Limits struct{ MaxMemoryPages uint32; inner }
type inner struct{ Deep int }
type Runtime struct{}
func (r *Runtime) Prepare() {}
func Load() {}
const MaxModuleBytes = 1`,
		"chain": `package chain
func New() {}`,
		"store": `package store
var ErrGone = 1`,
	} {
		f, err := parser.ParseFile(token.NewFileSet(), dir+".go", src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		r.add(dir, f)
	}
	std := func(pkg, name string) bool { return pkg == "runtime" && name == "GC" }
	for _, tc := range []struct {
		name, doc     string
		tests, idents []string
	}{
		{"declared names", "`TestFoo`, `BenchmarkBar` and `FuzzBaz`, `ExampleLoad`", nil, nil},
		{"undeclared name", "a\nrow `TestGone` here", []string{"d.md:2: TestGone"}, nil},
		{"subtest", "`TestFoo/sub case` and `TestGone/TestFoo`", []string{"d.md:1: TestGone"}, nil},
		{"package-qualified", "`chain.TestFoo`, `runtime.TestFoo`", []string{"d.md:1: runtime.TestFoo"}, nil},
		{"package span before", "`chain` `TestFoo`, `store` `TestAuditSQLite`, `runtime`\n`TestFoo`", []string{"d.md:2: runtime.TestFoo"}, nil},
		{"not a qualifier", "`runtime`, `TestFoo`; `other` `TestFoo`", nil, nil},
		{"braces", "`TestAudit{SQLite,Postgres}`", []string{"d.md:1: TestAuditPostgres"}, nil},
		{"run pattern", "`go test -run 'TestFo|TestAudit' ./x/` `go test -run '^TestFo$'`", []string{"d.md:1: TestFo"}, nil},
		{"bench pattern", "`-bench 'BenchmarkBa'`, `-bench 'BenchmarkB$'`", []string{"d.md:1: BenchmarkB"}, nil},
		{"fenced block", "```\n$ go test -bench BenchmarkBar\n$ go test -run TestNope\n```", []string{"d.md:3: TestNope"}, nil},
		{"indented block", "text\n\n    go test -run TestNope ./x/", []string{"d.md:3: TestNope"}, nil},
		{"wrapped span", "see `go test\n-run TestNope`", []string{"d.md:2: TestNope"}, nil},
		{"prose", "Tests and Testing, Examples, a Benchmark; `testing.BenchmarkResult`, `testdata/fuzz/FuzzXxx`", nil, nil},
		{"identifiers", "`runtime.Limits`, `runtime.Limits.MaxMemoryPages`, `runtime.Limits.Deep`, `runtime.Prepare`, `runtime.Load`, `runtime.MaxModuleBytes`, `store.ErrGone`, `runtime.GC`, `chain.New`", nil, nil},
		{"undeclared identifiers", "`runtime.Limits.Nope`, `runtime.AsFailure`,\n`chain.Gone`, `runtime.MaxMemoryPages`", nil,
			[]string{"d.md:1: runtime.Limits.Nope", "d.md:1: runtime.AsFailure", "d.md:2: chain.Gone", "d.md:2: runtime.MaxMemoryPages"}},
		{"identifiers in prose are not read", "runtime.Gone, and `other.Gone`, `x.runtime.Gone`", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tests, idents := r.missing("d.md", tc.doc, std)
			if !slices.Equal(tests, tc.tests) || !slices.Equal(idents, tc.idents) {
				t.Errorf("missing(%q):\n tests  %q, want %q\n idents %q, want %q", tc.doc, tests, tc.tests, idents, tc.idents)
			}
		})
	}
}

// heading is a markdown ATX heading line.
var heading = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$`)

// anchorRef matches a link to a heading: FILE.md#anchor (in a markdown file
// or a Go comment) or (#anchor) in a markdown link to the same file.
var anchorRef = regexp.MustCompile(`([A-Za-z0-9_./-]*\.md)#([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)|\]\(#([A-Za-z0-9_-]+)\)`)

// slugs returns the anchors GitHub gives a markdown document's headings:
// lower case, punctuation but - and _ dropped, spaces made -, and a repeated
// slug numbered -1, -2...
func slugs(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
		}
		m := heading.FindStringSubmatch(l)
		if inFence || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		s := b.String()
		if n := seen[s]; n > 0 {
			out[s+"-"+itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestDocAnchorsExist fails for every link to a heading (FILE.md#anchor in a
// markdown file or a Go comment, or (#anchor) within a document) whose
// document has no such heading: a heading renamed leaves its citations in
// the code (`// See RATIONALE.md#why-...`) pointing nowhere.
func TestDocAnchorsExist(t *testing.T) {
	root := testutil.Root(t)
	anchors := map[string]map[string]bool{} // path relative to root -> slugs
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := anchors[rel]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			anchors[rel] = nil
			return nil
		}
		anchors[rel] = slugs(string(b))
		return anchors[rel]
	}
	var missing []string
	for _, rel := range files(t, root, ".md", ".go") {
		if filepath.Dir(rel) == filepath.Join("internal", "doccheck") {
			continue // this test's own comments and cases
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range anchorRef.FindAllStringSubmatchIndex(text, -1) {
			var doc, anchor string
			if m[2] >= 0 {
				doc, anchor = text[m[2]:m[3]], strings.TrimRight(text[m[4]:m[5]], ".")
				if strings.HasSuffix(anchor, "-") {
					continue // a pattern: "RATIONALE.md#why-..."
				}
				// Relative to the citing file, else to the root (a Go
				// comment's "RATIONALE.md#...").
				doc = filepath.Join(filepath.Dir(rel), doc)
				if anchorsOf(doc) == nil {
					doc = filepath.Clean(text[m[2]:m[3]])
				}
			} else {
				if !strings.HasSuffix(rel, ".md") {
					continue
				}
				doc, anchor = rel, text[m[6]:m[7]]
			}
			where := rel + ":" + itoa(1+strings.Count(text[:m[0]], "\n")) + ": "
			switch a := anchorsOf(doc); {
			case a == nil:
				missing = append(missing, where+doc+" (no such document)")
			case !a[strings.ToLower(anchor)]:
				missing = append(missing, where+doc+"#"+anchor)
			}
		}
	}
	report(t, "links to headings that do not exist", missing)
}

func TestSlugs(t *testing.T) {
	got := slugs("# SECURITY: the threat model\n## Why fuel, and how much?\n### Short-circuit (since 1.2)\n" +
		"## `Load` and `Invoke`\n## Seed 002's guardrail_words\n```\n# not a heading\n```\n## Why fuel, and how much?\n")
	want := []string{"security-the-threat-model", "why-fuel-and-how-much", "short-circuit-since-12",
		"load-and-invoke", "seed-002s-guardrail_words", "why-fuel-and-how-much-1"}
	for _, w := range want {
		if !got[w] {
			t.Errorf("slugs lack %q: %v", w, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("slugs = %v, want %v", got, want)
	}
}
