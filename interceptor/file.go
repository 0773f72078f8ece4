package interceptor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// fileInterceptor is a Descriptor in the configuration file, with limits in
// runtime.Limits' JSON form.
type fileInterceptor struct {
	Descriptor
	Limits json.RawMessage `json:"limits,omitempty"`
}

type fileConfig struct {
	// Modules maps a module name to its file.
	Modules      map[string]string `json:"modules"`
	Interceptors []fileInterceptor `json:"interceptors"`
}

// ParseConfig decodes the JSON form of an interceptor configuration:
//
//	{"modules": {"guard": "cross-boundary-guard.wasm"},
//	 "interceptors": [{"name": "sec/guard", "type": "validation", "events": ["*"],
//	                   "phases": "both", "module": "guard", "grants": ["kv.get", "kv.set"],
//	                   "settings": {}, "failOpen": false, "mode": "active",
//	                   "priorityHint": 0, "limits": {"timeout_ms": 50}}]}
//
// Module paths are resolved by readModule. Unknown fields are refused.
func ParseConfig(data []byte, readModule func(path string) ([]byte, error)) (Config, error) {
	if _, err := abi.ParseJSON(data, abi.JSONLimits{MaxBytes: chain.MaxConfigBytes}); err != nil {
		return Config{}, fmt.Errorf("interceptor config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var fc fileConfig
	if err := dec.Decode(&fc); err != nil {
		return Config{}, fmt.Errorf("interceptor config: %w", err)
	}
	cfg := Config{Modules: map[string][]byte{}}
	for name, path := range fc.Modules {
		b, err := readModule(path)
		if err != nil {
			return Config{}, fmt.Errorf("interceptor config: module %q: %w", name, err)
		}
		cfg.Modules[name] = b
	}
	for i, fi := range fc.Interceptors {
		d := fi.Descriptor
		if fi.Limits != nil {
			if err := d.Limits.UnmarshalJSON(fi.Limits); err != nil {
				return Config{}, fmt.Errorf("interceptor config: interceptor %d (%q): %w", i, d.Name, err)
			}
		}
		cfg.Interceptors = append(cfg.Interceptors, d)
	}
	return cfg, nil
}

// LoadConfigFile reads the configuration at path; relative module paths are
// resolved against moduleDir, or the file's directory when it is empty.
func LoadConfigFile(path, moduleDir string) (Config, error) {
	data, err := runtime.ReadFileLimit(path, chain.MaxConfigBytes, "config_bytes")
	if err != nil {
		return Config{}, err
	}
	if moduleDir == "" {
		moduleDir = filepath.Dir(path)
	}
	return ParseConfig(data, func(p string) ([]byte, error) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(moduleDir, p)
		}
		return runtime.ReadModuleFile(p, 0)
	})
}
