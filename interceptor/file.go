package interceptor

import (
	"encoding/json"
	"fmt"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/internal/configfile"
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
	var fc fileConfig
	if err := configfile.Decode(data, chain.MaxConfigBytes, &fc); err != nil {
		return Config{}, fmt.Errorf("interceptor config: %w", err)
	}
	modules, err := configfile.ReadModules(fc.Modules, readModule)
	if err != nil {
		return Config{}, fmt.Errorf("interceptor config: %w", err)
	}
	cfg := Config{Modules: modules}
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
	data, readModule, err := configfile.Read(path, chain.MaxConfigBytes, moduleDir)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(data, readModule)
}
