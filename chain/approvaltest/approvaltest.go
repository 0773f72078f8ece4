// Package approvaltest is a conformance kit for chain.ApprovalStore
// implementations: call Run from a test with a function that makes a fresh,
// empty store (and, where the store is shared between processes, a second
// handle on it, as another process would open it), and it checks the
// contract chain.ApprovalStore documents, each rule as a subtest, including
// claims raced from many goroutines and leases that end.
//
//	func TestApprovalConformance(t *testing.T) {
//		approvaltest.Run(t, func(t *testing.T, h approvaltest.Clock) approvaltest.Harness {
//			m := chain.NewMemoryApprovals()
//			m.Now, m.Lease = h.Now, approvaltest.Lease
//			return approvaltest.Harness{A: m}
//		})
//	}
package approvaltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// Lease is the claim lease the stores under test must use.
const Lease = time.Minute

// Callers is how many goroutines race for one approval.
const Callers = 16

// Clock is the fake clock the stores under test must read their leases
// from; the kit advances it past a lease.
type Clock interface{ Now() time.Time }

// Harness is one fresh store under test.
type Harness struct {
	// A is the store, with Lease as its lease and the kit's clock.
	A chain.ApprovalStore
	// B, if set, is another handle on the same stored approvals with
	// claims of its own, as another process would open it (nil for a
	// store that lives in one process).
	B chain.ApprovalStore
}

var seq atomic.Uint64

// approval returns a new approval expiring after d from c's now. Its seal
// is not genuine: stores do not check seals, the chain does.
func approval(c Clock, d time.Duration) *chain.Approval {
	now := c.Now().UTC()
	id := fmt.Sprintf("%016x%08x", time.Now().UnixNano(), seq.Add(1))
	return &chain.Approval{
		ID: id, Run: "run-" + id, Tenant: "acme", Point: "tool.before", Binding: "ask", Module: "00ff",
		Reason: "needs a human", Proposed: map[string]any{"tool": "shell.exec", "n": 1},
		Editable: []string{"arguments"}, Created: now, Expires: now.Add(d), OnExpiry: chain.ExpireDeny,
		State: chain.RunState{Run: "run-" + id, Tenant: "acme", Point: "tool.before", Next: 1},
		Seal:  "0123",
	}
}

func code(err error) string {
	var ae *chain.ApprovalError
	if errors.As(err, &ae) {
		return ae.Code
	}
	if errors.Is(err, chain.ErrUnknownApproval) {
		return "unknown"
	}
	if err == nil {
		return "nil"
	}
	return "other: " + err.Error()
}

// Run checks the contract of chain.ApprovalStore on stores made by open,
// one per subtest.
func Run(t *testing.T, open func(t *testing.T, c Clock) Harness) {
	ctx := context.Background()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	setup := func(t *testing.T) (*testutil.Clock, Harness) {
		c := testutil.NewClock(start)
		return c, open(t, c)
	}
	put := func(t *testing.T, s chain.ApprovalStore, a *chain.Approval) {
		t.Helper()
		if err := s.Put(ctx, a); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	take := func(t *testing.T, s chain.ApprovalStore, id string) *chain.Approval {
		t.Helper()
		a, err := s.Take(ctx, id)
		if err != nil {
			t.Fatalf("Take: %v", err)
		}
		return a
	}
	resolve := func(t *testing.T, s chain.ApprovalStore, id string) {
		t.Helper()
		if err := s.Done(ctx, id); err != nil {
			t.Fatalf("Done: %v", err)
		}
	}
	// cannotFinish checks that s may neither resolve nor release a, which
	// whose describes.
	cannotFinish := func(t *testing.T, s chain.ApprovalStore, a *chain.Approval, whose string) {
		t.Helper()
		if err := s.Done(ctx, a.ID); err == nil {
			t.Fatalf("Done of %s succeeded", whose)
		}
		if err := s.Release(ctx, a.ID, a); err == nil {
			t.Fatalf("Release of %s succeeded", whose)
		}
	}
	want := func(t *testing.T, what string, err error, c string) {
		t.Helper()
		if got := code(err); got != c {
			t.Fatalf("%s: %v (%s), want %s", what, err, got, c)
		}
	}

	t.Run("put then get round-trips", func(t *testing.T) {
		c, h := setup(t)
		a := approval(c, time.Hour)
		put(t, h.A, a)
		got, err := h.A.Get(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != a.ID || got.Tenant != a.Tenant || got.Seal != a.Seal || got.Reason != a.Reason ||
			!got.Expires.Equal(a.Expires) || fmt.Sprint(got.Proposed["n"]) != "1" || got.State.Next != 1 {
			t.Fatalf("Get = %+v, want %+v", got, a)
		}
	})
	t.Run("unknown ids", func(t *testing.T) {
		_, h := setup(t)
		_, err := h.A.Get(ctx, "00aa")
		want(t, "Get", err, "unknown")
		_, err = h.A.Take(ctx, "00aa")
		want(t, "Take", err, "unknown")
		if err := h.A.Done(ctx, "00aa"); err == nil {
			t.Fatal("Done of an unknown id succeeded")
		}
	})
	t.Run("a claim excludes other claims until done", func(t *testing.T) {
		c, h := setup(t)
		a := approval(c, time.Hour)
		put(t, h.A, a)
		take(t, h.A, a.ID)
		_, err := h.A.Get(ctx, a.ID)
		want(t, "Get of a claimed approval", err, chain.ApprovalClaimed)
		_, err = h.A.Take(ctx, a.ID)
		want(t, "second Take", err, chain.ApprovalClaimed)
		if h.B != nil {
			_, err = h.B.Take(ctx, a.ID)
			want(t, "Take by another process", err, chain.ApprovalClaimed)
			cannotFinish(t, h.B, a, "another process's claim")
		}
		resolve(t, h.A, a.ID)
		_, err = h.A.Get(ctx, a.ID)
		want(t, "Get after Done", err, chain.ApprovalResolved)
		if !errors.Is(err, chain.ErrUnknownApproval) {
			t.Fatalf("a resolved approval's error does not match ErrUnknownApproval: %v", err)
		}
		_, err = h.A.Take(ctx, a.ID)
		want(t, "Take after Done", err, chain.ApprovalResolved)
		if err := h.A.Done(ctx, a.ID); err == nil {
			t.Fatal("a second Done succeeded")
		}
		c.Advance(2 * time.Hour)
		_, err = h.A.Take(ctx, a.ID)
		want(t, "Take long after Done", err, chain.ApprovalResolved)
	})
	t.Run("a copy put back after Done is never resolved again", func(t *testing.T) {
		c, h := setup(t)
		a := approval(c, time.Hour)
		put(t, h.A, a)
		take(t, h.A, a.ID)
		resolve(t, h.A, a.ID)
		if err := h.A.Put(ctx, a); err != nil && !errors.Is(err, chain.ErrApprovalRefused) {
			t.Fatalf("Put of a resolved id: untyped %v", err)
		}
		_, err := h.A.Take(ctx, a.ID)
		want(t, "Take of the copy", err, chain.ApprovalResolved)
		c.Advance(2 * time.Hour)
		if ids, err := h.A.Due(ctx, c.Now()); err != nil || len(ids) != 0 {
			t.Fatalf("Due = %v, %v; want none", ids, err)
		}
	})
	t.Run("release makes it pending again", func(t *testing.T) {
		c, h := setup(t)
		a := approval(c, time.Hour)
		put(t, h.A, a)
		got := take(t, h.A, a.ID)
		got.Reason = "changed back"
		if err := h.A.Release(ctx, a.ID, got); err != nil {
			t.Fatal(err)
		}
		cannotFinish(t, h.A, got, "an approval not claimed")
		other := h.A
		if h.B != nil {
			other = h.B
		}
		again, err := other.Take(ctx, a.ID)
		if err != nil || again.Reason != "changed back" {
			t.Fatalf("Take after Release = %+v, %v", again, err)
		}
		resolve(t, other, a.ID)
	})
	t.Run("a claim whose lease ended is claimable once", func(t *testing.T) {
		c, h := setup(t)
		a := approval(c, 24*time.Hour)
		put(t, h.A, a)
		take(t, h.A, a.ID)
		c.Advance(Lease - time.Second)
		_, err := h.A.Take(ctx, a.ID)
		want(t, "Take before the lease ends", err, chain.ApprovalClaimed)
		c.Advance(2 * time.Second)
		// The claimant died: the approval is neither lost nor stuck.
		if got, err := h.A.Get(ctx, a.ID); err != nil || got.ID != a.ID {
			t.Fatalf("Get after the lease = %v, %v", got, err)
		}
		next := h.A
		if h.B != nil {
			next = h.B
		}
		var won atomic.Int32
		var wg sync.WaitGroup
		for i := range Callers {
			wg.Go(func() {
				s := next
				if i%2 == 1 {
					s = h.A
				}
				if _, err := s.Take(ctx, a.ID); err == nil {
					won.Add(1)
				} else if k := code(err); k != chain.ApprovalClaimed {
					t.Errorf("losing Take: %v", err)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("%d callers claimed the approval after its lease; want 1", won.Load())
		}
	})
	t.Run("a stale claimant cannot finish after another took over", func(t *testing.T) {
		c, h := setup(t)
		if h.B == nil {
			t.Skip("one process only")
		}
		a := approval(c, 24*time.Hour)
		put(t, h.A, a)
		take(t, h.A, a.ID)
		c.Advance(Lease + time.Second)
		take(t, h.B, a.ID)
		cannotFinish(t, h.A, a, "a stale claim")
		resolve(t, h.B, a.ID)
	})
	t.Run("concurrent takes: exactly one wins", func(t *testing.T) {
		c, h := setup(t)
		const approvals = 8
		var ids []string
		for range approvals {
			a := approval(c, time.Hour)
			put(t, h.A, a)
			ids = append(ids, a.ID)
		}
		wins := make([]atomic.Int32, approvals)
		var wg sync.WaitGroup
		for g := range Callers {
			wg.Go(func() {
				s := h.A
				if h.B != nil && g%2 == 1 {
					s = h.B
				}
				for i, id := range ids {
					_, err := s.Take(ctx, id)
					switch code(err) {
					case "nil":
						wins[i].Add(1)
						if err := s.Done(ctx, id); err != nil {
							t.Errorf("Done: %v", err)
						}
					case chain.ApprovalClaimed, chain.ApprovalResolved:
					default:
						t.Errorf("losing Take: %v", err)
					}
				}
			})
		}
		wg.Wait()
		for i := range wins {
			if n := wins[i].Load(); n != 1 {
				t.Errorf("approval %d claimed %d times; want 1", i, n)
			}
		}
	})
	t.Run("due lists expired approvals not claimed nor resolved", func(t *testing.T) {
		c, h := setup(t)
		expired, live, claimed, dead, done := approval(c, time.Minute), approval(c, 3*time.Hour),
			approval(c, time.Minute), approval(c, time.Minute), approval(c, time.Minute)
		for _, a := range []*chain.Approval{expired, live, claimed, dead, done} {
			put(t, h.A, a)
		}
		for _, a := range []*chain.Approval{dead, done} {
			take(t, h.A, a.ID)
		}
		resolve(t, h.A, done.ID)
		c.Advance(Lease + time.Second) // dead's claim ends
		take(t, h.A, claimed.ID)
		ids, err := h.A.Due(ctx, c.Now())
		if err != nil {
			t.Fatal(err)
		}
		wantIDs := []string{expired.ID, dead.ID}
		if dead.ID < expired.ID {
			wantIDs = []string{dead.ID, expired.ID}
		}
		if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
			t.Fatalf("Due = %v, want %v (sorted)", ids, wantIDs)
		}
		if ids, err := h.A.Due(ctx, start); err != nil || len(ids) != 0 {
			t.Fatalf("Due at the start = %v, %v; want none", ids, err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		c, h := setup(t)
		a := approval(c, time.Hour)
		put(t, h.A, a)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := h.A.Take(cctx, a.ID); err == nil {
			// A store that answers from memory may ignore the context;
			// the approval must then be claimed once, as any.
			resolve(t, h.A, a.ID)
			return
		}
		// A store that refused changed nothing: the approval is pending.
		if _, err := h.A.Take(ctx, a.ID); err != nil {
			t.Fatalf("Take after a cancelled Take: %v", err)
		}
	})
}
