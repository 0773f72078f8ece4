package chain

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/configfile"
)

// The JSON form of a configuration, as `wasmhooks chain --config` reads it
// (reference: docs/chain-config.md; JSON Schema: config.schema.json):
//
//	{"modules": {"redact": "redact-secrets.wasm"},
//	 "breaker": {"failures": 5, "backoff": "30s", "max_backoff": "5m"},
//	 "bindings": [
//	   {"name": "redact-outbound", "module": "redact", "point": "message.outbound",
//	    "phase": "transformer", "priority": 10, "settings": {}, "grants": [],
//	    "fail": "closed", "limits": {"timeout": "2s", "memory_pages": 512, "fuel": 50000000},
//	    "approval": {"timeout": "15m", "on_expiry": "deny"}, "lookahead": 256}],
//	 "tool_approvals": [
//	   {"name": "payments", "tools": ["payments.*", "shell.exec"],
//	    "reason": "money moves only with a human's sign-off", "priority": 0,
//	    "approval": {"timeout": "1h", "on_expiry": "deny"}}]}
//
// A binding's "limits" is runtime.Limits' JSON form (Limits.UnmarshalJSON):
// every field of runtime.Limits by its json name, in snake case
// ("memory_pages", "fuel", "init_fuel", "max_stack_bytes", ...); a field left
// out means the runtime's default. Durations are Go durations ("250ms",
// "2s"). Unknown fields, duplicate keys and anything strict JSON refuses are
// errors. A binding's "mode" is "active" (the default) or "audit" (Binding.Mode).
type fileConfig struct {
	Modules  map[string]string `json:"modules"`
	Breaker  *fileBreaker      `json:"breaker"`
	Bindings []fileBinding     `json:"bindings"`
	// ToolApprovals is Config.ToolApprovals.
	ToolApprovals []fileToolApproval `json:"tool_approvals"`
}

type fileToolApproval struct {
	Name     string        `json:"name"`
	Tools    []string      `json:"tools"`
	Reason   string        `json:"reason"`
	Priority int           `json:"priority"`
	Approval *fileApproval `json:"approval"`
}

type fileBreaker struct {
	Failures   int      `json:"failures"`
	Backoff    duration `json:"backoff"`
	MaxBackoff duration `json:"max_backoff"`
}

type fileBinding struct {
	Name     string          `json:"name"`
	Module   string          `json:"module"`
	Point    string          `json:"point"`
	Phase    Phase           `json:"phase"`
	Priority int             `json:"priority"`
	Settings map[string]any  `json:"settings"`
	Grants   []string        `json:"grants"`
	Fail     FailPolicy      `json:"fail"`
	Limits   json.RawMessage `json:"limits"` // runtime.Limits' JSON form
	Approval *fileApproval   `json:"approval"`
	// Lookahead is Binding.Lookahead (streaming points only).
	Lookahead int  `json:"lookahead"`
	Mode      Mode `json:"mode"` // active (default) or audit
}

type fileApproval struct {
	Timeout  duration     `json:"timeout"`
	OnExpiry ExpiryPolicy `json:"on_expiry"`
}

type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"2s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

// MaxConfigBytes bounds the JSON form of a configuration (ParseConfig, and
// the file LoadConfigFile reads, which must be a regular file).
const MaxConfigBytes = 16 << 20

// ParseConfig decodes the JSON form of a configuration. Module paths are
// resolved by readModule (LoadConfigFile reads them relative to a
// directory).
func ParseConfig(data []byte, readModule func(path string) ([]byte, error)) (Config, error) {
	var fc fileConfig
	if err := configfile.Decode(data, MaxConfigBytes, &fc); err != nil {
		return Config{}, fmt.Errorf("chain config: %w", err)
	}
	// The schema (config.schema.json) after the decoder, whose messages
	// name Go's view of a bad field; the schema adds the enumerations,
	// required fields and formats an editor checks too.
	if err := ValidateConfigJSON(data); err != nil {
		return Config{}, fmt.Errorf("chain config: %w", err)
	}
	modules, err := configfile.ReadModules(fc.Modules, readModule)
	if err != nil {
		return Config{}, fmt.Errorf("chain config: %w", err)
	}
	cfg := Config{Modules: modules}
	if fc.Breaker != nil {
		cfg.Breaker = BreakerConfig{Failures: fc.Breaker.Failures, Backoff: time.Duration(fc.Breaker.Backoff), MaxBackoff: time.Duration(fc.Breaker.MaxBackoff)}
	}
	for i, fb := range fc.Bindings {
		b := Binding{
			Name: fb.Name, Module: fb.Module, Point: fb.Point, Phase: fb.Phase, Priority: fb.Priority,
			Settings: fb.Settings, Grants: fb.Grants, Fail: fb.Fail, Lookahead: fb.Lookahead, Mode: fb.Mode,
		}
		if fb.Limits != nil {
			if err := b.Limits.UnmarshalJSON(fb.Limits); err != nil {
				return Config{}, fmt.Errorf("chain config: binding %d (%q): %w", i, fb.Name, err)
			}
		}
		if a := fb.Approval; a != nil {
			b.Approval = ApprovalPolicy{Timeout: time.Duration(a.Timeout), OnExpiry: a.OnExpiry}
		}
		cfg.Bindings = append(cfg.Bindings, b)
	}
	for _, ft := range fc.ToolApprovals {
		ta := ToolApproval{Name: ft.Name, Tools: ft.Tools, Reason: ft.Reason, Priority: ft.Priority}
		if a := ft.Approval; a != nil {
			ta.Approval = ApprovalPolicy{Timeout: time.Duration(a.Timeout), OnExpiry: a.OnExpiry}
		}
		cfg.ToolApprovals = append(cfg.ToolApprovals, ta)
	}
	return cfg, nil
}

// LoadConfigFile reads the JSON configuration at path. Relative module paths
// are resolved against moduleDir, or against the file's directory when
// moduleDir is empty.
func LoadConfigFile(path, moduleDir string) (Config, error) {
	data, readModule, err := configfile.Read(path, MaxConfigBytes, moduleDir)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(data, readModule)
}
