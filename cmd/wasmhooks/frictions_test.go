package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFrictionMessages: issue 15's misleading messages. `version` says more
// than "dev"; `manifest embed` of an input that is not WebAssembly is
// invalid_module (the manifest is fine), naming the file; `chain resolve
// --edit` with bad JSON names --edit alone.
func TestFrictionMessages(t *testing.T) {
	if stdout, _, code := runCLI("", "version"); code != exitOK || stdout == "wasmhooks dev\n" || !strings.HasPrefix(stdout, "wasmhooks ") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}

	dir := t.TempDir()
	notWasm := filepath.Join(dir, "hook.txt")
	man := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(notWasm, []byte("not wasm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(man, []byte(`{"name":"x","version":"1.0.0","points":["message.inbound"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runCLI("", "manifest", "embed", "--manifest", man, "--out", filepath.Join(dir, "out.wasm"), notWasm)
	if code != exitRefused || !strings.Contains(stdout, `"invalid_module"`) || !strings.Contains(stdout, "hook.txt") {
		t.Errorf("manifest embed of a text file: exit %d\n%s", code, stdout)
	}

	stdout, _, code = runCLI("", "chain", "resolve", "--config", filepath.Join(dir, "none.json"), "--id", "x", "--decision", "edit", "--edit", "{bad")
	if code != exitUsage || !strings.Contains(stdout, "--edit: invalid JSON") || strings.Contains(stdout, "--settings") {
		t.Errorf("resolve --edit '{bad': exit %d\n%s", code, stdout)
	}
}

// TestPruneCache: a compilation cache past its bound loses its oldest files
// until it is at three quarters of it; files younger than cacheGrace stay,
// and so do files that are not the runtime's (--cache-dir may name a
// directory that holds others).
func TestPruneCache(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(mine, make([]byte, 4000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(mine, time.Unix(0, 0), time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for i := range 8 {
		p := filepath.Join(dir, "nointerrupt", "wazero-v1", fmt.Sprintf("f%d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
		if i < 7 { // f7 is fresh
			if err := os.Chtimes(p, old, old.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	pruneCache(dir, 500) // 800 bytes: down to 375, so 5 oldest go
	left, _ := filepath.Glob(filepath.Join(dir, "nointerrupt", "wazero-v1", "*"))
	want := []string{"f5", "f6", "f7"}
	var got []string
	for _, p := range left {
		got = append(got, filepath.Base(p))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("left %v, want %v", got, want)
	}
	pruneCache(dir, 500) // under the bound: nothing goes
	if left2, _ := filepath.Glob(filepath.Join(dir, "nointerrupt", "wazero-v1", "*")); len(left2) != 3 {
		t.Errorf("a cache under its bound was pruned: %v", left2)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a file that is not the runtime's was pruned: %v", err)
	}
}
