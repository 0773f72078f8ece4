package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// Approval is a run paused by a guard's ask, waiting for a human. It holds
// everything needed to resume the run, here or in another process after a
// restart, and encodes to JSON. See RATIONALE.md#why-do-approvals-pause-the-run.
type Approval struct {
	// ID identifies the approval (lower-case hex).
	ID     string `json:"id"`
	Run    string `json:"run"`
	Tenant string `json:"tenant"`
	Point  string `json:"point"`
	// Binding asked; Module is the hex sha256 of its module.
	Binding string `json:"binding"`
	Module  string `json:"module"`
	// Reason and UserMessage are the hook's, from its ask.
	Reason      string `json:"reason,omitempty"`
	UserMessage string `json:"user_message,omitempty"`
	// Proposed is the traffic awaiting approval: the context as it stood
	// when the guard asked (a tool call and its arguments, say).
	Proposed map[string]any `json:"proposed"`
	// Editable lists the fields an approve-with-edit may set: the point's
	// changeable fields.
	Editable []string `json:"editable"`
	// Created and Expires bound the wait; OnExpiry decides at Expires.
	Created  time.Time    `json:"created"`
	Expires  time.Time    `json:"expires"`
	OnExpiry ExpiryPolicy `json:"on_expiry"`
	// State is the paused run.
	State RunState `json:"state"`
}

// ResolutionDecision is what an approver decided.
type ResolutionDecision string

// Resolution decisions.
const (
	// Approve continues the run with the next binding.
	Approve ResolutionDecision = "approve"
	// Deny ends the run with a block.
	Deny ResolutionDecision = "deny"
	// Edit replaces some of the point's changeable fields with
	// Resolution.Edit, then continues like Approve.
	Edit ResolutionDecision = "edit"
)

// Resolution resolves a pending approval.
type Resolution struct {
	// Decision is approve, deny or edit.
	Decision ResolutionDecision `json:"decision"`
	// Edit holds the fields an Edit sets; each must be one of the
	// approval's Editable fields.
	Edit map[string]any `json:"edit,omitempty"`
	// Actor names who resolved it, for the audit log.
	Actor string `json:"actor,omitempty"`
	// Reason is the approver's note: the block's reason on a deny.
	Reason string `json:"reason,omitempty"`
}

// ApprovalStore keeps pending approvals. Take must hand an approval to one
// caller only, so an approval is resolved exactly once. Implementations must
// be safe for concurrent use; a durable one lets runs resume after a
// restart.
type ApprovalStore interface {
	// Put stores a new pending approval.
	Put(ctx context.Context, a *Approval) error
	// Get returns a pending approval, or an error wrapping
	// ErrUnknownApproval.
	Get(ctx context.Context, id string) (*Approval, error)
	// Take removes a pending approval and returns it, or an error wrapping
	// ErrUnknownApproval if it is not (or no longer) pending.
	Take(ctx context.Context, id string) (*Approval, error)
	// Due returns the ids of the approvals whose Expires is not after now.
	Due(ctx context.Context, now time.Time) ([]string, error)
}

func (c *Chain) newApproval(b *bound, st *RunState, dec *abi.Decision) *Approval {
	now := c.now().UTC()
	a := &Approval{
		ID: newID(), Run: st.Run, Tenant: st.Tenant, Point: st.Point, Binding: b.Name, Module: b.digest,
		Proposed: st.Context, Editable: append([]string(nil), b.point.Changeable...),
		Created: now, Expires: now.Add(b.timeout), OnExpiry: b.onExpiry,
	}
	if dec != nil {
		a.Reason, a.UserMessage = dec.Reason, dec.UserMessage
	}
	return a
}

// Resolve resolves the pending approval id and resumes its run from where it
// paused: approve continues with the next binding, edit sets the edited
// fields and continues, deny blocks. An approval past its expiry is decided
// by its binding's expiry policy instead, whatever r says; the trace and the
// audit record say "expired". A resolution that is not valid (an edit of a
// field the point does not allow to change, say) returns an error wrapping
// ErrInvalidResolution and leaves the approval pending.
//
// If the configuration changed since the run paused, the run restarts from
// the first binding on the configuration in force, with the approval
// applied; the approved binding is not asked again in that run.
func (c *Chain) Resolve(ctx context.Context, id string, r Resolution) (*Outcome, error) {
	switch r.Decision {
	case Approve, Deny:
		if r.Edit != nil {
			return nil, fmt.Errorf("%w: only an edit carries fields", ErrInvalidResolution)
		}
	case Edit:
	default:
		return nil, fmt.Errorf("%w: unknown decision %q (want approve, deny or edit)", ErrInvalidResolution, r.Decision)
	}
	ap, err := c.approvals.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Decision == Edit {
		if len(r.Edit) == 0 {
			return nil, fmt.Errorf("%w: an edit sets at least one field", ErrInvalidResolution)
		}
		point, _ := abi.LookupPoint(ap.Point)
		for k := range r.Edit {
			if !point.CanChange(k) {
				return nil, fmt.Errorf("%w: field %q cannot be changed at %s (editable: %s)", ErrInvalidResolution, k, ap.Point, strings.Join(point.Changeable, ", "))
			}
		}
		if r.Edit, err = normalise(r.Edit); err != nil {
			return nil, fmt.Errorf("%w: edit: %v", ErrInvalidResolution, err)
		}
	}
	s := c.acquire()
	if s == nil {
		return nil, ErrClosed
	}
	defer s.release(ctx)
	if ap, err = c.approvals.Take(ctx, id); err != nil {
		return nil, err
	}
	return c.resume(ctx, s, ap, r)
}

// ExpirePending applies the expiry policy of every pending approval whose
// expiry has passed, resuming (or blocking) their runs, and returns their
// outcomes. A platform calls it periodically; Resolve also applies the
// policy to an approval it finds expired.
func (c *Chain) ExpirePending(ctx context.Context) ([]*Outcome, error) {
	ids, err := c.approvals.Due(ctx, c.now())
	if err != nil {
		return nil, err
	}
	var outs []*Outcome
	for _, id := range ids {
		s := c.acquire()
		if s == nil {
			return outs, ErrClosed
		}
		ap, err := c.approvals.Take(ctx, id)
		if err != nil {
			s.release(ctx)
			continue // resolved meanwhile
		}
		out, err := c.resume(ctx, s, ap, Resolution{})
		s.release(ctx)
		if err != nil {
			return outs, err
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// resume records the resolution of ap and continues its run on s.
func (c *Chain) resume(ctx context.Context, s *snapshot, ap *Approval, r Resolution) (*Outcome, error) {
	st := ap.State
	ctx, span := c.tracer.Start(ctx, "chain.resume", trace.WithAttributes(
		attribute.String("wasmhooks.run", st.Run),
		attribute.String("wasmhooks.tenant", st.Tenant),
		attribute.String("wasmhooks.point", st.Point),
		attribute.String("wasmhooks.config", s.digest),
		attribute.String("wasmhooks.approval", ap.ID),
	))
	defer span.End()
	start := time.Now()

	decision, word := r.Decision, ""
	if !c.now().Before(ap.Expires) {
		word = "expired"
		decision = Deny
		if ap.OnExpiry == ExpireApprove {
			decision = Approve
		}
		r = Resolution{Decision: decision, Reason: fmt.Sprintf("approval expired at %s; the expiry policy %ss", ap.Expires.Format(time.RFC3339), decision)}
	}
	step := Step{
		Binding: ap.Binding, Module: ap.Module, Phase: Guard, By: ByApproval, Approval: ap.ID,
		Actor: r.Actor, Reason: r.Reason, HostCalls: []audit.HostCall{},
	}
	if b, ok := s.byName[ap.Binding]; ok {
		step.Priority = b.Priority
	}
	before, after := st.Context, st.Context
	switch decision {
	case Deny:
		step.Applied = abi.ActionBlock
		if word == "" {
			word = "denied"
		}
	case Edit:
		word = "edited"
		after, step.Changed = merge(before, r.Edit)
		step.Applied = abi.ActionModify
		if len(step.Changed) == 0 {
			step.Applied, after = abi.ActionContinue, before
		}
	default:
		step.Applied = abi.ActionContinue
		if word == "" {
			word = "approved"
		}
	}
	step.Resolution = word
	step.LatencyUS = time.Since(start).Microseconds()
	// afterD holds the digests of the context the run goes on with; steps
	// releases it, or this function does where it returns first.
	beforeD := audit.AcquireDigests()
	beforeD.Reset(before)
	afterD := beforeD
	if step.Applied == abi.ActionModify {
		afterD = audit.AcquireDigests()
		afterD.Reset(after)
	}
	rec, err := c.record(ctx, s.digest, &st, ap.Binding, Guard, ap.Module, &step, beforeD, afterD)
	if afterD != beforeD {
		beforeD.Release()
	}
	if err != nil {
		afterD.Release()
		// Nothing was decided: the approval goes back, still pending.
		if perr := c.approvals.Put(context.WithoutCancel(ctx), ap); perr != nil {
			c.log.Error("chain: approval lost: its resolution could not be audited nor the approval put back",
				"approval", ap.ID, "run", st.Run, "error", perr)
		}
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	st.Trace = append(st.Trace, step)
	span.SetAttributes(attribute.String("wasmhooks.resolution", word))
	c.log.Info("chain: approval resolved", "run", st.Run, "tenant", st.Tenant, "binding", ap.Binding, "approval", ap.ID, "resolution", word, "actor", r.Actor)

	if decision == Deny {
		afterD.Release()
		out := c.outcome(s, &st, Block, []audit.Record{rec})
		out.Binding, out.By = ap.Binding, ByApproval
		out.Reason = r.Reason
		if out.Reason == "" {
			out.Reason = "denied by the approver"
		}
		span.SetAttributes(attribute.String("wasmhooks.verdict", string(Block)))
		return out, nil
	}
	if step.Applied == abi.ActionModify {
		st.Context, st.Modified = after, true
	}
	if st.Config != s.digest {
		// The configuration changed while the run was paused: where it
		// paused means nothing in the new one. Start again on it, with
		// the approval granted.
		c.log.Info("chain: configuration changed while the run was paused; restarting it on the configuration in force",
			"run", st.Run, "was", st.Config, "now", s.digest)
		st.Next, st.Config = 0, s.digest
		st.Approved = append(st.Approved, ap.Binding+"@"+ap.Module)
	}
	out, err := c.steps(ctx, s, &st, afterD)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	out.Audit = append([]audit.Record{rec}, out.Audit...)
	span.SetAttributes(attribute.String("wasmhooks.verdict", string(out.Verdict)))
	return out, nil
}

// decodeApproval decodes a stored approval, keeping numbers as json.Number
// so the context a hook sees after a restart is the one it would have seen.
func decodeApproval(b []byte) (*Approval, error) {
	if _, err := abi.ParseJSON(b, abi.JSONLimits{MaxBytes: len(b) + 1, MaxDepth: 2*abi.DefaultMaxJSONDepth + 16}); err != nil {
		return nil, fmt.Errorf("chain: stored approval: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var a Approval
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("chain: stored approval: %w", err)
	}
	return &a, nil
}

// MemoryApprovals keeps pending approvals in memory, encoded as JSON (so
// every resume goes through the same encoding a durable store would). It is
// safe for concurrent use.
type MemoryApprovals struct {
	mu    sync.Mutex // guards items
	items map[string]storedApproval
}

type storedApproval struct {
	data    []byte
	expires time.Time
}

// NewMemoryApprovals returns an empty MemoryApprovals.
func NewMemoryApprovals() *MemoryApprovals {
	return &MemoryApprovals{items: map[string]storedApproval{}}
}

// Put stores a.
func (m *MemoryApprovals) Put(_ context.Context, a *Approval) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[a.ID] = storedApproval{data: b, expires: a.Expires}
	return nil
}

// Get returns a copy of the pending approval id.
func (m *MemoryApprovals) Get(_ context.Context, id string) (*Approval, error) {
	m.mu.Lock()
	it, ok := m.items[id]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownApproval, id)
	}
	return decodeApproval(it.data)
}

// Take removes and returns the pending approval id.
func (m *MemoryApprovals) Take(_ context.Context, id string) (*Approval, error) {
	m.mu.Lock()
	it, ok := m.items[id]
	delete(m.items, id)
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownApproval, id)
	}
	return decodeApproval(it.data)
}

// Due returns the ids of approvals that expired by now, sorted.
func (m *MemoryApprovals) Due(_ context.Context, now time.Time) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id, it := range m.items {
		if !now.Before(it.expires) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Len returns the number of pending approvals.
func (m *MemoryApprovals) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}

// DirApprovals keeps pending approvals as JSON files in a directory, one per
// approval, so a run paused by one process can be resumed by another (the
// CLI does this). Take renames the file before reading it, so of two
// processes taking the same approval one wins. It is safe for concurrent use.
type DirApprovals struct {
	dir string
}

// NewDirApprovals returns a DirApprovals over dir, creating it if needed.
func NewDirApprovals(dir string) (*DirApprovals, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &DirApprovals{dir: dir}, nil
}

var idRE = regexp.MustCompile(`^[0-9a-f]{1,64}$`)

func (d *DirApprovals) path(id string) (string, error) {
	if !idRE.MatchString(id) {
		return "", fmt.Errorf("%w: %q is not an approval id", ErrUnknownApproval, id)
	}
	return filepath.Join(d.dir, id+".json"), nil
}

// Put writes a to its file, atomically.
func (d *DirApprovals) Put(_ context.Context, a *Approval) error {
	p, err := d.path(a.ID)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// Get reads the pending approval id.
func (d *DirApprovals) Get(_ context.Context, id string) (*Approval, error) {
	p, err := d.path(id)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownApproval, id)
	}
	if err != nil {
		return nil, err
	}
	return decodeApproval(b)
}

// Take claims the pending approval id and removes its file.
func (d *DirApprovals) Take(_ context.Context, id string) (*Approval, error) {
	p, err := d.path(id)
	if err != nil {
		return nil, err
	}
	claimed := p + ".taken-" + newID()
	if err := os.Rename(p, claimed); err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%w: %q", ErrUnknownApproval, id)
		}
		return nil, err
	}
	defer os.Remove(claimed)
	b, err := os.ReadFile(claimed)
	if err != nil {
		return nil, err
	}
	return decodeApproval(b)
}

// Due returns the ids of approvals that expired by now, sorted.
func (d *DirApprovals) Due(ctx context.Context, now time.Time) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(d.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, n := range names {
		id := strings.TrimSuffix(filepath.Base(n), ".json")
		a, err := d.Get(ctx, id)
		if err != nil {
			continue // taken meanwhile, or not ours
		}
		if !now.Before(a.Expires) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}
