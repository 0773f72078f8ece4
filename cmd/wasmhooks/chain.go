package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// chainSynopsis is the chain commands' synopsis, in their usage and the
// top-level one.
const chainSynopsis = `  wasmhooks chain --config chain.json --point P [--input FILE|-] [--tenant T] [--credit N|keep]
                  [--module-dir DIR] [--audit FILE.jsonl] [--state FILE] [--approvals DIR] [--audit-values]
                  [--brief] [--key FILE] [--audit-checkpoint FILE] [--kv FILE] [--stream [--chunk N]]
  wasmhooks chain resolve --config chain.json --id ID --decision approve|deny|edit [--state FILE]
                  [--approvals DIR] [--edit JSON] [--actor NAME] [--reason TEXT] [--audit FILE.jsonl]
                  [--credit N|keep] [--key FILE] [--audit-checkpoint FILE] [--kv FILE]
  wasmhooks chain expire --config chain.json [--state FILE] [--approvals DIR] [--audit FILE.jsonl]
                  [--credit N|keep] [--key FILE] [--audit-checkpoint FILE] [--kv FILE]
  wasmhooks chain verify [--key FILE] [--checkpoint FILE] FILE.jsonl
`

const chainUsage = "usage:\n" + chainSynopsis + `
The host key (--key; default $WASMHOOKS_KEY_FILE, else host.key in the user's
configuration directory under wasmhooks/) seals approvals and keys the audit
chain. It is created (32 random bytes, hex, mode 0600) when first needed; a
key file that others can read is refused. Pending approvals and credit are
kept in the state file (--state; default $WASMHOOKS_STATE, else
<user config dir>/wasmhooks/state.db), so that ` + "`chain resolve`" + ` resumes what ` + "`chain`" + ` paused; --approvals DIR
keeps approvals in a directory instead.
`

// chainFlags are the flags that build a chain, shared by run and resolve.
type chainFlags struct {
	config, moduleDir, tenant, auditPath, approvals, cacheDir string
	keyFile, checkpoint, kvPath, state                        string
	credit                                                    creditFlag
	auditValues, brief                                        bool
}

// chainFlagSet is a chain command's flag set, the chain's flags registered
// on it.
func chainFlagSet(name string) (*flag.FlagSet, *chainFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f := &chainFlags{}
	f.register(fs)
	return fs, f
}

func (f *chainFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "the chain configuration (JSON); required")
	fs.StringVar(&f.moduleDir, "module-dir", "", "where relative module paths are found (default: the configuration's directory)")
	fs.StringVar(&f.tenant, "tenant", "local", "the tenant the traffic belongs to")
	fs.Var(&f.credit, "credit", creditUsage)
	fs.StringVar(&f.auditPath, "audit", "", "append audit records to this JSON-lines file (default: kept in memory)")
	fs.StringVar(&f.approvals, "approvals", "", "keep pending approvals in this directory instead of the state file")
	fs.StringVar(&f.state, "state", "", stateUsage)
	fs.BoolVar(&f.auditValues, "audit-values", false, "record the before and after values of modified fields in audit records")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "wazero's compilation cache directory; empty disables it")
	fs.BoolVar(&f.brief, "brief", false, "print a summary: the outcome, one line per step, and each audit record's seq, decision and hash")
	fs.StringVar(&f.keyFile, "key", "", "the host key file that seals approvals and keys the audit chain (default $WASMHOOKS_KEY_FILE, else <user config dir>/wasmhooks/host.key; created if missing)")
	fs.StringVar(&f.checkpoint, "audit-checkpoint", "", "where the audit log's checkpoint is kept, apart from the log if you can (default FILE.jsonl.checkpoint)")
	fs.StringVar(&f.kvPath, "kv", "", kvUsage)
}

// chainEnv is a chain wired to a host.
type chainEnv struct {
	*host
	c *chain.Chain
}

// openChain builds the chain the flags describe. On failure it has printed
// the error and returns the exit code.
func openChain(ctx context.Context, f *chainFlags, stdout, stderr io.Writer) (*chainEnv, int) {
	cfg, err := chain.LoadConfigFile(f.config, f.moduleDir)
	if err != nil {
		return nil, fail(stdout, exitRefused, "invalid_config", "%v", err)
	}
	h, cerr := openHost(ctx, hostFlags{cacheDir: f.cacheDir, tenant: f.tenant, credit: f.credit, kvPath: f.kvPath, state: f.state}, stderr)
	if cerr != nil {
		return nil, cerr.print(stdout)
	}
	c, cerr := h.newChain(ctx, cfg, chainStores{
		auditPath: f.auditPath, checkpoint: f.checkpoint, approvals: f.approvals, keyFile: f.keyFile, auditValues: f.auditValues,
		durable: true,
	}, nil)
	if cerr != nil {
		h.close()
		return nil, cerr.print(stdout)
	}
	return &chainEnv{host: h, c: c}, exitOK
}

// print prints a run's outcome, with its steps' log.write lines, and
// returns exitOK.
func (e *chainEnv) print(w io.Writer, out *chain.Outcome, brief bool) int {
	e.attachLogWrites(out)
	printOutcome(w, out, brief)
	return exitOK
}

// attachLogWrites adds each step's log.write lines to its logs.
func (e *chainEnv) attachLogWrites(out *chain.Outcome) {
	for i := range out.Trace {
		st := &out.Trace[i]
		if st.Invocation == "" {
			continue
		}
		for _, l := range e.logs.Take(st.Invocation) {
			st.Logs = append(st.Logs, runtime.LogLine{Stream: "log.write:" + l.Level.String(), Text: l.Message})
		}
	}
}

func cmdChain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "resolve":
			return cmdChainResolve(ctx, args[1:], stdout, stderr)
		case "verify":
			return cmdChainVerify(args[1:], stdout, stderr)
		case "expire":
			return cmdChainExpire(ctx, args[1:], stdout, stderr)
		}
	}
	fs, f := chainFlagSet("chain")
	point := fs.String("point", "", "the hook point; required")
	inputPath := fs.String("input", "", "the traffic at the point (its context object), a JSON file or - for stdin (default {})")
	var sf streamFlags
	sf.register(fs)
	if code, ok := parseFlags(fs, args, chainUsage, stdout, stderr); !ok {
		return code
	}
	if f.config == "" || *point == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, "wasmhooks chain: --config and --point are required and no positional arguments are taken\n"+chainUsage)
		return exitUsage
	}
	if err := checkPoint(*point); err != nil {
		return fail(stdout, exitUsage, "usage", "%v", err)
	}
	input, err := readContext(*inputPath, stdin)
	if err != nil {
		return fail(stdout, exitUsage, "invalid_input", "%v", err)
	}
	env, code := openChain(ctx, f, stdout, stderr)
	if env == nil {
		return code
	}
	defer env.close()
	if sf.stream {
		return runStream(ctx, env, &sf, chain.Input{Tenant: f.tenant, Point: *point, Context: input}, stdout)
	}
	out, err := env.c.Run(ctx, chain.Input{Tenant: f.tenant, Point: *point, Context: input})
	if err != nil {
		return fail(stdout, exitUsage, chainCode(err), "%v", err)
	}
	return env.print(stdout, out, f.brief)
}

func cmdChainResolve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f := chainFlagSet("chain resolve")
	id := fs.String("id", "", "the pending approval's id; required")
	decision := fs.String("decision", "", "approve, deny or edit; required")
	edit := fs.String("edit", "", "for edit: the changed fields, a JSON object (or @FILE)")
	actor := fs.String("actor", "", "who resolves it, for the audit log")
	reason := fs.String("reason", "", "the approver's note (a deny's reason)")
	if code, ok := parseFlags(fs, args, chainUsage, stdout, stderr); !ok {
		return code
	}
	if f.config == "" || *id == "" || *decision == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, "wasmhooks chain resolve: --config, --id and --decision are required\n"+chainUsage)
		return exitUsage
	}
	r := chain.Resolution{Decision: chain.ResolutionDecision(*decision), Actor: *actor, Reason: *reason}
	if *edit != "" {
		m, err := readObjectFlag("--edit", *edit)
		if err != nil {
			return fail(stdout, exitUsage, "invalid_input", "%v", err)
		}
		r.Edit = m
	}
	env, code := openChain(ctx, f, stdout, stderr)
	if env == nil {
		return code
	}
	defer env.close()
	out, err := env.c.Resolve(ctx, *id, r)
	var refused *chain.ApprovalError
	switch {
	case errors.As(err, &refused):
		return fail(stdout, exitRefused, refused.Code, "%v", err)
	case err != nil:
		return fail(stdout, exitUsage, chainCode(err), "%v", err)
	}
	return env.print(stdout, out, f.brief)
}

// cmdChainExpire is the approvals' sweeper for the CLI: it applies the
// expiry policy of every pending approval whose expiry has passed (and of
// any whose resume died and whose claim's lease has ended), resuming or
// blocking their runs, and prints their outcomes. Run it periodically (cron).
func cmdChainExpire(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f := chainFlagSet("chain expire")
	if code, ok := parseFlags(fs, args, chainUsage, stdout, stderr); !ok {
		return code
	}
	if f.config == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, "wasmhooks chain expire: --config is required and no positional arguments are taken\n"+chainUsage)
		return exitUsage
	}
	env, code := openChain(ctx, f, stdout, stderr)
	if env == nil {
		return code
	}
	defer env.close()
	outs, err := env.c.ExpirePending(ctx)
	if err != nil {
		return fail(stdout, exitUsage, chainCode(err), "%v", err)
	}
	for _, out := range outs {
		env.attachLogWrites(out)
	}
	if outs == nil {
		outs = []*chain.Outcome{}
	}
	printJSON(stdout, map[string]any{"expired": outs})
	return exitOK
}

func cmdChainVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chain verify", flag.ContinueOnError)
	keyFile := fs.String("key", "", "the host key the log was written under: every record's mac is checked, and the checkpoint")
	cpFile := fs.String("checkpoint", "", "the log's checkpoint (default FILE.jsonl.checkpoint); needs --key")
	if code, ok := parseFlags(fs, args, chainUsage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, "wasmhooks chain verify: one audit file is required\n"+chainUsage)
		return exitUsage
	}
	path := fs.Arg(0)
	var opts audit.VerifyOptions
	switch {
	case *keyFile != "":
		key, err := loadHostKey(*keyFile, false)
		if err != nil {
			return fail(stdout, exitRefused, "key", "%v", err)
		}
		opts.Key = key
		cp := *cpFile
		if cp == "" {
			cp = path + ".checkpoint"
		}
		c, err := audit.ReadCheckpoint(cp)
		if err != nil {
			return fail(stdout, exitRefused, "checkpoint_missing", "%v (without its checkpoint, records cut from the end of the log cannot be found)", err)
		}
		opts.Checkpoint = c
	case *cpFile != "":
		return fail(stdout, exitUsage, "usage", "--checkpoint needs --key")
	}
	n, err := audit.VerifyFileWith(path, opts)
	var ve *audit.VerifyError
	switch {
	case errors.As(err, &ve):
		printJSON(stdout, map[string]any{"error": errorBody{Code: "audit_broken", Message: ve.Error()}, "line": ve.Index + 1})
		return exitRefused
	case errors.Is(err, audit.ErrCheckpoint):
		return fail(stdout, exitRefused, "checkpoint_invalid", "%v", err)
	case err != nil:
		return fail(stdout, exitRefused, "unreadable_audit", "%v", err)
	}
	doc := map[string]any{"records": n, "verified": true, "keyed": opts.Key != nil}
	if opts.Key == nil {
		fmt.Fprintln(stderr, "wasmhooks chain verify: no --key: only the hash chain was checked; whoever can write the log can rewrite it so that it verifies")
	}
	printJSON(stdout, doc)
	return exitOK
}

// chainCode is the stable code of an error from Run or Resolve.
func chainCode(err error) string {
	var refused *chain.ApprovalError
	switch {
	case errors.As(err, &refused):
		return refused.Code
	case errors.Is(err, chain.ErrUnknownApproval):
		return "unknown_approval"
	case errors.Is(err, chain.ErrInvalidResolution):
		return "invalid_resolution"
	case errors.Is(err, chain.ErrInvalidInput):
		return "invalid_input"
	case errors.Is(err, chain.ErrAudit):
		return "audit"
	case errors.Is(err, chain.ErrClosed):
		return "closed"
	}
	return string(runtime.Code(err))
}

func printOutcome(w io.Writer, out *chain.Outcome, brief bool) {
	if !brief {
		printJSON(w, out)
		return
	}
	type step struct {
		Binding  string            `json:"binding"`
		Phase    chain.Phase       `json:"phase"`
		Hook     string            `json:"hook,omitempty"`
		Wire     abi.Shape         `json:"wire,omitempty"`
		Failure  string            `json:"failure,omitempty"`
		Applied  string            `json:"applied"`
		By       string            `json:"by"`
		Ignored  string            `json:"ignored,omitempty"`
		Changed  []string          `json:"changed,omitempty"`
		Resolved string            `json:"resolution,omitempty"`
		Reason   string            `json:"reason,omitempty"`
		Credit   int64             `json:"credit_charged,omitempty"`
		Calls    []string          `json:"host_calls,omitempty"`
		Logs     []runtime.LogLine `json:"logs,omitempty"`
	}
	type approval struct {
		ID       string         `json:"id"`
		Binding  string         `json:"binding"`
		Reason   string         `json:"reason,omitempty"`
		Proposed map[string]any `json:"proposed"`
		Pending  map[string]any `json:"pending,omitempty"`
		Editable []string       `json:"editable"`
		Expires  string         `json:"expires"`
	}
	type record struct {
		Seq      uint64 `json:"seq"`
		Binding  string `json:"binding"`
		Decision string `json:"decision"`
		By       string `json:"by"`
		Hash     string `json:"hash"`
	}
	doc := struct {
		Verdict     chain.Verdict  `json:"verdict"`
		Modified    bool           `json:"modified"`
		Binding     string         `json:"binding,omitempty"`
		By          string         `json:"by,omitempty"`
		Reason      string         `json:"reason,omitempty"`
		UserMessage string         `json:"user_message,omitempty"`
		Failure     *abi.Failure   `json:"failure,omitempty"`
		Context     map[string]any `json:"context"`
		Approval    *approval      `json:"approval,omitempty"`
		Short       string         `json:"short_circuit,omitempty"`
		// Notifications are the notifies applied (ABI 1.2).
		Notifications []chain.Notification `json:"notifications,omitempty"`
		Trace         []step               `json:"trace"`
		Audit         []record             `json:"audit"`
	}{Verdict: out.Verdict, Modified: out.Modified, Binding: out.Binding, By: out.By, Reason: out.Reason,
		UserMessage: out.UserMessage, Failure: out.Failure, Context: out.Context, Notifications: out.Notifications,
		Short: out.ShortCircuit, Trace: []step{}, Audit: []record{}}
	if a := out.Approval; a != nil {
		doc.Approval = &approval{ID: a.ID, Binding: a.Binding, Reason: a.Reason, Proposed: a.Proposed, Pending: a.Pending, Editable: a.Editable, Expires: a.Expires.Format(time.RFC3339)}
	}
	for _, s := range out.Trace {
		st := step{Binding: s.Binding, Phase: s.Phase, Applied: string(s.Applied), By: s.By, Ignored: s.Ignored,
			Changed: s.Changed, Resolved: s.Resolution, Credit: s.CreditCharged, Logs: s.Logs, Wire: s.Wire}
		if s.Decision != nil {
			st.Hook = string(s.Decision.Action)
		}
		if s.By == chain.ByShortCircuit {
			st.Reason = s.Reason // which guard skipped it
		}
		if s.Failure != nil {
			st.Failure = string(s.Failure.Code)
		}
		for _, c := range s.HostCalls {
			st.Calls = append(st.Calls, c.Capability+": "+c.Status)
		}
		doc.Trace = append(doc.Trace, st)
	}
	for _, r := range out.Records() {
		doc.Audit = append(doc.Audit, record{Seq: r.Seq, Binding: r.Binding, Decision: r.Decision, By: r.By, Hash: r.Hash[:min(16, len(r.Hash))]})
	}
	printJSON(w, doc)
}
