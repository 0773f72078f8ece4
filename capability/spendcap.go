package capability

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// spendIdle is how long an invocation's spend entry is kept after its last
// call once the table is large. Invocations end long before this.
const spendIdle = 10 * time.Minute

// spendPruneAt is the table size at which idle entries are dropped.
const spendPruneAt = 4096

// spendCap is the runner's per-invocation credit cap, run as an implicit
// first gate: it holds a call's worst-case cost against the invocation's
// budget and, on settlement, keeps what was charged. It is safe for
// concurrent use by multiple goroutines.
type spendCap struct {
	max int64

	mu        sync.Mutex             // guards byInv and nextPrune
	byInv     map[string]*spendEntry // by tenant "\x00" invocation
	nextPrune int                    // table size that triggers the next prune
}

// spendEntry is one invocation's spending.
type spendEntry struct {
	charged int64     // settled so far
	held    int64     // held by calls in flight
	last    time.Time // last admission
}

func newSpendCap(max int64) *spendCap {
	return &spendCap{max: max, byInv: make(map[string]*spendEntry), nextPrune: spendPruneAt}
}

func (s *spendCap) Name() string { return "spend-cap" }

func (s *spendCap) Admit(_ context.Context, req *Request, cost int64) (Hold, error) {
	if cost == 0 {
		return nil, nil
	}
	key := req.Caller.Tenant + "\x00" + req.Caller.Invocation
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byInv[key]
	if e == nil {
		if len(s.byInv) >= s.nextPrune {
			s.prune(now)
		}
		e = &spendEntry{}
		s.byInv[key] = e
	}
	e.last = now
	if e.charged+e.held > s.max-cost {
		return nil, &DeniedError{Gate: s.Name(), Status: abi.StatusQuotaExceeded,
			Reason: fmt.Sprintf("this invocation's credit budget of %d is spent", s.max), Err: ErrSpendCapExceeded}
	}
	e.held += cost
	return &spendHold{cap: s, key: key, amount: cost}, nil
}

// prune drops idle entries with nothing held. s.mu must be held.
func (s *spendCap) prune(now time.Time) {
	for k, e := range s.byInv {
		if e.held == 0 && now.Sub(e.last) > spendIdle {
			delete(s.byInv, k)
		}
	}
	s.nextPrune = max(spendPruneAt, 2*len(s.byInv))
}

// spendHold is one call's hold on its invocation's budget.
type spendHold struct {
	cap    *spendCap
	key    string
	amount int64
}

// Settle keeps min(credit, held) as spent and returns 0: the cap charges
// nothing itself, the ledger does.
func (h *spendHold) Settle(_ context.Context, u Usage) (int64, error) {
	h.cap.mu.Lock()
	defer h.cap.mu.Unlock()
	if e := h.cap.byInv[h.key]; e != nil {
		e.held -= h.amount
		e.charged += min(max(u.Credit, 0), h.amount)
	}
	return 0, nil
}

func (h *spendHold) Release(context.Context) error {
	h.cap.mu.Lock()
	defer h.cap.mu.Unlock()
	if e := h.cap.byInv[h.key]; e != nil {
		e.held -= h.amount
	}
	return nil
}
