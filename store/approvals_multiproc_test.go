package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/store"
)

// envApproval names the approval a child resolves.
const envApproval = "WASMHOOKS_STORE_APPROVAL"

// approvalKey seals the approvals of every process of these tests, as one
// platform's hosts share theirs.
var approvalKey = []byte("0123456789abcdef0123456789abcdef")

// resolvers is how many goroutines of each child resolve the approval.
const resolvers = 4

// resolutionSink counts the resolution records a process appends; with
// stall set, it announces the first one and blocks for ever instead, so the
// process is killed in the middle of a resume (claimed, not done).
type resolutionSink struct {
	n     atomic.Int64
	stall bool
}

func (s *resolutionSink) Append(ctx context.Context, r *audit.Record) error {
	if r.Resolution == "" {
		return nil
	}
	if s.stall {
		fmt.Println("resuming")
		select {}
	}
	s.n.Add(1)
	return nil
}

// approvalChain is the chain every process runs: one guard asking about
// shell commands, its approvals in db under lease.
func approvalChain(ctx context.Context, db *store.DB, sink audit.Sink, lease time.Duration) (*chain.Chain, error) {
	policy, err := os.ReadFile("../testdata/guests/policy.wasm")
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := runtime.New(ctx, runtime.Config{Logger: quiet})
	if err != nil {
		return nil, err
	}
	cfg := chain.Config{
		Modules: map[string][]byte{"policy": policy},
		Bindings: []chain.Binding{{
			Name: "ask-shell", Point: "tool.before", Phase: chain.Guard, Module: "policy",
			Settings: map[string]any{"when": "shell.exec", "decide": map[string]any{"action": "ask", "reason": "shell commands need a human"}},
			Approval: chain.ApprovalPolicy{Timeout: time.Hour},
		}},
	}
	return chain.New(ctx, cfg, chain.Options{
		Runtime: rt, Audit: sink, Logger: quiet, ApprovalKey: approvalKey,
		Approvals: store.NewApprovals(db, store.ApprovalOptions{Lease: lease}),
	})
}

// approvalChild is a child's part:
//
//	resolve: prints "ready", waits for a line on stdin, then resolves the
//	         approval from 4 goroutines at once; prints "resumed N" (the
//	         resolutions it audited) and one "refused CODE" per goroutine
//	         that was refused.
//	stall:   resolves the approval with a sink that blocks on the
//	         resolution's record, after printing "resuming"; waits to be
//	         killed there, its claim taken and not done.
func approvalChild(ctx context.Context, db *store.DB, part string) error {
	sink := &resolutionSink{stall: part == "stall"}
	c, err := approvalChain(ctx, db, sink, childLease)
	if err != nil {
		return err
	}
	id := os.Getenv(envApproval)
	if part == "stall" {
		_, err := c.Resolve(ctx, id, chain.Resolution{Decision: chain.Approve})
		return fmt.Errorf("the stalled resume returned: %v", err)
	}
	if err := awaitGo(); err != nil {
		return err
	}
	var mu sync.Mutex
	var refused []string
	_ = inParallel(resolvers, func(int) error {
		_, err := c.Resolve(ctx, id, chain.Resolution{Decision: chain.Approve})
		if err == nil {
			return nil
		}
		var ae *chain.ApprovalError
		code := err.Error()
		if errors.As(err, &ae) {
			code = ae.Code
		}
		mu.Lock()
		refused = append(refused, code)
		mu.Unlock()
		return nil
	})
	fmt.Printf("resumed %d\n", sink.n.Load())
	for _, code := range refused {
		fmt.Println("refused", code)
	}
	return nil
}

// resolveAtOnce starts two resolver processes, lets them resolve id at the
// same moment, and returns the resolutions they audited and the codes of
// their refusals.
func resolveAtOnce(t *testing.T, tg target, id string) (resumed int, refused []string) {
	t.Helper()
	for i, c := range startTogether(t, 2, "resolve", tg, envApproval+"="+id) {
		for _, line := range c.Finish(t) {
			var n int
			if _, err := fmt.Sscanf(line, "resumed %d", &n); err == nil {
				resumed += n
			} else if code, ok := strings.CutPrefix(line, "refused "); ok {
				refused = append(refused, code)
			} else {
				t.Errorf("process %d printed %q", i, line)
			}
		}
	}
	return resumed, refused
}

// pendingApproval runs the chain once in this process and returns the
// approval its guard asked for, stored in tg.
func pendingApproval(t *testing.T, tg target, lease time.Duration) (*chain.Chain, *resolutionSink, string) {
	t.Helper()
	ctx := context.Background()
	sink := &resolutionSink{}
	c, err := approvalChain(ctx, tg.open(t), sink, lease)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	out, err := c.Run(ctx, chain.Input{Tenant: "acme", Point: "tool.before",
		Context: map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "ls"}}})
	if err != nil || out.Verdict != chain.Pending || out.Approval == nil {
		t.Fatalf("Run = %+v, %v; want pending", out, err)
	}
	return c, sink, out.Approval.ID
}

// twoProcessesResolveOneApproval: two OS processes of 4 goroutines each
// resolve the same approval at the same moment: exactly one resumes it; the
// others are refused (claimed by the winner, or resolved already).
func twoProcessesResolveOneApproval(t *testing.T, tg target) {
	_, _, id := pendingApproval(t, tg, 0)
	resumed, refused := resolveAtOnce(t, tg, id)
	if resumed != 1 || len(refused) != 2*resolvers-1 {
		t.Fatalf("resumed %d times (refused %v); want once", resumed, refused)
	}
	for _, code := range refused {
		if code != chain.ApprovalClaimed && code != chain.ApprovalResolved {
			t.Errorf("refused with %q; want %s or %s", code, chain.ApprovalClaimed, chain.ApprovalResolved)
		}
	}
}

// killedResumeIsResumedOnce: a process is killed with SIGKILL in the middle
// of resuming an approval (claimed, its resolution not yet audited); the
// approval is refused while the dead process's lease runs, then this
// process resumes it, once; two more processes resolving it later are
// refused as resolved.
func killedResumeIsResumedOnce(t *testing.T, tg target) {
	ctx := context.Background()
	c, sink, id := pendingApproval(t, tg, 0)
	started := time.Now() // before the child's claim, so before its lease began
	child := startChild(t, "stall", tg, envApproval+"="+id)
	child.Expect(t, "resuming")
	child.Kill(t)
	_, err := c.Resolve(ctx, id, chain.Resolution{Decision: chain.Approve})
	var ae *chain.ApprovalError
	if !errors.As(err, &ae) || ae.Code != chain.ApprovalClaimed {
		t.Fatalf("Resolve within the dead process's lease = %v; want %s", err, chain.ApprovalClaimed)
	}
	var res *chain.Outcome
	poll(func() bool {
		res, err = c.Resolve(ctx, id, chain.Resolution{Decision: chain.Approve})
		if err != nil && !errors.As(err, &ae) {
			t.Fatal(err)
		}
		return res != nil
	})
	if res == nil || res.Verdict != chain.Allow {
		t.Fatalf("not resumed after the lease: %+v, %v", res, err)
	}
	if since := time.Since(started); since < childLease {
		t.Fatalf("resumed %v after the child started, before its %v lease ended", since, childLease)
	}
	if n := sink.n.Load(); n != 1 {
		t.Fatalf("%d resolutions audited; want 1", n)
	}
	resumed, refused := resolveAtOnce(t, tg, id)
	if resumed != 0 {
		t.Fatalf("resumed again %d times", resumed)
	}
	for _, code := range refused {
		if code != chain.ApprovalResolved {
			t.Fatalf("refused with %q; want %s", code, chain.ApprovalResolved)
		}
	}
}
