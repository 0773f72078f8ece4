package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMain points the default state file and host key at a temporary
// directory, so that no test writes the user's configuration directory and
// tests that do not name a state file share none with other test runs.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasmhooks-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv(stateEnv, filepath.Join(dir, "state.db"))
	if os.Getenv(keyFileEnv) == "" {
		os.Setenv(keyFileEnv, filepath.Join(dir, "host.key"))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
