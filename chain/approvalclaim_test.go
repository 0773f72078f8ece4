package chain

import (
	"context"
	"errors"
	"testing"
	"time"
)

// resolutions counts the audit records of approval id's resolutions.
func (e *env) resolutions(id string) int {
	n := 0
	for _, r := range e.sink.Records() {
		if r.Approval == id && r.Resolution != "" {
			n++
		}
	}
	return n
}

// A resume that died after claiming its approval (Take) and before Done
// leaves it claimed: refused while the claim's lease runs, resumed once
// after it, by Resolve or by ExpirePending.
func TestApprovalClaimedByADeadResumeIsResumedOnce(t *testing.T) {
	for _, via := range []string{"resolve", "expire"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t, approvalConfig(t, ""))
			e.store.Now, e.store.Lease = e.clock.Now, 30*time.Second
			ap := e.run(t, toolBefore, shellCall("ls")).Approval
			if _, err := e.store.Take(context.Background(), ap.ID); err != nil { // the resume that dies
				t.Fatal(err)
			}
			_, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve})
			var ae *ApprovalError
			if !errors.As(err, &ae) || ae.Code != ApprovalClaimed {
				t.Fatalf("Resolve during the claim = %v", err)
			}
			if via == "expire" {
				e.clock.Advance(2 * time.Minute) // past expiry and the lease
			} else {
				e.clock.Advance(31 * time.Second)
			}
			var n int
			if via == "expire" {
				outs, err := e.c.ExpirePending(context.Background())
				if err != nil || len(outs) != 1 || outs[0].Verdict != Block {
					t.Fatalf("ExpirePending = %v, %v", outs, err)
				}
			} else if out, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve}); err != nil || out.Verdict != Allow {
				t.Fatalf("Resolve after the lease = %v, %v", out, err)
			}
			if n = e.resolutions(ap.ID); n != 1 {
				t.Fatalf("%d resolutions recorded; want 1", n)
			}
			e.clock.Advance(time.Hour)
			if outs, err := e.c.ExpirePending(context.Background()); err != nil || len(outs) != 0 {
				t.Fatalf("ExpirePending after the resume = %v, %v", outs, err)
			}
			if _, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve}); !errors.Is(err, ErrUnknownApproval) {
				t.Fatalf("Resolve after the resume = %v", err)
			}
			if n = e.resolutions(ap.ID); n != 1 {
				t.Fatalf("%d resolutions recorded; want 1", n)
			}
		})
	}
}

// lostClaim is a store whose Done fails as when a resume outlived its lease
// and another process took the approval over.
type lostClaim struct{ *MemoryApprovals }

func (l lostClaim) Done(_ context.Context, id string) error {
	return claimRefusal(id, approvalClaimed)
}

// A resume whose Done fails stops after recording its resolution: the run
// does not go on (the resume that took the claim over goes on instead), so
// the bindings after the approval run once.
func TestApprovalDoneRefusedStopsTheRun(t *testing.T) {
	store := lostClaim{NewMemoryApprovals()}
	e := newEnv(t, approvalConfig(t, ""), func(o *Options) { o.Approvals = store })
	ap := e.run(t, toolBefore, shellCall("rm -rf /")).Approval
	out, err := e.c.Resolve(context.Background(), ap.ID, Resolution{Decision: Approve})
	var ae *ApprovalError
	if !errors.As(err, &ae) || ae.Code != ApprovalClaimed || out != nil {
		t.Fatalf("Resolve = %v, %v", out, err)
	}
	recs := e.sink.Records()
	if len(recs) == 0 {
		t.Fatal("no audit record at all: the check below would see nothing")
	}
	for _, r := range recs {
		if r.Binding == "no-rm" {
			t.Fatalf("the run went on after Done failed: %+v", r)
		}
	}
}
