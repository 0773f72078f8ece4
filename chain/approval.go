package chain

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
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
	// Pending is what the guard put before the approver beside the
	// traffic (ABI 1.2's "pending", seed 002's requireApproval(pending)):
	// the hook's object, as it gave it; sealed with the rest.
	Pending map[string]any `json:"pending,omitempty"`
	// Editable lists the fields an approve-with-edit may set: the point's
	// changeable fields.
	Editable []string `json:"editable"`
	// Created and Expires bound the wait; OnExpiry decides at Expires.
	Created  time.Time    `json:"created"`
	Expires  time.Time    `json:"expires"`
	OnExpiry ExpiryPolicy `json:"on_expiry"`
	// State is the paused run.
	State RunState `json:"state"`
	// Seal is the host's HMAC-SHA256 of everything above, under
	// Options.ApprovalKey (hex). An approval whose seal does not verify
	// is refused on resume: a stored approval is trusted only as the host
	// wrote it.
	Seal string `json:"seal"`
}

// ErrApprovalRefused is wrapped by every *ApprovalError.
var ErrApprovalRefused = errors.New("chain: stored approval refused")

// The codes of an *ApprovalError: stable, for programs.
const (
	// ApprovalSeal: the approval is not as the host sealed it (changed,
	// forged, written without a seal, or sealed under another key).
	ApprovalSeal = "approval_seal"
	// ApprovalMismatch: the approval disagrees with itself or with the id
	// it was asked for (its run, tenant, point or id).
	ApprovalMismatch = "approval_mismatch"
	// ApprovalOutOfRange: an index in the paused run does not name the
	// binding that asked in the configuration it was paused on.
	ApprovalOutOfRange = "approval_out_of_range"
	// ApprovalStale: the binding that asked no longer guards the point with
	// the module that asked (the configuration changed). Only a deny, by
	// the approver or by expiry, can resolve it.
	ApprovalStale = "approval_stale"
	// ApprovalResolved: the approval was resolved already; a copy of it
	// put back is never resolved again.
	ApprovalResolved = "approval_resolved"
	// ApprovalCorrupt: the stored approval does not decode.
	ApprovalCorrupt = "approval_corrupt"
	// ApprovalClaimed: another resume claimed the approval and its lease
	// has not ended; try again after it (DefaultApprovalLease).
	ApprovalClaimed = "approval_claimed"
)

// ApprovalError refuses a stored approval that cannot be resumed as it
// stands. Nothing ran and nothing was recorded: the approval stays where it
// was (pending, or resolved).
type ApprovalError struct {
	// ID is the approval id asked for.
	ID string
	// Code is one of the Approval* codes.
	Code string
	// Reason says what did not match.
	Reason string
}

func (e *ApprovalError) Error() string {
	return fmt.Sprintf("chain: approval %q refused (%s): %s", e.ID, e.Code, e.Reason)
}

// Is makes every ApprovalError match ErrApprovalRefused, and a resolved one
// ErrUnknownApproval too (it is not pending).
func (e *ApprovalError) Is(target error) bool {
	return target == ErrApprovalRefused || (target == ErrUnknownApproval && e.Code == ApprovalResolved)
}

func refuse(id, code, format string, args ...any) *ApprovalError {
	return &ApprovalError{ID: id, Code: code, Reason: fmt.Sprintf(format, args...)}
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

// ApprovalStore keeps pending approvals. Resuming one is a claim and a
// commit: Take claims it for a lease, the Chain records the resolution in
// the audit log, then Done resolves it for good (a tombstone stays, so a
// copy put back is never resolved again). Of callers taking the same
// approval at once, across processes where the store is shared, one wins;
// a caller that dies between Take and Done leaves it claimable again once
// the lease ends, so an approval is never lost, and resumed once unless a
// resume outlives its lease (its Done then fails and its run stops there).
// Implementations must be safe for concurrent use; a durable one lets runs
// resume after a restart. The store is not trusted with an approval's
// content: the Chain seals each approval and checks the seal on resume
// (SECURITY.md, "Approvals"). chain/approvaltest is the conformance kit.
type ApprovalStore interface {
	// Put stores a new pending approval. An id already claimed or
	// resolved may be refused; it is never made pending again.
	Put(ctx context.Context, a *Approval) error
	// Get returns a pending approval (or one whose claim's lease has
	// ended), or an error wrapping ErrUnknownApproval, or an
	// *ApprovalError: ApprovalResolved for an id with a tombstone,
	// ApprovalClaimed while a claim's lease runs, ApprovalCorrupt for one
	// that does not decode.
	Get(ctx context.Context, id string) (*Approval, error)
	// Take claims the approval id for this store (its process) for a
	// lease and returns it: one pending, or claimed by a lease that has
	// ended. Errors as Get's; an approval that does not decode is left as
	// it was.
	Take(ctx context.Context, id string) (*Approval, error)
	// Release undoes this store's claim on id, which resolved nothing
	// (the resolution could not be audited, or the approval taken was
	// refused): a is pending again under id, whatever a.ID says.
	Release(ctx context.Context, id string, a *Approval) error
	// Done resolves id, claimed by this store: the claim becomes a
	// tombstone. It fails if the claim is no longer this store's (its
	// lease ended and another took it over).
	Done(ctx context.Context, id string) error
	// Due returns the ids of the approvals whose Expires is not after now
	// and that are pending (or claimed by a lease that has ended).
	Due(ctx context.Context, now time.Time) ([]string, error)
}

// approvalSealDomain separates the approval seal from any other MAC made
// with the same key.
const approvalSealDomain = "wasmhooks approval seal v1\n"

// seal returns a's seal: the HMAC-SHA256, under the chain's approval key, of
// the canonical JSON of a without its seal (abi.Marshal of the parsed
// encoding: keys sorted, numbers as written), so the seal of an approval is
// the same before and after a store encodes and decodes it.
func (c *Chain) seal(a *Approval) (string, error) {
	cp := *a
	cp.Seal = ""
	b, err := abi.Marshal(&cp)
	if err != nil {
		return "", err
	}
	v, err := abi.ParseJSON(b, abi.JSONLimits{MaxBytes: len(b) + 1, MaxDepth: 2*abi.DefaultMaxJSONDepth + 16})
	if err != nil {
		return "", err
	}
	if b, err = abi.Marshal(v); err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, c.approvalKey)
	m.Write([]byte(approvalSealDomain))
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil)), nil
}

// checkApproval checks a stored approval before it is resumed on s: its
// seal, that it agrees with itself and with the id asked for, and that the
// binding that asked still guards the point with the same module and sits
// where the paused run says. It returns nil or the refusal. stale refusals
// (ApprovalStale) are returned too; the caller lets a deny through them.
func (c *Chain) checkApproval(ap *Approval, id string, s *snapshot) *ApprovalError {
	want, err := c.seal(ap)
	if err != nil {
		return refuse(id, ApprovalSeal, "cannot compute its seal: %v", err)
	}
	got, herr := hex.DecodeString(ap.Seal)
	wantB, _ := hex.DecodeString(want)
	if ap.Seal == "" || herr != nil || !hmac.Equal(got, wantB) {
		return refuse(id, ApprovalSeal, "its seal does not verify under this host's approval key: it was changed, forged or sealed under another key")
	}
	st := &ap.State
	switch {
	case ap.ID != id:
		return refuse(id, ApprovalMismatch, "it is stored under id %q but says it is %q", id, ap.ID)
	case ap.Run != st.Run || ap.Tenant != st.Tenant || ap.Point != st.Point:
		return refuse(id, ApprovalMismatch, "its run, tenant or point disagree with its paused run's")
	case ap.Run == "" || ap.Tenant == "" || ap.Binding == "" || ap.Module == "":
		return refuse(id, ApprovalMismatch, "its run, tenant, binding or module is empty")
	case ap.Created.IsZero() || ap.Expires.Before(ap.Created):
		return refuse(id, ApprovalMismatch, "its expiry is before its creation")
	case ap.OnExpiry != ExpireDeny && ap.OnExpiry != ExpireApprove:
		return refuse(id, ApprovalMismatch, "unknown expiry policy %q", ap.OnExpiry)
	}
	if _, ok := c.points.Lookup(ap.Point); !ok {
		return refuse(id, ApprovalMismatch, "unknown point %q", ap.Point)
	}
	// The paused run's position: the binding before Next asked. On
	// another configuration the run restarts from the first binding, but
	// a position that no run can have is refused there too.
	list := s.points[ap.Point]
	if st.Next < 1 {
		return refuse(id, ApprovalOutOfRange, "the paused run's next binding is %d; a run paused by an ask is past its first binding", st.Next)
	}
	if st.Config == s.digest {
		if st.Next > len(list) {
			return refuse(id, ApprovalOutOfRange, "the paused run's next binding %d is past the %d bindings of %s", st.Next, len(list), ap.Point)
		}
		if b := list[st.Next-1]; b.Name != ap.Binding || b.digest != ap.Module {
			return refuse(id, ApprovalOutOfRange, "binding %d of %s is %s, not %s, the binding that asked", st.Next-1, ap.Point, b.Name, ap.Binding)
		}
	}
	b, ok := s.byName[ap.Binding]
	switch {
	case !ok || b.Point != ap.Point || b.Phase != Guard:
		return refuse(id, ApprovalStale, "binding %s no longer guards %s", ap.Binding, ap.Point)
	case b.digest != ap.Module:
		return refuse(id, ApprovalStale, "binding %s runs module %s now, not %s, the module that asked", ap.Binding, b.digest, ap.Module)
	}
	return nil
}

// newApproval makes the approval of b's ask; the caller sets its State and
// seals it.
func (c *Chain) newApproval(b *bound, st *RunState, dec *abi.Decision) *Approval {
	now := c.now().UTC()
	a := &Approval{
		ID: newID(), Run: st.Run, Tenant: st.Tenant, Point: st.Point, Binding: b.Name, Module: b.digest,
		Proposed: st.Context, Editable: append([]string(nil), b.point.Changeable...),
		Created: now, Expires: now.Add(b.timeout), OnExpiry: b.onExpiry,
	}
	if dec != nil {
		a.Reason, a.UserMessage, a.Pending = dec.Reason, dec.UserMessage, dec.Pending
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
	s := c.acquire()
	if s == nil {
		return nil, ErrClosed
	}
	defer s.release(ctx)
	ap, err := c.approvals.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := c.admit(ap, id, s, r); err != nil {
		return nil, err
	}
	if r.Decision == Edit {
		if len(r.Edit) == 0 {
			return nil, fmt.Errorf("%w: an edit sets at least one field", ErrInvalidResolution)
		}
		point, _ := c.points.Lookup(ap.Point)
		for k := range r.Edit {
			if !point.CanChange(k) {
				return nil, fmt.Errorf("%w: field %q cannot be changed at %s (editable: %s)", ErrInvalidResolution, k, ap.Point, strings.Join(point.Changeable, ", "))
			}
		}
		if r.Edit, err = normalise(r.Edit); err != nil {
			return nil, fmt.Errorf("%w: edit: %v", ErrInvalidResolution, err)
		}
		for k, v := range r.Edit {
			if err := point.CheckField(k, v); err != nil {
				return nil, fmt.Errorf("%w: edit: %v", ErrInvalidResolution, err)
			}
		}
		if err := editFits(s, ap, r.Edit); err != nil {
			return nil, fmt.Errorf("%w: edit: %v", ErrInvalidResolution, err)
		}
	}
	ap, eff, err := c.take(ctx, id, s, r)
	if err != nil {
		return nil, err
	}
	return c.resume(ctx, s, ap, r, eff)
}

// editFits reports whether the context an edit makes fits the bindings the
// resumed run goes on to (those after the asking one, or all of the point's
// when the run restarts on a changed configuration), as a transformer's
// modify must (checkModify): an approver's edit must not make a later hook
// fail by size either.
func editFits(s *snapshot, ap *Approval, edit map[string]any) error {
	st := &ap.State
	later := s.points[ap.Point]
	if st.Config == s.digest {
		later = later[st.Next:] // checkApproval checked Next
	}
	room, who, ok := roomAfter(later, st, len(st.Trace)+1)
	if !ok {
		return nil
	}
	next, _ := merge(st.Context, edit)
	size, err := contextBytes(next)
	if err != nil {
		return err
	}
	if size > room {
		return fmt.Errorf("the edited context is %d bytes; binding %s takes at most %d", size, who, room)
	}
	return nil
}

// admit checks ap, stored as id, before r resolves it on s, and returns the
// decision r makes of it now (effective): a stale approval (its binding or
// module changed) admits only a deny, by r or by expiry.
func (c *Chain) admit(ap *Approval, id string, s *snapshot, r Resolution) (effect, error) {
	eff := c.effective(ap, r)
	aerr := c.checkApproval(ap, id, s)
	if aerr == nil {
		return eff, nil
	}
	if aerr.Code == ApprovalStale && eff.decision == Deny {
		return eff, nil
	}
	c.log.Warn("chain: stored approval refused; it stays as it is", "approval", id, "code", aerr.Code, "reason", aerr.Reason)
	return effect{}, aerr
}

// take claims the pending approval id and checks the copy it claimed (the
// store may have changed between Get and Take): a refused copy is released,
// pending again. It returns the decision the copy was admitted with, which
// resume applies: the clock is not read again, so an approval that expires
// in between is not resumed with another decision than the one admitted.
func (c *Chain) take(ctx context.Context, id string, s *snapshot, r Resolution) (*Approval, effect, error) {
	ap, err := c.approvals.Take(ctx, id)
	if err != nil {
		return nil, effect{}, err
	}
	eff, err := c.admit(ap, id, s, r)
	if err != nil {
		if rerr := c.approvals.Release(context.WithoutCancel(ctx), id, ap); rerr != nil {
			c.log.Error("chain: a refused approval could not be put back", "approval", id, "error", rerr)
		}
		return nil, effect{}, err
	}
	return ap, eff, nil
}

// errNotExpired: ExpirePending took an approval that had not expired.
var errNotExpired = errors.New("chain: approval not expired")

// effect is the decision a resolution makes of an approval at one instant.
type effect struct {
	decision ResolutionDecision
	expired  bool // the approval had expired: its expiry policy decided
}

// effective is the decision r makes of ap now: r's, or the expiry policy's
// once ap has expired.
func (c *Chain) effective(ap *Approval, r Resolution) effect {
	if !c.now().Before(ap.Expires) {
		if ap.OnExpiry == ExpireApprove {
			return effect{Approve, true}
		}
		return effect{Deny, true}
	}
	return effect{r.Decision, false}
}

// ExpirePending applies the expiry policy of every pending approval whose
// expiry has passed, resuming (or blocking) their runs, and returns their
// outcomes. A platform calls it periodically; Resolve also applies the
// policy to an approval it finds expired. A stored approval that is refused
// (an *ApprovalError: tampered, or stale with an approve-on-expiry policy) is
// logged and left as it is.
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
		ap, err := c.approvals.Get(ctx, id)
		if err == nil {
			_, err = c.admit(ap, id, s, Resolution{})
		}
		var eff effect
		if err == nil {
			ap, eff, err = c.take(ctx, id, s, Resolution{})
		}
		if err == nil && !eff.expired {
			// Due but not expired when taken (the clock stepped back):
			// only its expiry policy may resolve it here, and it has
			// not come yet. Resuming it would apply the empty decision
			// as an approval.
			if rerr := c.approvals.Release(context.WithoutCancel(ctx), id, ap); rerr != nil {
				c.log.Error("chain: an unexpired approval could not be put back", "approval", id, "error", rerr)
			}
			err = errNotExpired
		}
		if err != nil {
			s.release(ctx)
			continue // resolved meanwhile, not yet expired, or refused (and logged)
		}
		out, err := c.resume(ctx, s, ap, Resolution{}, eff)
		s.release(ctx)
		if err != nil {
			return outs, err
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// resume records the resolution of ap, eff (what take admitted it with),
// and continues its run on s.
func (c *Chain) resume(ctx context.Context, s *snapshot, ap *Approval, r Resolution, eff effect) (*Outcome, error) {
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

	decision, word := eff.decision, ""
	if eff.expired {
		word = "expired"
		r = Resolution{Decision: decision, Reason: fmt.Sprintf("approval expired at %s; its expiry policy decided %s", ap.Expires.Format(time.RFC3339), decision)}
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
	var ar audit.Record
	rec, err := c.record(ctx, &ar, time.Time{}, s.digest, &st, len(st.Trace), &step, beforeD, afterD)
	if afterD != beforeD {
		beforeD.Release()
	}
	if err != nil {
		afterD.Release()
		// Nothing was decided: the approval goes back, still pending.
		if perr := c.approvals.Release(context.WithoutCancel(ctx), ap.ID, ap); perr != nil {
			c.log.Error("chain: approval lost: its resolution could not be audited nor the approval put back",
				"approval", ap.ID, "run", st.Run, "error", perr)
		}
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	// The resolution is recorded: the approval is resolved for good. If
	// this claim was taken over (this resume outlived its lease), the
	// other resume goes on and this one stops here, so the run continues
	// once.
	if err := c.approvals.Done(context.WithoutCancel(ctx), ap.ID); err != nil {
		afterD.Release()
		c.log.Error("chain: a recorded resolution could not be marked done; the run stops here and the approval is resumable after its lease",
			"approval", ap.ID, "run", st.Run, "error", err)
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	st.Trace = append(st.Trace, step)
	span.SetAttributes(attribute.String("wasmhooks.resolution", word))
	c.log.Info("chain: approval resolved", "run", st.Run, "tenant", st.Tenant, "binding", ap.Binding, "approval", ap.ID, "resolution", word, "actor", r.Actor)

	if decision == Deny {
		afterD.Release()
		out := c.outcome(s, &st, Block, []sealed{rec})
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
		st.ShortCircuit = "" // the guard that gave it runs again

	}
	out, err := c.steps(ctx, s, &st, afterD, time.Time{})
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	out.sealed = append([]sealed{rec}, out.sealed...)
	span.SetAttributes(attribute.String("wasmhooks.verdict", string(out.Verdict)))
	return out, nil
}

// DecodeApproval decodes an approval stored as id (its JSON encoding, as
// json.Marshal makes it), as the Chain's own stores do: numbers stay
// json.Number and an encoding that does not parse within the JSON limits is
// an *ApprovalError with ApprovalCorrupt. It is for ApprovalStore
// implementations in other packages.
func DecodeApproval(id string, b []byte) (*Approval, error) { return decodeApproval(id, b) }

// decodeApproval decodes a stored approval, keeping numbers as json.Number
// so the context a hook sees after a restart is the one it would have seen.
func decodeApproval(id string, b []byte) (*Approval, error) {
	if _, err := abi.ParseJSON(b, abi.JSONLimits{MaxBytes: len(b) + 1, MaxDepth: 2*abi.DefaultMaxJSONDepth + 16}); err != nil {
		return nil, refuse(id, ApprovalCorrupt, "%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var a Approval
	if err := dec.Decode(&a); err != nil {
		return nil, refuse(id, ApprovalCorrupt, "%v", err)
	}
	return &a, nil
}

// DefaultApprovalLease is how long a claim on an approval (Take) holds
// before another process may claim it again: the time a resume has to
// record its resolution in the audit log and mark the approval Done. A
// process that dies while resuming leaves its approval resumable once the
// lease ends; one paused longer than its lease may see its claim taken over
// (its Done then fails and its run does not continue). Stores take it as
// their Lease field; zero means this.
const DefaultApprovalLease = 30 * time.Second

// The states of a stored approval, in MemoryApprovals and the SQL stores.
const (
	approvalPending = iota
	approvalClaimed
	approvalDone
)

// claimRefusal is the refusal of a claim on id that the caller cannot take:
// state is the approval's, live whether a claim's lease has not ended.
func claimRefusal(id string, state int) error {
	switch state {
	case approvalDone:
		return refuse(id, ApprovalResolved, "it was resolved already")
	case approvalClaimed:
		return refuse(id, ApprovalClaimed, "another resume holds it; it can be resumed again if that one does not finish within its lease")
	}
	return fmt.Errorf("%w: %q", ErrUnknownApproval, id)
}

// MemoryApprovals keeps pending approvals in memory, encoded as JSON (so
// every resume goes through the same encoding a durable store would). It is
// safe for concurrent use. Take claims an approval for Lease; Done turns the
// claim into a tombstone kept for the store's life.
type MemoryApprovals struct {
	// Lease is how long a claim holds; zero means DefaultApprovalLease.
	// Now is the clock of the leases; nil means time.Now. Set both
	// before use.
	Lease time.Duration
	Now   func() time.Time

	mu    sync.Mutex // guards items
	items map[string]*memApproval
	owner string
}

// memApproval is a stored approval. A done one keeps no data: it is a
// tombstone.
type memApproval struct {
	data    []byte
	expires time.Time
	state   int
	owner   string
	lease   time.Time // a claim's end
}

// NewMemoryApprovals returns an empty MemoryApprovals.
func NewMemoryApprovals() *MemoryApprovals {
	return &MemoryApprovals{items: map[string]*memApproval{}, owner: newID()}
}

func leaseOf(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultApprovalLease
	}
	return d
}

func (m *MemoryApprovals) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// free reports whether it may be claimed (or read) now: pending, or
// claimed by a lease that has ended.
func (it *memApproval) free(now time.Time) bool {
	return it.state == approvalPending || (it.state == approvalClaimed && !now.Before(it.lease))
}

// Put stores a. An id already resolved or claimed is refused.
func (m *MemoryApprovals) Put(_ context.Context, a *Approval) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if it, ok := m.items[a.ID]; ok && it.state != approvalPending {
		return claimRefusal(a.ID, it.state)
	}
	m.items[a.ID] = &memApproval{data: b, expires: a.Expires}
	return nil
}

// Get returns a copy of the approval id, pending or claimed by a lease that
// has ended.
func (m *MemoryApprovals) Get(_ context.Context, id string) (*Approval, error) {
	m.mu.Lock()
	it, err := m.free(id, m.now())
	var data []byte
	if err == nil {
		data = it.data
	}
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return decodeApproval(id, data)
}

// Take claims the approval id for Lease and returns it.
func (m *MemoryApprovals) Take(_ context.Context, id string) (*Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	it, err := m.free(id, now)
	if err != nil {
		return nil, err
	}
	a, err := decodeApproval(id, it.data)
	if err != nil {
		return nil, err // left as it was
	}
	it.state, it.owner, it.lease = approvalClaimed, m.owner, now.Add(leaseOf(m.Lease))
	return a, nil
}

// free returns id's item if it is free at now (see memApproval.free), or
// the refusal.
func (m *MemoryApprovals) free(id string, now time.Time) (*memApproval, error) {
	it, ok := m.items[id]
	switch {
	case !ok:
		return nil, claimRefusal(id, approvalPending)
	case !it.free(now):
		return nil, claimRefusal(id, it.state)
	}
	return it, nil
}

// mine returns id's item if this store claims it, or the refusal.
func (m *MemoryApprovals) mine(id string) (*memApproval, error) {
	it, ok := m.items[id]
	switch {
	case !ok:
		return nil, claimRefusal(id, approvalPending)
	case it.state == approvalClaimed && it.owner == m.owner:
		return it, nil
	case it.state == approvalPending:
		return nil, fmt.Errorf("%w: %q is not claimed", ErrUnknownApproval, id)
	}
	return nil, claimRefusal(id, it.state)
}

// Release makes a, claimed as id, pending again.
func (m *MemoryApprovals) Release(_ context.Context, id string, a *Approval) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return m.replaceMine(id, memApproval{data: b, expires: a.Expires})
}

// Done marks the approval id, claimed by this store, resolved.
func (m *MemoryApprovals) Done(_ context.Context, id string) error {
	return m.replaceMine(id, memApproval{state: approvalDone})
}

// replaceMine replaces id's item, if this store claims it, with next.
func (m *MemoryApprovals) replaceMine(id string, next memApproval) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, err := m.mine(id)
	if err != nil {
		return err
	}
	*it = next
	return nil
}

// Due returns the ids of approvals that expired by now and are pending (or
// claimed by a lease that has ended), sorted.
func (m *MemoryApprovals) Due(_ context.Context, now time.Time) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	lnow := m.now()
	var ids []string
	for id, it := range m.items {
		if it.free(lnow) && !now.Before(it.expires) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Len returns the number of approvals not resolved (pending or claimed).
func (m *MemoryApprovals) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, it := range m.items {
		if it.state != approvalDone {
			n++
		}
	}
	return n
}

// DirApprovals keeps pending approvals as JSON files in a directory, one per
// approval, so a run paused by one process can be resumed by another (the
// CLI does this). A pending approval is ID.json. Take claims it by renaming
// it to ID.claim-OWNER-LEASE (a rename: of two processes one wins) and
// leaves a tombstone (ID.resolved, an empty file); Done removes the claim,
// and the tombstone stays for ever: a copy of a resolved approval put back
// is refused. A claim whose lease has ended is claimed again by renaming it.
// It is safe for concurrent use. Whoever can write the directory can delete
// approvals and tombstones, but cannot make or change an approval the Chain
// accepts without its approval key (SECURITY.md, "Approvals").
type DirApprovals struct {
	// Lease is how long a claim holds; zero means DefaultApprovalLease.
	// Now is the clock of the leases; nil means time.Now. Set both
	// before use.
	Lease time.Duration
	Now   func() time.Time

	dir   string
	owner string
}

// NewDirApprovals returns a DirApprovals over dir, creating it if needed.
func NewDirApprovals(dir string) (*DirApprovals, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &DirApprovals{dir: dir, owner: newID()}, nil
}

var idRE = regexp.MustCompile(`^[0-9a-f]{1,64}$`)

// MaxApprovalBytes bounds the file of one approval in a DirApprovals: Put
// refuses to write a larger one, and Get and Take refuse to read one (or
// anything but a regular file) as ApprovalCorrupt. It defends the host
// against whoever can write the directory planting a huge sparse file, a
// link to /dev/zero (read until memory runs out) or a FIFO (Get, Due and so
// ExpirePending blocked for ever). An approval holds its context twice
// (Proposed and the paused run's), so this admits contexts of about 30 MiB.
const MaxApprovalBytes = 64 << 20

// readApproval reads and decodes the approval file p, stored as id.
func readApproval(id, p string) (*Approval, error) {
	b, err := runtime.ReadFileLimit(p, MaxApprovalBytes, "approval_bytes")
	var le *runtime.LimitError
	switch {
	case errors.Is(err, runtime.ErrNotRegularFile), errors.As(err, &le):
		return nil, refuse(id, ApprovalCorrupt, "%v", err)
	case err != nil:
		return nil, err
	}
	return decodeApproval(id, b)
}

func (d *DirApprovals) path(id string) (string, error) {
	if !idRE.MatchString(id) {
		return "", fmt.Errorf("%w: %q is not an approval id", ErrUnknownApproval, id)
	}
	return filepath.Join(d.dir, id+".json"), nil
}

func (d *DirApprovals) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// dirClaim is a claim file: its path, owner and lease's end.
type dirClaim struct {
	path  string
	owner string
	lease time.Time
}

// claimPath is the claim file of p (ID.json) by owner until lease.
func claimPath(p, owner string, lease time.Time) string {
	return strings.TrimSuffix(p, ".json") + ".claim-" + owner + "-" + strconv.FormatInt(lease.UnixNano(), 10)
}

// claim returns the claim on p (ID.json), if any. Names that do not parse
// are ignored (and so never read).
func (d *DirApprovals) claim(p string) (*dirClaim, error) {
	names, err := filepath.Glob(strings.TrimSuffix(p, ".json") + ".claim-*")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, n := range names {
		_, rest, _ := strings.Cut(filepath.Base(n), ".claim-")
		owner, ns, ok := strings.Cut(rest, "-")
		v, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil || !idRE.MatchString(owner) {
			continue
		}
		return &dirClaim{path: n, owner: owner, lease: time.Unix(0, v)}, nil
	}
	return nil, nil
}

// Put writes a to its file, atomically. An id resolved or claimed is
// refused.
func (d *DirApprovals) Put(_ context.Context, a *Approval) error {
	p, err := d.path(a.ID)
	if err != nil {
		return err
	}
	if c, err := d.claim(p); err != nil {
		return err
	} else if c != nil {
		return claimRefusal(a.ID, approvalClaimed)
	}
	if err := d.resolved(a.ID, p); err != nil {
		return err
	}
	return d.write(p, a)
}

// write writes a to p, atomically.
func (d *DirApprovals) write(p string, a *Approval) error {
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	if len(b) > MaxApprovalBytes {
		return fmt.Errorf("chain: approval %s: %w", a.ID, &runtime.LimitError{Limit: "approval_bytes", Max: MaxApprovalBytes, Got: uint64(len(b))})
	}
	// A new file of a random name (O_EXCL): a name planted in the
	// directory (a symlink, say) is never written through.
	f, err := os.CreateTemp(d.dir, filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err = f.Write(b); err == nil {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// tomb is the path of id's tombstone; p is its approval's path.
func tomb(p string) string { return strings.TrimSuffix(p, ".json") + ".resolved" }

func (d *DirApprovals) resolved(id, p string) error {
	if _, err := os.Lstat(tomb(p)); err == nil {
		return refuse(id, ApprovalResolved, "it was resolved already (its tombstone is %s)", filepath.Base(tomb(p)))
	} else if !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Get reads the approval id: pending, or claimed by a lease that has ended.
func (d *DirApprovals) Get(_ context.Context, id string) (*Approval, error) {
	p, err := d.path(id)
	if err != nil {
		return nil, err
	}
	c, err := d.claim(p)
	switch {
	case err != nil:
		return nil, err
	case c != nil && d.now().Before(c.lease):
		return nil, claimRefusal(id, approvalClaimed)
	case c != nil:
		a, err := readApproval(id, c.path)
		if os.IsNotExist(err) { // claimed again, or done, meanwhile
			return nil, claimRefusal(id, approvalClaimed)
		}
		return a, err
	}
	if err := d.resolved(id, p); err != nil {
		return nil, err
	}
	a, err := readApproval(id, p)
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownApproval, id)
	}
	return a, err
}

// Take claims the approval id for Lease: it renames its file (or a claim
// whose lease has ended) to a claim of its own and leaves its tombstone.
func (d *DirApprovals) Take(_ context.Context, id string) (*Approval, error) {
	p, err := d.path(id)
	if err != nil {
		return nil, err
	}
	now := d.now()
	mine := claimPath(p, d.owner, now.Add(leaseOf(d.Lease)))
	c, err := d.claim(p)
	switch {
	case err != nil:
		return nil, err
	case c != nil && now.Before(c.lease):
		return nil, claimRefusal(id, approvalClaimed)
	case c != nil:
		// A claim whose lease ended: its process died (or stalled)
		// while resuming. Claim it again; of two, one rename wins.
		if err := os.Rename(c.path, mine); err != nil {
			if os.IsNotExist(err) {
				return nil, claimRefusal(id, approvalClaimed)
			}
			return nil, err
		}
		if err := touch(tomb(p), false); err != nil {
			return nil, err
		}
		return d.readClaim(id, p, mine)
	}
	if err := d.resolved(id, p); err != nil {
		return nil, err
	}
	if err := os.Rename(p, mine); err != nil {
		if os.IsNotExist(err) {
			// Another Take won the rename: its claim, or the tombstone
			// its Done left, says so.
			if c, _ := d.claim(p); c != nil {
				return nil, claimRefusal(id, approvalClaimed)
			}
			if err := d.resolved(id, p); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %q", ErrUnknownApproval, id)
		}
		return nil, err
	}
	if err := touch(tomb(p), true); err != nil {
		// Resolved meanwhile (a copy was put back and taken): leave the
		// copy where it was.
		_ = os.Rename(mine, p)
		if os.IsExist(err) {
			return nil, refuse(id, ApprovalResolved, "it was resolved already")
		}
		return nil, err
	}
	return d.readClaim(id, p, mine)
}

// readClaim reads the approval claimed as mine; one that cannot be read is
// put back as it was.
func (d *DirApprovals) readClaim(id, p, mine string) (*Approval, error) {
	a, err := readApproval(id, mine)
	if err != nil {
		if rerr := os.Rename(mine, p); rerr == nil {
			os.Remove(tomb(p))
		}
		return nil, err
	}
	return a, nil
}

// touch creates the empty file p; excl refuses one that exists.
func touch(p string, excl bool) error {
	flag := os.O_WRONLY | os.O_CREATE
	if excl {
		flag |= os.O_EXCL
	}
	t, err := os.OpenFile(p, flag, 0o600)
	if err != nil {
		return err
	}
	return t.Close()
}

// mine returns the path of approval id's file (ID.json) and this store's
// claim on it, or the refusal.
func (d *DirApprovals) mine(id string) (string, *dirClaim, error) {
	p, err := d.path(id)
	if err != nil {
		return "", nil, err
	}
	c, err := d.claim(p)
	switch {
	case err != nil:
		return "", nil, err
	case c == nil:
		if err := d.resolved(id, p); err != nil {
			return "", nil, err
		}
		return "", nil, fmt.Errorf("%w: %q is not claimed", ErrUnknownApproval, id)
	case c.owner != d.owner:
		return "", nil, claimRefusal(id, approvalClaimed)
	}
	return p, c, nil
}

// Release makes a, claimed as id, pending again: it writes its file, then
// removes its tombstone and its claim.
func (d *DirApprovals) Release(_ context.Context, id string, a *Approval) error {
	p, c, err := d.mine(id)
	if err != nil {
		return err
	}
	if err := d.write(p, a); err != nil {
		return err
	}
	if err := os.Remove(tomb(p)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.Remove(c.path)
}

// Done marks the approval id, claimed by this store, resolved: its
// tombstone stays and its claim goes.
func (d *DirApprovals) Done(_ context.Context, id string) error {
	p, c, err := d.mine(id)
	if err != nil {
		return err
	}
	if err := touch(tomb(p), false); err != nil {
		return err
	}
	return os.Remove(c.path)
}

// Due returns the ids of approvals that expired by now and are pending (or
// claimed by a lease that has ended), sorted.
func (d *DirApprovals) Due(ctx context.Context, now time.Time) ([]string, error) {
	pending, err := filepath.Glob(filepath.Join(d.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	claimed, err := filepath.Glob(filepath.Join(d.dir, "*.claim-*"))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var ids []string
	for _, n := range append(pending, claimed...) {
		id, _, _ := strings.Cut(filepath.Base(n), ".")
		if seen[id] {
			continue
		}
		seen[id] = true
		a, err := d.Get(ctx, id)
		if err != nil {
			continue // claimed or resolved meanwhile, or not ours
		}
		if !now.Before(a.Expires) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}
