package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// runSynopsis is run's synopsis, in its usage and the top-level one.
const runSynopsis = `  wasmhooks run --hook FILE.wasm [--point P] [--phase observer|transformer|guard] [--input FILE|-]
                [--settings JSON|@FILE] [--grant cap,cap] [--credit N|keep] [--fail closed|open]
                [--timeout D] [--fuel N] [--memory-pages N] [--tenant T] [--name NAME] [--kv FILE]
                [--state FILE] [--cache-dir DIR]
`

// runUsage is run's usage; parseFlags adds each flag's help.
const runUsage = "usage:\n" + runSynopsis + `
Runs one hook on one invocation, as a chain of one binding, and prints its
decision and a report. See README.md (The CLI) for the output and exit codes.
`

// runOutput is what `wasmhooks run` prints.
type runOutput struct {
	Decision *abi.Decision `json:"decision"`
	Report   runReport     `json:"report"`
}

type runReport struct {
	HostCalls     int          `json:"host_calls"`
	CreditCharged int64        `json:"credit_charged"`
	CreditLeft    *int64       `json:"credit_left,omitempty"`
	FuelUsed      uint64       `json:"fuel_used"`
	DurationMS    float64      `json:"duration_ms"`
	Failure       *abi.Failure `json:"failure"`
	FailPolicy    string       `json:"fail_policy,omitempty"`
	// Phase, Applied and Ignored are there with --phase: what the chain
	// applies of the decision in that phase, and what it ignores.
	Phase   string    `json:"phase,omitempty"`
	Applied string    `json:"applied,omitempty"`
	Ignored string    `json:"ignored,omitempty"`
	Logs    []logLine `json:"logs"`
}

// logLine is one line of the hook's output (stdout, stderr) or one log.write
// entry. Text is the hook's text as it wrote it; JSON encoding escapes it, so
// it can never forge a line of its own.
type logLine struct {
	Source string `json:"source"`
	Level  string `json:"level,omitempty"`
	Text   string `json:"text"`
}

// runModule is the module's name in run's one-binding configuration.
const runModule = "hook"

func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var (
		hookPath   = fs.String("hook", "", "the hook module (.wasm); required")
		point      = fs.String("point", "message.outbound", "the hook point")
		phase      = fs.String("phase", "", "bind the hook in this phase (observer, transformer or guard): the report then says what the chain applies of its decision (default: a guard, and the report leaves that out)")
		inputPath  = fs.String("input", "", "the invocation's context object (not the whole invocation), a JSON file or - for stdin (default {})")
		settingsIn = fs.String("settings", "", "the hook's settings: JSON, or @FILE")
		grants     = fs.String("grant", "", "capabilities granted to the hook, comma-separated; one the host does not have is refused")
		credit     creditFlag
		failPolicy = fs.String("fail", "", "what a hook failure decides: closed (block) or open (continue) (default: the chain's default for the phase and point; closed without --phase)")
		timeout    = fs.Duration("timeout", 0, "wall-clock limit of the invocation (default 2s)")
		memPages   = fs.Uint("memory-pages", 0, "linear-memory limit in 64 KiB pages (default 512)")
		fuel       = fs.Uint64("fuel", 0, "fuel budget of the invocation, about one unit per WebAssembly instruction (default 400000000)")
		tenant     = fs.String("tenant", "local", "the tenant the invocation runs for")
		hookName   = fs.String("name", "", "the hook's name, its identity for capabilities such as kv: 1-64 letters, digits, '.', '_' or '-' (default: the module's sha256, never the manifest's name)")
		cacheDir   = fs.String("cache-dir", defaultCacheDir(), "wazero's compilation cache directory; empty disables it")
		kvPath     = fs.String("kv", "", kvUsage)
		state      = fs.String("state", "", stateUsage)
	)
	fs.Var(&credit, "credit", creditUsage)
	if code, ok := parseFlags(fs, args, runUsage, stdout, stderr); !ok {
		return code
	}
	if *hookPath == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, "wasmhooks run: --hook is required and no positional arguments are taken\n"+runUsage)
		return exitUsage
	}
	// The chain checks --phase and --fail, with the binding.
	bindPhase := chain.Phase(*phase)
	if bindPhase == "" {
		bindPhase = chain.Guard // a guard fails closed, as run always has
	}
	if *timeout < 0 {
		return fail(stdout, exitUsage, "usage", "--timeout must be positive")
	}
	if err := checkPoint(*point); err != nil {
		return fail(stdout, exitUsage, "usage", "%v", err)
	}
	input, err := readContext(*inputPath, stdin)
	if err != nil {
		return fail(stdout, exitUsage, "invalid_input", "%v", err)
	}
	settings, err := readSettings(*settingsIn)
	if err != nil {
		return fail(stdout, exitUsage, "invalid_settings", "%v", err)
	}
	wasm, err := runtime.ReadModuleFile(*hookPath, 0)
	if err != nil {
		return fail(stdout, exitRefused, "unreadable_module", "%v", err)
	}

	h, cerr := openHost(ctx, hostFlags{cacheDir: *cacheDir, tenant: *tenant, credit: credit, kvPath: *kvPath, state: *state}, stderr)
	if cerr != nil {
		return cerr.print(stdout)
	}
	defer h.close()
	granted := splitList(*grants)
	if err := checkGrants(h.reg, granted); err != nil {
		return fail(stdout, exitUsage, "usage", "%v", err)
	}
	name := *hookName
	if name == "" {
		name = runtime.Digest(wasm)
	}
	cfg := chain.Config{
		Modules: map[string][]byte{runModule: wasm},
		Bindings: []chain.Binding{{
			Name: name, Module: runModule, Point: *point, Phase: bindPhase,
			Settings: settings, Grants: granted, Fail: chain.FailPolicy(*failPolicy),
			Limits: runtime.Limits{Timeout: *timeout, MemoryPages: uint32(*memPages), Fuel: *fuel},
		}},
		Breaker: chain.BreakerConfig{Failures: -1}, // one run: nothing to break
	}
	// The report says all the chain would log; its warnings would only
	// repeat it on stderr.
	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	c, cerr := h.newChain(ctx, cfg, chainStores{}, quiet)
	if cerr != nil {
		return runConfigError(cerr).print(stdout)
	}
	out, err := c.Run(ctx, chain.Input{Tenant: *tenant, Point: *point, Context: input})
	if err != nil {
		// Not the hook's failure: a bad input or an interrupted run.
		return fail(stdout, exitUsage, chainCode(err), "%v", err)
	}
	if len(out.Trace) != 1 || len(out.Records()) != 1 {
		// One binding at the point makes one step and one record.
		return fail(stdout, exitRefused, "internal", "the chain of one binding made %d steps and %d audit records", len(out.Trace), len(out.Records()))
	}
	printJSON(stdout, h.runOutput(ctx, out, *tenant, *phase != ""))
	return exitOK
}

// runOutput is the outcome of run's one-binding chain (one step, one audit
// record) as run prints it: the hook's decision, or the one its fail policy
// reached, in the chain's words.
func (h *host) runOutput(ctx context.Context, out *chain.Outcome, tenant string, withPhase bool) runOutput {
	st := out.Trace[0] // the one binding's step
	r := runOutput{Decision: st.Decision, Report: runReport{
		HostCalls: len(st.HostCalls), CreditCharged: st.CreditCharged, FuelUsed: st.FuelUsed,
		DurationMS: float64(st.LatencyUS) / 1000, Failure: st.Failure, Logs: []logLine{},
	}}
	if st.Failure != nil {
		r.Report.FailPolicy = string(st.FailPolicy)
		r.Decision = &abi.Decision{Action: st.Applied, Reason: out.Records()[0].Reason}
	}
	if withPhase {
		r.Report.Phase, r.Report.Applied, r.Report.Ignored = string(st.Phase), string(st.Applied), st.Ignored
	}
	if h.ledger != nil {
		left, _, _ := h.ledger.Balance(ctx, tenant)
		r.Report.CreditLeft = &left
	}
	for _, l := range st.Logs {
		r.Report.Logs = append(r.Report.Logs, logLine{Source: l.Stream, Text: l.Text})
	}
	for _, e := range h.logs.Take(st.Invocation) {
		r.Report.Logs = append(r.Report.Logs, logLine{Source: "log.write", Level: strings.ToLower(e.Level.String()), Text: e.Message})
	}
	return r
}

// runConfigError names a refusal of run's one-binding configuration by its
// cause: the module's (exit 1, the load's code), its settings schema's or
// its settings' (exit 1), or the flags' (exit 2: limits the runtime refuses,
// a point the manifest does not allow, a bad --name).
func runConfigError(e *cliError) *cliError {
	var ce *chain.ConfigError
	if !errors.As(e.err, &ce) {
		return e
	}
	if len(ce.Errs) > 0 { // the first error decides
		err := ce.Errs[0]
		switch {
		case errors.Is(err, chain.ErrInvalidSettingsSchema), errors.Is(err, chain.ErrInvalidSettings):
			return newCLIError(exitRefused, settingsCode(err), err)
		case errors.Is(err, runtime.ErrInvalidRequest):
			return newCLIError(exitUsage, string(runtime.Code(err)), err)
		}
		return newCLIError(exitRefused, string(runtime.Code(err)), err)
	}
	return &cliError{exit: exitUsage, code: "usage", msg: strings.Join(ce.Problems, "; "), err: ce}
}

// checkGrants refuses a grant of a capability the host does not have,
// listing those it has.
func checkGrants(reg *capability.Registry, grants []string) error {
	for _, g := range grants {
		if _, ok := reg.Lookup(g); !ok {
			return fmt.Errorf("--grant: unknown capability %q (the capabilities are %s)", g, strings.Join(reg.Names(), ", "))
		}
	}
	return nil
}

func readContext(path string, stdin io.Reader) (map[string]any, error) {
	var data []byte
	var err error
	switch path {
	case "":
		return map[string]any{}, nil
	case "-":
		data, err = io.ReadAll(io.LimitReader(stdin, runtime.DefaultMaxInputBytes+1))
	default:
		data, err = runtime.ReadFileLimit(path, runtime.DefaultMaxInputBytes, "input_bytes")
	}
	if err != nil {
		return nil, err
	}
	v, err := abi.ParseJSON(data, abi.JSONLimits{MaxBytes: runtime.DefaultMaxInputBytes})
	if err != nil {
		return nil, fmt.Errorf("--input: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("--input: the context must be a JSON object")
	}
	if isInvocation(m) {
		return nil, fmt.Errorf(`--input: this is a whole invocation document ({"point", "context", ...}); --input takes its context object alone (the value of "context"): the point and settings are given by flags`)
	}
	return m, nil
}

// invocationKeys are the top-level members of an invocation document.
var invocationKeys = map[string]bool{"abi": true, "point": true, "context": true, "settings": true, "meta": true}

// isInvocation reports whether m is a whole invocation document rather than
// a context: it has a "context" object (no point has a field of that name)
// and no member an invocation does not have. Passed on as a context it would
// reach the hook with none of the point's fields.
func isInvocation(m map[string]any) bool {
	if _, ok := m["context"].(map[string]any); !ok {
		return false
	}
	for k := range m {
		if !invocationKeys[k] {
			return false
		}
	}
	return true
}

func readSettings(s string) (map[string]any, error) {
	return readObjectFlag("--settings", s)
}

// readObjectFlag reads a flag's JSON object, given inline or as @FILE; its
// errors name the flag.
func readObjectFlag(flagName, s string) (map[string]any, error) {
	if s == "" {
		return map[string]any{}, nil
	}
	data := []byte(s)
	if strings.HasPrefix(s, "@") {
		var err error
		if data, err = runtime.ReadFileLimit(s[1:], abi.DefaultMaxJSONBytes, "settings_bytes"); err != nil {
			return nil, err
		}
	}
	v, err := abi.ParseJSON(data, abi.JSONLimits{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a JSON object", flagName)
	}
	return m, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// llmProvider picks llm.run's provider from the environment: an
// OpenAI-compatible endpoint when WASMHOOKS_LLM_BASE_URL is set, the offline
// extractive summariser otherwise.
func llmProvider() builtin.Provider {
	base := os.Getenv("WASMHOOKS_LLM_BASE_URL")
	if base == "" {
		return builtin.OfflineProvider{}
	}
	return &builtin.OpenAIProvider{
		BaseURL: strings.TrimSuffix(base, "/"),
		APIKey:  os.Getenv("WASMHOOKS_LLM_API_KEY"),
		Model:   os.Getenv("WASMHOOKS_LLM_MODEL"),
	}
}

func defaultCacheDir() string {
	if d := os.Getenv("WASMHOOKS_CACHE_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return d + string(os.PathSeparator) + "wasmhooks"
}
