package approvaltest

import (
	"encoding/json"
	"os"
	"testing"
)

// TamperFile rewrites the approval file at path as someone who can write the
// approvals directory but holds no key would: with raw or, when edit is not
// nil, with the file's JSON object changed by edit. It returns the bytes it
// wrote.
func TamperFile(t testing.TB, path, raw string, edit func(m map[string]any)) []byte {
	t.Helper()
	b := []byte(raw)
	if edit != nil {
		orig, _ := os.ReadFile(path)
		var m map[string]any
		if err := json.Unmarshal(orig, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, _ = json.Marshal(m)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// EditState returns an edit for TamperFile that changes the approval's
// sealed run state (the file's "state" object) with f.
func EditState(f func(st map[string]any)) func(m map[string]any) {
	return func(m map[string]any) { f(m["state"].(map[string]any)) }
}
