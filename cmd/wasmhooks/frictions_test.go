package main

import (
	"bytes"
	"context"
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
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"version"}, nil, &stdout, &stderr); code != exitOK || stdout.String() == "wasmhooks dev\n" || !strings.HasPrefix(stdout.String(), "wasmhooks ") {
		t.Errorf("version: exit %d, %q", code, stdout.String())
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
	stdout.Reset()
	code := run(ctx, []string{"manifest", "embed", "--manifest", man, "--out", filepath.Join(dir, "out.wasm"), notWasm}, nil, &stdout, &stderr)
	if code != exitRefused || !strings.Contains(stdout.String(), `"invalid_module"`) || !strings.Contains(stdout.String(), "hook.txt") {
		t.Errorf("manifest embed of a text file: exit %d\n%s", code, stdout.String())
	}

	stdout.Reset()
	code = run(ctx, []string{"chain", "resolve", "--config", filepath.Join(dir, "none.json"), "--id", "x", "--decision", "edit", "--edit", "{bad"}, nil, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stdout.String(), "--edit: invalid JSON") || strings.Contains(stdout.String(), "--settings") {
		t.Errorf("resolve --edit '{bad': exit %d\n%s", code, stdout.String())
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
