//go:build !wasip1

package abi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// abiDoc returns the repository's ABI.md.
func abiDoc(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "ABI.md"))
	if err != nil {
		t.Skipf("no ABI.md: %v", err)
	}
	return string(raw)
}

// docSection returns what follows the line heading in doc, up to the next
// "## " heading.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("ABI.md has no heading %q", heading)
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// TestStatusTable holds the statuses to ABI.md's table (status, name, code,
// meaning), row by row and in order.
func TestStatusTable(t *testing.T) {
	var rows [][]string
	for _, line := range strings.Split(docSection(t, abiDoc(t), "### Status codes (normative)"), "\n") {
		if cells := strings.Split(line, " | "); len(cells) == 4 && strings.HasPrefix(line, "| ") {
			if _, err := strconv.ParseUint(cells[0][2:], 10, 32); err == nil {
				rows = append(rows, cells)
			}
		}
	}
	if got, want := len(Statuses()), len(rows); got != want || want == 0 {
		t.Fatalf("Statuses() has %d entries, ABI.md's table %d", got, want)
	}
	for i, row := range rows {
		t.Run(row[1], func(t *testing.T) {
			s := Status(i)
			if Statuses()[i] != s {
				t.Errorf("Statuses()[%d] = %d, want %d", i, Statuses()[i], s)
			}
			if n, _ := strconv.ParseUint(row[0][2:], 10, 32); Status(n) != s {
				t.Errorf("ABI.md's row %d is status %d", i, n)
			}
			if !s.Known() {
				t.Errorf("%d.Known() = false", s)
			}
			if got := s.String(); got != row[1] {
				t.Errorf("String() = %q, ABI.md says %q", got, row[1])
			}
			code := strings.ToLower(row[1])
			if got := s.Code(); got != code || "`"+code+"`" != row[2] {
				t.Errorf("Code() = %q, want %q, and ABI.md says %s", got, code, row[2])
			}
			back, ok := StatusFromCode(code)
			if !ok || back != s {
				t.Errorf("StatusFromCode(%q) = %d, %t; want %d, true", code, back, ok, s)
			}
			if strings.TrimSuffix(row[3], " |") == "" {
				t.Error("ABI.md gives no meaning")
			}
		})
	}
	// The named constants are the wire values; renumbering one breaks
	// every hook ever built.
	consts := []Status{
		StatusOK, StatusUnknownCapability, StatusInvalidRequest, StatusDenied,
		StatusInsufficientCredit, StatusCapabilityFailed, StatusResultTooLarge,
		StatusRequestTooLarge, StatusBufferTooSmall, StatusNoPending,
		StatusQuotaExceeded, StatusNotInInvocation, StatusRateLimited,
	}
	for i, s := range consts {
		if uint32(s) != uint32(i) || s.String() != rows[i][1] {
			t.Errorf("constant %d is %d %s, ABI.md says %d %s", i, uint32(s), s, i, rows[i][1])
		}
	}
}

// TestABIDoc checks that the repository's ABI.md says what this package
// does: the WASI set, the hook points and their example
// contexts, the limits, the seed-003 normalisation examples, and that the
// WAT hook of the walkthrough is a valid hook_v1 module.
func TestABIDoc(t *testing.T) {
	doc := abiDoc(t)
	section := func(heading string) string { return docSection(t, doc, heading) }
	versions := section("## Versions")

	t.Run("WASI", func(t *testing.T) {
		wasi := section("## WASI")
		for name, sig := range WASIFunctions() {
			if row := fmt.Sprintf("| `%s` | `%s` |", name, sig); !strings.Contains(wasi, row) {
				t.Errorf("the WASI table has no row starting %q", row)
			}
			if !strings.Contains(versions, "`"+name+"`") {
				t.Errorf("the version table does not list %s", name)
			}
		}
		if n := strings.Count(wasi, "\n| `"); n != len(wasiFunctions) {
			t.Errorf("the WASI table has %d rows, WASIFunctions %d functions", n, len(wasiFunctions))
		}
	})
	t.Run("points", func(t *testing.T) {
		points := section("## Hook points")
		quote := func(fields []string) string {
			q := make([]string, len(fields))
			for i, f := range fields {
				q[i] = "`" + f + "`"
			}
			return strings.Join(q, ", ")
		}
		for _, p := range Points() {
			primary := "none"
			if p.Primary != "" {
				primary = "`" + p.Primary + "`"
			}
			changeable := "none"
			if len(p.Changeable) > 0 {
				changeable = quote(p.Changeable)
			}
			phases := "all"
			if p.Phases != nil {
				phases = strings.Join(p.Phases, ", ")
			}
			row := fmt.Sprintf("| `%s` | %s | %s | %s | %s | %s |", p.Name, p.Description, quote(p.Fields), changeable, primary, phases)
			if !strings.Contains(points, row) {
				t.Errorf("the points table has no row %q", row)
			}
			example := fmt.Sprintf("### `%s`\n\n```json\n%s\n```", p.Name, pointExamples[p.Name])
			if !strings.Contains(points, example) {
				t.Errorf("ABI.md does not show the example context of %s:\n%s", p.Name, example)
			}
			if !strings.Contains(versions, "`"+p.Name+"`") {
				t.Errorf("the version table does not list %s", p.Name)
			}
		}
	})
	t.Run("limits", func(t *testing.T) {
		for _, want := range []string{
			"| document size | 1,048,576 bytes (1 MiB) |",
			fmt.Sprintf("| nesting depth (arrays and objects) | %d |", DefaultMaxJSONDepth),
			fmt.Sprintf("| length of one number literal | %d bytes |", maxNumberBytes),
			fmt.Sprintf("2^53 − 1 = %d", int64(maxSafeInteger)),
			"| manifest size and depth | 65,536 bytes, 32 |",
			abiMDManifest,
		} {
			if !strings.Contains(doc, want) {
				t.Errorf("ABI.md does not contain %q", want)
			}
		}
		if DefaultMaxJSONBytes != 1048576 || MaxManifestBytes != 65536 {
			t.Error("a limit changed: update ABI.md and this test")
		}
	})
	t.Run("seed 003 examples", func(t *testing.T) {
		inbound, _ := LookupPoint("message.inbound")
		rows := regexp.MustCompile("(?m)^\\| `(\\{\"abort\"[^`]*)` \\| `([^`]*)` \\|$").FindAllStringSubmatch(doc, -1)
		if len(rows) != 4 {
			t.Fatalf("found %d seed-003 example rows, want 4", len(rows))
		}
		for _, row := range rows {
			d, err := DecodeDecision([]byte(row[1]), inbound, JSONLimits{})
			if err != nil {
				t.Errorf("%s: %v", row[1], err)
				continue
			}
			if enc, _ := d.Encode(); string(enc) != row[2] {
				t.Errorf("%s normalises to %s, ABI.md says %s", row[1], enc, row[2])
			}
		}
	})
	t.Run("WAT hook", func(t *testing.T) {
		m := regexp.MustCompile("(?s)```wat\n(\\(module\n.*?)```").FindStringSubmatch(doc)
		if m == nil {
			t.Fatal("ABI.md has no complete WAT module")
		}
		wat2wasm, err := exec.LookPath("wat2wasm")
		if err != nil {
			t.Skip("wat2wasm is not installed")
		}
		dir := t.TempDir()
		src, bin := filepath.Join(dir, "hook.wat"), filepath.Join(dir, "hook.wasm")
		if err := os.WriteFile(src, []byte(m[1]), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(wat2wasm, src, "-o", bin).CombinedOutput(); err != nil {
			t.Fatalf("wat2wasm: %v\n%s", err, out)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		mod, err := parseWasm(data)
		if err != nil {
			t.Fatal(err)
		}
		if len(mod.imports) != 1 || mod.imports[0] != (wasmImport{ImportModule, HostCallImport, 0, HostCallSignature}) {
			t.Errorf("imports %+v, want only %s.%s %s", mod.imports, ImportModule, HostCallImport, HostCallSignature)
		}
		var memory, handle bool
		for _, e := range mod.exports {
			switch {
			case e.name == MemoryExport && e.kind == 2:
				memory = true
			case e.name == HandleExport && e.kind == 0 && e.sig == HandleSignature:
				handle = true
			}
		}
		if !memory || !handle {
			t.Errorf("exports %+v, want memory and %s %s", mod.exports, HandleExport, HandleSignature)
		}
	})
}
