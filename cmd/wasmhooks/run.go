package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/runtime"
)

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
	Logs          []logLine    `json:"logs"`
}

// logLine is one line of the hook's output (stdout, stderr) or one log.write
// entry. Text is the hook's text as it wrote it; JSON encoding escapes it, so
// it can never forge a line of its own.
type logLine struct {
	Source string `json:"source"`
	Level  string `json:"level,omitempty"`
	Text   string `json:"text"`
}

func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		hookPath   = fs.String("hook", "", "the hook module (.wasm); required")
		point      = fs.String("point", "message.outbound", "the hook point")
		inputPath  = fs.String("input", "", "the invocation's context object, a JSON file or - for stdin (default {})")
		settingsIn = fs.String("settings", "", "the hook's settings: JSON, or @FILE")
		grants     = fs.String("grant", "", "capabilities granted to the hook, comma-separated")
		credit     creditFlag
		failPolicy = fs.String("fail", "closed", "what a hook failure decides: closed (block) or open (continue)")
		timeout    = fs.Duration("timeout", 0, "wall-clock limit of the invocation (default 2s)")
		memPages   = fs.Uint("memory-pages", 0, "linear-memory limit in 64 KiB pages (default 512)")
		fuel       = fs.Uint64("fuel", 0, "fuel budget of the invocation, about one unit per WebAssembly instruction (default 400000000)")
		tenant     = fs.String("tenant", "local", "the tenant the invocation runs for")
		hookName   = fs.String("name", "", "the hook's name, its identity for capabilities such as kv (default: the module's sha256, never the manifest's name)")
		cacheDir   = fs.String("cache-dir", defaultCacheDir(), "wazero's compilation cache directory; empty disables it")
		kvPath     = fs.String("kv", "", kvUsage)
	)
	fs.Var(&credit, "credit", creditUsage)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *hookPath == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "wasmhooks run: --hook is required and no positional arguments are taken")
		return exitUsage
	}
	if *failPolicy != "closed" && *failPolicy != "open" {
		return fail(stdout, exitUsage, "usage", "--fail must be closed or open, not %q", *failPolicy)
	}
	if *timeout < 0 {
		return fail(stdout, exitUsage, "usage", "--timeout must be positive")
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

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := runtime.New(ctx, runtime.Config{CacheDir: *cacheDir, Logger: logger})
	if err != nil {
		return fail(stdout, exitRefused, "internal", "%v", err)
	}
	defer rt.Close(context.Background())
	mod, err := rt.Load(ctx, wasm)
	if err != nil {
		return fail(stdout, exitRefused, string(runtime.Code(err)), "%v", err)
	}
	if err := validateSettings(mod.Manifest(), settings); err != nil {
		return fail(stdout, exitRefused, settingsCode(err), "%v", err)
	}

	// Wire the capability runner: the built-ins, with llm.run billed when a
	// credit balance is given.
	var ledger *capability.MemoryLedger
	cfg := builtin.Config{Provider: llmProvider(), Logs: &builtin.MemoryLogSink{}, Logger: logger}
	if *kvPath != "" {
		kv, err := openFileKV(*kvPath)
		if err != nil {
			return fail(stdout, exitUsage, "invalid_input", "%v", err)
		}
		cfg.KV = kv
	}
	if credit.set {
		ledger = capability.NewMemoryLedger()
		if credit.n == 0 {
			// An account with nothing on it: every billable call is refused.
		} else if err := ledger.Credit(*tenant, credit.n); err != nil {
			return fail(stdout, exitUsage, "usage", "--credit: %v", err)
		}
		cfg.Ledger = ledger
	}
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, cfg); err != nil {
		return fail(stdout, exitRefused, "internal", "%v", err)
	}
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{Logger: logger})
	if err != nil {
		return fail(stdout, exitRefused, "internal", "%v", err)
	}

	req := runtime.Request{
		Tenant: *tenant, Hook: *hookName, Point: *point, Context: input, Settings: settings,
		Grants: splitList(*grants), HostCaller: runner,
		Limits: runtime.Limits{Timeout: *timeout, MemoryPages: uint32(*memPages), Fuel: *fuel},
	}
	start := time.Now()
	res, err := rt.Invoke(ctx, mod, req)
	out := runOutput{}
	if res == nil {
		// Not the hook's failure: a bad request or an interrupted run.
		return fail(stdout, exitUsage, string(runtime.Code(err)), "%v", err)
	}
	out.Decision = res.Decision
	out.Report = runReport{
		HostCalls: res.HostCalls, CreditCharged: res.CreditCharged, FuelUsed: res.FuelUsed,
		DurationMS: float64(time.Since(start).Microseconds()) / 1000,
		Failure:    res.Failure,
	}
	if ledger != nil {
		left, _, _ := ledger.Balance(ctx, *tenant)
		out.Report.CreditLeft = &left
	}
	for _, l := range res.Logs {
		out.Report.Logs = append(out.Report.Logs, logLine{Source: l.Stream, Text: l.Text})
	}
	for _, e := range cfg.Logs.(*builtin.MemoryLogSink).Take(res.InvocationID) {
		out.Report.Logs = append(out.Report.Logs, logLine{Source: "log.write", Level: strings.ToLower(e.Level.String()), Text: e.Message})
	}
	if out.Report.Logs == nil {
		out.Report.Logs = []logLine{}
	}
	if res.Failure != nil {
		out.Report.FailPolicy = *failPolicy
		out.Decision = policyDecision(*failPolicy, res.Failure)
	}
	printJSON(stdout, out)
	return exitOK
}

// policyDecision is the decision a fail policy reaches after a hook failure.
// It says so in its reason, so it is never confused with the hook's own block.
func policyDecision(policy string, f *abi.Failure) *abi.Decision {
	if policy == "open" {
		return &abi.Decision{Action: abi.ActionContinue, Reason: "hook failed (" + string(f.Code) + "); fail-open policy continues"}
	}
	return &abi.Decision{Action: abi.ActionBlock, Reason: "hook failed (" + string(f.Code) + "); fail-closed policy blocks"}
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
	return m, nil
}

func readSettings(s string) (map[string]any, error) {
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
		return nil, fmt.Errorf("--settings: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("--settings: settings must be a JSON object")
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
