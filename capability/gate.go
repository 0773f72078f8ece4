package capability

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// Gate is a precondition the runner checks before Execute: an application
// convention (credit, rate limits, entitlements) that untrusted code cannot
// skip, because every host call goes through the runner.
//
// Gates are two-phase. Admit either refuses the call or admits it and
// returns a Hold (nil when the gate holds nothing). The runner resolves every
// non-nil Hold exactly once: Settle after a successful Execute (also when the
// result is too large to return), Release on every other path, including a
// later gate's refusal, a cancelled context and a panic.
//
// A refusal is returned as a *DeniedError (its Status and Reason reach the
// hook) or as an error wrapping ErrInsufficientCredit or ErrRateLimited. Any
// other error fails the call closed with CAPABILITY_FAILED and its text goes
// only to the operator's log.
//
// Implementations must be safe for concurrent use by multiple goroutines.
type Gate interface {
	// Name names the gate in errors, logs and usage records.
	Name() string
	// Admit checks the call. cost is the capability's worst-case cost
	// for this payload.
	Admit(ctx context.Context, req *Request, cost int64) (Hold, error)
}

// Hold is what an admitting gate holds for one call until the runner
// resolves it. The runner calls exactly one of Settle and Release, once, with
// a context that is not cancelled even if the call's was.
//
// A Hold is used by one goroutine at a time.
type Hold interface {
	// Settle resolves the hold by what the call consumed and returns the
	// credit actually charged.
	Settle(ctx context.Context, u Usage) (charged int64, err error)
	// Release resolves the hold without charging anything.
	Release(ctx context.Context) error
}

// CreditGate reserves a call's worst-case cost on the caller's tenant account
// before Execute and settles the actual consumption after it
// (see RATIONALE.md#why-reserve-then-settle). The account is Caller.Tenant; the
// amount is Capability.Cost(payload). A zero cost makes no ledger call.
//
// A CreditGate is safe for concurrent use by multiple goroutines if its
// Ledger is, which every Ledger must be.
type CreditGate struct {
	// Ledger holds the balances. Required.
	Ledger Ledger
}

// Name returns "credit".
func (g *CreditGate) Name() string { return "credit" }

// Admit reserves cost on the tenant's account, keyed by the call's
// idempotency key within the tenant (tenantKey).
func (g *CreditGate) Admit(ctx context.Context, req *Request, cost int64) (Hold, error) {
	if cost == 0 {
		return nil, nil
	}
	if g.Ledger == nil {
		return nil, errors.New("capability: CreditGate has no Ledger")
	}
	if req.Caller.Tenant == "" {
		return nil, &DeniedError{Gate: g.Name(), Status: abi.StatusDenied, Reason: "the call has no tenant to bill"}
	}
	id, err := g.Ledger.Reserve(ctx, req.Caller.Tenant, cost, tenantKey(req.Caller.Tenant, req.IdempotencyKey))
	switch {
	case err == nil:
		return &creditHold{ledger: g.Ledger, id: id}, nil
	case errors.Is(err, ErrInsufficientCredit):
		return nil, &DeniedError{Gate: g.Name(), Status: abi.StatusInsufficientCredit,
			Reason: fmt.Sprintf("not enough credit for %s", req.Capability), Err: err}
	case errors.Is(err, ErrReservationResolved), errors.Is(err, ErrIdempotencyConflict):
		return nil, &DeniedError{Gate: g.Name(), Status: abi.StatusDenied,
			Reason: "this host call was already billed", Err: err}
	default:
		return nil, err
	}
}

// tenantKey is the ledger key of a call's idempotency key: the call's key
// ("RUN.STEP/SEQ") is made from a run id the tenant's client chooses, and a
// ledger's keys are one namespace for all accounts, so the key is prefixed
// with the tenant (length first, so no two pairs make one key); otherwise
// one tenant's run id would make another's calls "already billed". An empty
// key stays empty (no idempotency).
func tenantKey(tenant, key string) string {
	if key == "" {
		return ""
	}
	return strconv.Itoa(len(tenant)) + ":" + tenant + "/" + key
}

// creditHold is one ledger reservation.
type creditHold struct {
	ledger Ledger
	id     string
}

func (h *creditHold) Settle(ctx context.Context, u Usage) (int64, error) {
	return h.ledger.Settle(ctx, h.id, max(u.Credit, 0))
}

func (h *creditHold) Release(ctx context.Context) error { return h.ledger.Release(ctx, h.id) }

// RateGate limits calls per (tenant, capability) with a token bucket: each
// call takes one token; tokens refill at PerSecond up to Burst. A refused call
// gets RATE_LIMITED. Tokens are taken at Admit and never given back.
//
// Set the configuration fields before first use; a RateGate is then safe for
// concurrent use by multiple goroutines. It must not be copied after first
// use.
type RateGate struct {
	// PerSecond is the refill rate in calls per second. Zero means 10.
	PerSecond float64
	// Burst is the bucket size, the most calls admitted at once. Zero
	// means max(1, ceil(PerSecond)).
	Burst int

	// now is the clock; nil means time.Now. Tests set it.
	now func() time.Time

	mu      sync.Mutex         // guards buckets
	buckets map[string]*bucket // by tenant "\x00" capability
}

// bucket is one token bucket.
type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets is how many buckets a RateGate keeps before it drops the full
// ones (a full bucket is indistinguishable from a new one).
const maxBuckets = 10000

// NewRateGate returns a RateGate refilling perSecond tokens per second up to
// burst.
func NewRateGate(perSecond float64, burst int) *RateGate {
	return &RateGate{PerSecond: perSecond, Burst: burst}
}

// Name returns "rate".
func (g *RateGate) Name() string { return "rate" }

func (g *RateGate) config() (rate, burst float64) {
	rate = g.PerSecond
	if rate <= 0 {
		rate = 10
	}
	burst = float64(g.Burst)
	if burst <= 0 {
		burst = max(1, math.Ceil(rate))
	}
	return rate, burst
}

// Admit takes one token from the caller's bucket or refuses with
// RATE_LIMITED.
func (g *RateGate) Admit(_ context.Context, req *Request, _ int64) (Hold, error) {
	rate, burst := g.config()
	now := time.Now
	if g.now != nil {
		now = g.now
	}
	t := now()
	key := req.Caller.Tenant + "\x00" + req.Capability

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.buckets == nil {
		g.buckets = make(map[string]*bucket)
	}
	b := g.buckets[key]
	if b == nil {
		if len(g.buckets) >= maxBuckets {
			g.prune(t, rate, burst)
		}
		b = &bucket{tokens: burst, last: t}
		g.buckets[key] = b
	}
	if el := t.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(burst, b.tokens+el*rate)
		b.last = t
	}
	if b.tokens < 1 {
		return nil, &DeniedError{Gate: g.Name(), Status: abi.StatusRateLimited,
			Reason: fmt.Sprintf("too many calls to %s; retry later", req.Capability), Err: ErrRateLimited}
	}
	b.tokens--
	return nil, nil
}

// prune drops the buckets that have refilled. g.mu must be held.
func (g *RateGate) prune(t time.Time, rate, burst float64) {
	for k, b := range g.buckets {
		if b.tokens+t.Sub(b.last).Seconds()*rate >= burst {
			delete(g.buckets, k)
		}
	}
}
