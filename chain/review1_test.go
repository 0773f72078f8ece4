package chain

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// takeClock is a clock that, once its store's Take has returned, reads the
// time before the approval's expiry once and past it ever after: the
// approval expires between the last check of the approval and its
// resumption.
type takeClock struct {
	mu           sync.Mutex
	before, past time.Time
	taken        bool
	reads        int
}

func (c *takeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.taken {
		return c.before
	}
	c.reads++
	if c.reads == 1 {
		return c.before
	}
	return c.past
}

type takeStore struct {
	*MemoryApprovals
	clock *takeClock
}

func (s takeStore) Take(ctx context.Context, id string) (*Approval, error) {
	a, err := s.MemoryApprovals.Take(ctx, id)
	s.clock.mu.Lock()
	s.clock.taken = true
	s.clock.mu.Unlock()
	return a, err
}

// TestResolveDecidesOnce: the decision an approval is resumed with is the one
// it was admitted with. A human's deny of a stale approval (its binding now
// runs another module) whose expiry policy approves was admitted as a deny,
// then resumed as "expired, approved" when the clock crossed its expiry in
// between: a stale approval resolved by approve, and a human's deny turned
// into an approval.
func TestResolveDecidesOnce(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := &takeClock{before: t0, past: t0.Add(time.Hour)}
	store := takeStore{NewMemoryApprovals(), clk}
	e := newEnv(t, approvalConfig(t, ExpireApprove), func(o *Options) { o.Approvals = store; o.Now = clk.Now })
	ap := e.run(t, toolBefore, shellCall("ls")).Approval
	if ap == nil {
		t.Fatal("no approval")
	}
	cfg := approvalConfig(t, ExpireApprove)
	cfg.Modules["policy2"] = withCustomSection(cfg.Modules["policy"])
	cfg.Bindings[1].Module = "policy2"
	if err := e.c.Reload(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	out, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Deny, Actor: "bob", Reason: "no"})
	var ae *ApprovalError
	switch {
	case errors.As(err, &ae):
		// Refused as it stood when it was checked: acceptable, nothing ran.
	case err != nil:
		t.Fatal(err)
	case out.Verdict != Block:
		t.Fatalf("a deny admitted for a stale approval resumed as %s (%s); want block", out.Verdict, out.Trace[len(out.Trace)-1].Resolution)
	}
}
