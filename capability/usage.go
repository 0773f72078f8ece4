package capability

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// UsageRecord describes one host call after the runner answered it, whatever
// the outcome. It is a plain value; a record handed to a UsageSink is the
// sink's to keep (its Units map is not shared with the runner). It is not
// safe for concurrent mutation.
type UsageRecord struct {
	// Time is when the call started.
	Time time.Time
	// Tenant, Hook, Module and Invocation come from the call's Caller.
	Tenant     string
	Hook       string
	Module     string
	Invocation string
	// Seq is the call's sequence number in its invocation.
	Seq int
	// Capability is the name the hook asked for, or "" when the name was
	// malformed.
	Capability string
	// Status is the status the hook received.
	Status abi.Status
	// Reserved is the worst-case cost the capability declared and the
	// gates reserved (zero for a refused or free call).
	Reserved int64
	// Consumed is the credit Execute reported consuming.
	Consumed int64
	// Charged is the credit actually charged: at most Reserved, zero
	// unless the capability ran to completion.
	Charged int64
	// Uncharged is consumption that was not charged: Consumed - Charged
	// when the capability completed (an overage over the reservation),
	// and everything Consumed when it failed.
	Uncharged int64
	// Units are the capability's own counters (tokens, bytes).
	Units map[string]int64
	// Duration is how long the runner took to answer.
	Duration time.Duration
	// FollowUps is how many follow-ups the call returned for dispatch
	// (zero unless it was settled), and FollowUpsDropped how many of them
	// never reached the dispatch queue. Delivery happens after the record
	// is written: its failures are in Runner.DispatchStats and
	// DispatchOptions.OnFailure.
	FollowUps        int
	FollowUpsDropped int
}

// UsageSink receives a UsageRecord for every host call. Record is called on
// the call's goroutine after the reply is decided; its error is logged and
// does not change the reply.
//
// Implementations must be safe for concurrent use by multiple goroutines.
type UsageSink interface {
	Record(ctx context.Context, r UsageRecord) error
}

// MemoryUsageSink keeps usage records in memory, for tests and the CLI.
//
// The zero value is an empty sink ready to use. A MemoryUsageSink is safe for
// concurrent use by multiple goroutines.
type MemoryUsageSink struct {
	mu      sync.Mutex    // guards records
	records []UsageRecord // in arrival order
}

// Record implements UsageSink.
func (s *MemoryUsageSink) Record(_ context.Context, r UsageRecord) error {
	r.Units = maps.Clone(r.Units)
	s.mu.Lock()
	s.records = append(s.records, r)
	s.mu.Unlock()
	return nil
}

// Records returns a copy of the records kept so far, in arrival order.
func (s *MemoryUsageSink) Records() []UsageRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]UsageRecord, len(s.records))
	for i, r := range s.records {
		r.Units = maps.Clone(r.Units)
		out[i] = r
	}
	return out
}

// Reset drops every record kept.
func (s *MemoryUsageSink) Reset() {
	s.mu.Lock()
	s.records = nil
	s.mu.Unlock()
}
