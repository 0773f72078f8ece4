//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// Threat: CLI inputs that make the host misbehave rather than refuse (issue
// 10, sections 6 and 9): a module path naming /dev/zero or a FIFO read until
// memory runs out or forever, and --credit -5 silently disabling billing.
// Defence: every file is read through runtime.ReadModuleFile or
// runtime.ReadFileLimit (regular files only, bounded), and --credit refuses
// a negative balance as a usage error.
func TestCLIInputsRefused(t *testing.T) {
	root := testutil.Root(t)
	shapes := filepath.Join(root, "testdata", "guests", "shapes.wasm")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "hook.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	devZero := "/dev/zero"
	if _, err := os.Stat(devZero); err != nil {
		t.Skip("no /dev/zero here")
	}
	man := writeTemp(t, "man.json", `{"name":"x"}`)
	zeroModule := writeTemp(t, "zero.json", `{"modules":{"z":"/dev/zero"},"bindings":[{"name":"z","module":"z","point":"message.outbound","phase":"guard"}]}`)
	tests := []struct {
		name string
		args []string
		exit int
		say  string // in stdout or stderr
	}{
		{"run /dev/zero", []string{"run", "--cache-dir=", "--hook", devZero}, exitRefused, "not a regular file"},
		{"run fifo", []string{"run", "--cache-dir=", "--hook", fifo}, exitRefused, "named pipe"},
		{"run directory", []string{"run", "--cache-dir=", "--hook", dir}, exitRefused, "is a directory"},
		{"run input /dev/zero", []string{"run", "--cache-dir=", "--hook", shapes, "--input", devZero}, exitUsage, "not a regular file"},
		{"run settings /dev/zero", []string{"run", "--cache-dir=", "--hook", shapes, "--settings", "@" + devZero}, exitUsage, "not a regular file"},
		{"validate /dev/zero", []string{"validate", devZero}, exitRefused, "not a regular file"},
		{"validate fifo", []string{"validate", fifo}, exitRefused, "named pipe"},
		{"embed /dev/zero", []string{"manifest", "embed", "--manifest", man, "--out", filepath.Join(dir, "o.wasm"), devZero}, exitRefused, "not a regular file"},
		{"embed manifest /dev/zero", []string{"manifest", "embed", "--manifest", devZero, "--out", filepath.Join(dir, "o.wasm"), shapes}, exitRefused, "not a regular file"},
		{"chain config /dev/zero", []string{"chain", "--cache-dir=", "--config", devZero, "--point", "message.outbound"}, exitRefused, "not a regular file"},
		{"chain config fifo", []string{"chain", "--cache-dir=", "--config", fifo, "--point", "message.outbound"}, exitRefused, "named pipe"},
		{"chain module /dev/zero", []string{"chain", "--cache-dir=", "--config", zeroModule, "--point", "message.outbound"}, exitRefused, "not a regular file"},
		{"run negative credit", []string{"run", "--cache-dir=", "--hook", shapes, "--credit", "-5"}, exitUsage, "must not be negative"},
		{"chain negative credit", []string{"chain", "--cache-dir=", "--config", filepath.Join("testdata", "chain.json"), "--module-dir", filepath.Join(root, "testdata", "guests"), "--point", "message.outbound", "--credit", "-1"}, exitUsage, "must not be negative"},
		{"run credit not a number", []string{"run", "--cache-dir=", "--hook", shapes, "--credit", "lots"}, exitUsage, "whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runCLIWithin(t, tt.args...)
			if code != tt.exit || !strings.Contains(stdout+stderr, tt.say) {
				t.Errorf("exit %d, want %d saying %q\nstdout: %s\nstderr: %s", code, tt.exit, tt.say, stdout, stderr)
			}
		})
	}
}

// `--credit 0` is a balance of zero, not "no billing": a billable call is
// refused. It must stay so now that negative balances are refused.
func TestCLICreditZeroStillBills(t *testing.T) {
	var f creditFlag
	if err := f.Set("0"); err != nil || !f.set || f.n != 0 {
		t.Fatalf("Set(0) = %v, %+v", err, f)
	}
	if err := f.Set("-5"); err == nil {
		t.Fatal("Set(-5) accepted")
	}
}
