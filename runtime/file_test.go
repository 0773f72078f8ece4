package runtime_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/runtime"
)

// Threat: a module path naming /dev/zero (or any non-regular file, or a file
// larger than any module Load accepts) read until memory runs out (issue 10,
// section 9). Defence: ReadModuleFile refuses non-regular files and reads at
// most MaxModuleBytes+1 bytes.
func TestReadModuleFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.wasm")
	if err := os.WriteFile(small, []byte("\x00asm\x01\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.wasm")
	if err := os.WriteFile(big, make([]byte, 1025), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		max        int
		want       string // "" means it reads
		is         error
	}{
		{"regular", small, 0, "", nil},
		{"at the bound", big, 1025, "", nil},
		{"over the bound", big, 1024, "module_bytes is 1025, over the limit of 1024", nil},
		{"dev zero", "/dev/zero", 0, "is a character device", runtime.ErrNotRegularFile},
		{"directory", dir, 0, "is a directory", runtime.ErrNotRegularFile},
		{"missing", filepath.Join(dir, "nope.wasm"), 0, "no such file", os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := os.Stat(tt.path); tt.path == "/dev/zero" && err != nil {
				t.Skip("no /dev/zero here")
			}
			data, err := runtime.ReadModuleFile(tt.path, tt.max)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadModuleFile = %d bytes, %v; want an error saying %q", len(data), err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			var le *runtime.LimitError
			if strings.Contains(tt.want, "over the limit") && (!errors.As(err, &le) || runtime.Code(err) != "limit_exceeded") {
				t.Errorf("error %v is not a *LimitError", err)
			}
		})
	}
}
