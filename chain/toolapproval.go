package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// ToolApproval marks tools that need a human's approval before they run,
// without a guard hook: seed 002's tools that declare requires_approval. At
// tool.before, a call to a tool it names takes the path of a guard's ask: a
// pending approval in the chain's store, resumed by Resolve or decided by
// its expiry policy, audited as the configuration's own decision (by
// "config").
type ToolApproval struct {
	// Name identifies the rule: it appears as "config:" + Name in the
	// trace, the audit log and its approvals (a name no binding can have).
	// Letters, digits, '.', '_' and '-', at most 64. Empty means
	// "requires_approval".
	Name string
	// Tools lists the tools that need approval: each an exact tool name or
	// a path.Match pattern ("payments.*", "shell.?", "[ab].run"). A call
	// whose "tool" field is not a string matches none.
	Tools []string
	// Reason is the approval's reason, for the approver and the audit log.
	// Empty means "tool TOOL requires approval".
	Reason string
	// Priority orders the rule among the guards at tool.before: lower runs
	// first, and at equal priority the rule runs before the guard
	// bindings, so they see what an approver's edit made.
	Priority int
	// Approval configures its approvals, as a guard's.
	Approval ApprovalPolicy
}

// ByConfig is Step.By and Outcome.By for a decision the configuration itself
// made (a ToolApproval's ask).
const ByConfig = "config"

// ToolApprovalPrefix starts the binding name of a ToolApproval's step.
const ToolApprovalPrefix = "config:"

// toolRule is a ToolApproval ready to run.
type toolRule struct {
	tools  []string
	reason string
}

// matches reports whether ctx is a call to one of the rule's tools, and
// the tool's name.
func (r *toolRule) matches(ctx map[string]any) (string, bool) {
	tool, ok := ctx["tool"].(string)
	if !ok {
		return "", false
	}
	for _, p := range r.tools {
		if p == tool {
			return tool, true
		}
		if ok, err := path.Match(p, tool); ok && err == nil {
			return tool, true
		}
	}
	return "", false
}

// toolApprovalPoint is where a ToolApproval runs.
const toolApprovalPoint = "tool.before"

// buildToolApprovals adds cfg's tool approvals to s as guards at
// tool.before, reporting problems through bad.
func (c *Chain) buildToolApprovals(cfg Config, s *snapshot, bad func(string, ...any)) {
	point, _ := abi.LookupPoint(toolApprovalPoint)
	for i, ta := range cfg.ToolApprovals {
		name := ta.Name
		if name == "" {
			name = "requires_approval"
		}
		what := fmt.Sprintf("tool approval %d (%q)", i, name)
		if !nameRE.MatchString(name) {
			bad("%s: the name must be 1-64 letters, digits, '.', '_' or '-'", what)
			continue
		}
		full := ToolApprovalPrefix + name
		if _, dup := s.byName[full]; dup {
			bad("%s: duplicate tool approval name (give each a Name)", what)
			continue
		}
		if len(ta.Tools) == 0 {
			bad("%s: lists no tools", what)
			continue
		}
		ok := true
		for _, p := range ta.Tools {
			if _, err := path.Match(p, ""); p == "" || err != nil {
				bad("%s: tool pattern %q is not a tool name or a path.Match pattern", what, p)
				ok = false
			}
		}
		if !ok {
			continue
		}
		if ta.Approval.Timeout < 0 {
			bad("%s: negative approval timeout", what)
			continue
		}
		onExpiry, ok := expiryPolicy(ta.Approval.OnExpiry)
		if !ok {
			bad("%s: unknown approval expiry policy %q (want deny or approve)", what, onExpiry)
			continue
		}
		nb := &bound{
			Binding: Binding{Name: full, Point: toolApprovalPoint, Phase: Guard, Priority: ta.Priority},
			// Before every binding at equal priority, in the order of
			// Config.ToolApprovals.
			index: i - len(cfg.ToolApprovals), point: point, fail: FailClosed,
			timeout: ta.Approval.Timeout, onExpiry: onExpiry,
			// Takes any context: it bounds no transformer's modify.
			inputMax: math.MaxInt32,
			rule:     &toolRule{tools: append([]string(nil), ta.Tools...), reason: ta.Reason},
		}
		if nb.timeout == 0 {
			nb.timeout = DefaultApprovalTimeout
		}
		// The rule's digest stands for a module's: an approval it made is
		// resumed only by the same rule (checkApproval).
		doc, _ := abi.Marshal(struct {
			Tools    []string
			Reason   string
			Timeout  int64
			OnExpiry string
		}{nb.rule.tools, ta.Reason, int64(nb.timeout), string(onExpiry)})
		sum := sha256.Sum256(doc)
		nb.digest = hex.EncodeToString(sum[:])
		nb.key = full + "@" + nb.digest
		nb.spanStart = []trace.SpanStartOption{trace.WithAttributes(
			attribute.String("wasmhooks.binding", full),
			attribute.String("wasmhooks.phase", string(Guard)),
			attribute.Int("wasmhooks.priority", ta.Priority),
			attribute.String("wasmhooks.module", nb.digest),
		)}
		s.byName[full] = nb
		s.points[toolApprovalPoint] = append(s.points[toolApprovalPoint], nb)
	}
}

// ruleStep is the step of a tool approval whose tool matched: an ask by the
// configuration, or a continue if a human approved it earlier in this run.
func (c *Chain) ruleStep(b *bound, st *RunState, tool string) (Step, *abi.Decision) {
	reason := b.rule.reason
	if reason == "" {
		reason = fmt.Sprintf("tool %s requires approval", tool)
	}
	step := Step{
		Binding: b.Name, Module: b.digest, Phase: Guard, Priority: b.Priority, HostCalls: []audit.HostCall{},
		Applied: abi.ActionAsk, By: ByConfig, Reason: reason,
	}
	if contains(st.Approved, b.key) {
		step.Applied, step.By = abi.ActionContinue, ByApproval
		step.Ignored = "ask already approved earlier in this run"
	}
	return step, &abi.Decision{Action: abi.ActionAsk, Reason: reason}
}
