// Package configfile reads the JSON configuration files of the chain and of
// the interceptor, which share their form's rules: strict JSON, exact
// numbers, no unknown fields, and module files named by path.
package configfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// Decode decodes data into v: data must be strict JSON of at most maxBytes;
// numbers stay json.Number; unknown fields are refused.
func Decode(data []byte, maxBytes int, v any) error {
	if _, err := abi.ParseJSON(data, abi.JSONLimits{MaxBytes: maxBytes}); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// ReadModules reads module files, a path by module name, with readModule.
// Its error names the module.
func ReadModules(paths map[string]string, readModule func(path string) ([]byte, error)) (map[string][]byte, error) {
	modules := make(map[string][]byte, len(paths))
	for name, path := range paths {
		b, err := readModule(path)
		if err != nil {
			return nil, fmt.Errorf("module %q: %w", name, err)
		}
		modules[name] = b
	}
	return modules, nil
}

// Read reads the configuration file at path, a regular file of at most
// maxBytes, and returns it with a reader of its module files: relative paths
// are resolved against moduleDir, or against the file's directory when
// moduleDir is empty.
func Read(path string, maxBytes int, moduleDir string) (data []byte, readModule func(path string) ([]byte, error), err error) {
	data, err = runtime.ReadFileLimit(path, maxBytes, "config_bytes")
	if err != nil {
		return nil, nil, err
	}
	if moduleDir == "" {
		moduleDir = filepath.Dir(path)
	}
	return data, func(p string) ([]byte, error) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(moduleDir, p)
		}
		// Bounded and regular files only: a path naming /dev/zero would
		// otherwise be read until memory runs out. The bound is the
		// runtime's default MaxModuleBytes; a Runtime with a larger one
		// takes its modules through ParseConfig.
		return runtime.ReadModuleFile(p, 0)
	}, nil
}
