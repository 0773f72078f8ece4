package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/store"
)

// cliError is a failure of a command before it reached a decision: what
// fail prints, and the exit code.
type cliError struct {
	exit      int
	code, msg string
	err       error // the cause, for callers that name it more precisely
}

func newCLIError(exit int, code string, err error) *cliError {
	return &cliError{exit: exit, code: code, msg: err.Error(), err: err}
}

func (e *cliError) print(w io.Writer) int { return fail(w, e.exit, e.code, "%s", e.msg) }

// host is the composition root: a runtime, and the built-in capabilities
// behind a runner, with llm.run billed when a credit balance is given. Both
// `run` and `chain` are chains over one.
type host struct {
	rt     *runtime.Runtime
	reg    *capability.Registry
	runner *capability.Runner
	logs   *builtin.MemoryLogSink // log.write's lines, taken per invocation
	ledger capability.Ledger      // the state file's; nil without --credit
	// state is the state file, opened when first needed; statePath is
	// --state.
	state     *store.DB
	statePath string
	logger    *slog.Logger // warnings and worse, to stderr
	closers   []func()
}

// hostFlags are the flags a host is wired from, `run`'s and `chain`'s.
type hostFlags struct {
	cacheDir string          // wazero's compilation cache; empty: none
	tenant   string          // the tenant credit is given to
	credit   creditFlag      // unset: llm.run is free
	kvPath   string          // kv data file; empty: in memory (kv)
	kv       builtin.KVStore // the store when kvPath is empty; nil: a builtin.MemoryKV
	state    string          // --state; empty: the default
}

// openHost wires a host: the runtime and the runner. Close it with close.
func openHost(ctx context.Context, f hostFlags, stderr io.Writer) (*host, *cliError) {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pruneCache(f.cacheDir, maxCacheBytes)
	rt, err := runtime.New(ctx, runtime.Config{CacheDir: f.cacheDir, Logger: logger})
	if err != nil {
		return nil, newCLIError(exitRefused, "internal", err)
	}
	h := &host{rt: rt, logs: &builtin.MemoryLogSink{}, logger: logger, statePath: f.state}
	h.closers = append(h.closers, func() { rt.Close(context.Background()) })
	bcfg := builtin.Config{Provider: llmProvider(), Logs: h.logs, Logger: logger}
	if f.kvPath != "" {
		kv, err := openFileKV(f.kvPath)
		if err != nil {
			h.close()
			return nil, newCLIError(exitUsage, "invalid_input", err)
		}
		bcfg.KV = kv
	} else if f.kv != nil {
		bcfg.KV = f.kv
	}
	if f.credit.set {
		l, cerr := h.openLedger(ctx, f.tenant, f.credit)
		if cerr != nil {
			h.close()
			return nil, cerr
		}
		h.ledger = l
		bcfg.Ledger = l
	}
	h.reg = capability.NewRegistry()
	if err := builtin.Register(h.reg, bcfg); err != nil {
		h.close()
		return nil, newCLIError(exitRefused, "internal", err)
	}
	if h.runner, err = capability.NewRunner(h.reg, capability.RunnerOptions{Logger: logger}); err != nil {
		h.close()
		return nil, newCLIError(exitRefused, "internal", err)
	}
	return h, nil
}

// close closes what the host opened, last first: the chains, the audit
// file, the runtime.
func (h *host) close() {
	for i := len(h.closers) - 1; i >= 0; i-- {
		h.closers[i]()
	}
	h.closers = nil
}

// chainStores are where a chain keeps its audit records and pending
// approvals; the zero value keeps both in memory. durable keeps approvals
// in the state file unless approvals names a directory.
type chainStores struct {
	auditPath, checkpoint, approvals, keyFile string
	auditValues, durable                      bool
}

// newChain builds a chain of cfg on the host. logger receives the chain's
// logs (nil: the host's). A refused configuration is exit 1,
// invalid_config, with the *chain.ConfigError as the cause.
func (h *host) newChain(ctx context.Context, cfg chain.Config, st chainStores, logger *slog.Logger) (*chain.Chain, *cliError) {
	if logger == nil {
		logger = h.logger
	}
	opts := chain.Options{Runtime: h.rt, HostCaller: h.runner, Logger: logger, AuditValues: st.auditValues}
	if st.durable || st.auditPath != "" || st.approvals != "" {
		// Approvals are durable (the state file, or --approvals): they
		// are sealed under the host key, so another command can resume
		// them.
		key, err := loadHostKey(st.keyFile, true)
		if err != nil {
			return nil, newCLIError(exitRefused, "key", err)
		}
		opts.ApprovalKey = approvalKey(key)
		if st.auditPath != "" {
			cp := st.checkpoint
			if cp == "" {
				cp = st.auditPath + ".checkpoint"
			}
			sink, err := audit.OpenFile(st.auditPath, audit.FileOptions{Key: key, Checkpoint: cp})
			if err != nil {
				return nil, newCLIError(exitRefused, "audit", err)
			}
			h.closers = append(h.closers, func() { sink.Close() })
			opts.Audit = sink
		}
	}
	if st.approvals != "" {
		dir, err := chain.NewDirApprovals(st.approvals)
		if err != nil {
			return nil, newCLIError(exitRefused, "approvals", err)
		}
		opts.Approvals = dir
	} else if st.durable {
		db, cerr := h.openState(ctx)
		if cerr != nil {
			return nil, cerr
		}
		opts.Approvals = store.NewApprovals(db, store.ApprovalOptions{})
	}
	c, err := chain.New(ctx, cfg, opts)
	if err != nil {
		return nil, newCLIError(exitRefused, "invalid_config", err)
	}
	h.closers = append(h.closers, func() { c.Close(context.Background()) })
	return c, nil
}
