// Package capability is the application side of host_call: the registry of
// capabilities a hook may ask for, and the runner every host call goes
// through.
//
// A capability is one effect (run an LLM, read a key, write a log line) that
// declares everything about itself: a name, a JSON Schema for its payload,
// the gates that guard it, its worst-case cost and an Execute that returns
// its result and what it consumed. Adding a feature is writing a Capability
// and registering it; the ABI and the runner do not change. Untrusted code can
// do exactly what the Registry holds, and no gate is skippable, because the
// runner is the only way in.
//
// # The pipeline
//
// Runner.HostCall receives a call the runtime has already copied out of guest
// memory and checked against the invocation's quotas. It always runs the same
// steps, in order, and stops at the first that refuses:
//
//  1. Resolve. The name must be 1 to 128 bytes of [a-z0-9_.-] (a longer one
//     gets REQUEST_TOO_LARGE, a malformed one UNKNOWN_CAPABILITY) and must be
//     registered (else UNKNOWN_CAPABILITY).
//
//  2. Grant. The operator must have granted the capability to the hook
//     (Caller.Granted) and, if the module carries a manifest
//     (Caller.HasManifest), the manifest must request it (Caller.Requested):
//     a hook cannot use a grant it never declared. Without a manifest the
//     grants alone decide. Else DENIED.
//
//  3. Validate. The payload is parsed once by abi.ParseJSON with the runner's
//     limits: a payload over MaxPayloadBytes gets REQUEST_TOO_LARGE; duplicate
//     keys, invalid UTF-8, lone surrogates, nesting deeper than MaxDepth and
//     integers beyond ±(2^53-1) get INVALID_REQUEST before any schema runs.
//     The parsed value is then checked against the capability's JSON Schema,
//     compiled once at Register; a failure gets INVALID_REQUEST with a message
//     naming the failing path and rule, never the payload's values. A schema
//     that accepts every value ({} or true, recognised at Register) is not
//     run: the strict parse is then all the checking there is. The value
//     validated is the very value Cost, the gates and Execute receive, so the
//     validator and the executor cannot disagree about the document.
//
//  4. Gate. Capability.Cost gives the worst-case cost. A call whose
//     idempotency key (tenant, invocation/seq) is already in flight waits
//     here for that call to finish, so that it never shares its pending
//     reservation nor executes alongside it; it is then answered as any
//     replay is (DENIED by a CreditGate). The runner's
//     per-invocation spend cap (if configured) and then each of the
//     capability's gates, in order, admit or refuse the call. A CreditGate
//     reserves the cost on the tenant's account. Refusals map to DENIED,
//     INSUFFICIENT_CREDIT, RATE_LIMITED or QUOTA_EXCEEDED; a gate that cannot
//     decide fails the call closed with CAPABILITY_FAILED. When a gate
//     refuses, the holds already taken are released. If the call's context is
//     done by now, every hold is released and the call gets CAPABILITY_FAILED
//     without running.
//
//  5. Execute. Capability.Execute runs with the call's context. A panic is
//     recovered: the hook gets CAPABILITY_FAILED "capability NAME failed", the
//     operator's log gets the value and the stack. A returned error becomes
//     the same CAPABILITY_FAILED, its text logged for the operator only, unless
//     it is an *abi.Error whose status the capability chose deliberately
//     (INVALID_REQUEST for a semantic check, QUOTA_EXCEEDED for a full store,
//     ...), whose status and message the hook receives. On any failure every
//     hold is released: a failed call is never charged.
//
//  6. Dispatch. The result is encoded as abi.Marshal encodes it (by
//     abi.AppendJSON into a reused buffer, by Marshal for the types AppendJSON
//     leaves to it: the same bytes either way). Every hold is settled by the
//     consumption Execute reported: the unused part of a reservation is
//     released, and consumption beyond it is not charged but recorded as
//     uncharged (the balance never goes negative). If the encoded result is
//     over Call.MaxResultBytes the hook gets RESULT_TOO_LARGE, but the
//     consumption is still settled, because the work was done. If a hold
//     cannot be settled, the result is withheld and the hook gets
//     CAPABILITY_FAILED. A UsageRecord is emitted for every call, whatever its
//     outcome, and Reply.Charged reports the credit actually charged. Last,
//     the follow-up work the capability returned (Result.FollowUps) is queued
//     for the platform's Dispatcher, if and only if every hold was settled
//     (status OK or RESULT_TOO_LARGE); see "Follow-up work" below.
//
// # Follow-up work
//
// A capability may return work for the platform to do after the call: a
// usage event, a notification, an asynchronous job (Result.FollowUps, each a
// FollowUp with a Kind and Data). The runner delivers each to the
// RunnerOptions.Dispatcher as a Dispatch carrying the hook's identity (the
// Caller's tenant, hook, module, invocation and point, never its grants),
// the capability, and the call's idempotency key with the follow-up's index
// (Dispatch.Key, "invocation/seq/index"), so that a platform can deduplicate.
//
// When: only for a call that completed and was settled, the call whose effect
// happened and was paid for: OK, and RESULT_TOO_LARGE (the work was done and
// charged; only the answer did not fit). The follow-ups of a call that was
// refused (grant, schema, gate, credit), cancelled, failed or panicked in
// Execute, returned an unencodable result or could not be settled are never
// dispatched: a follow-up describes the consequence of an effect, and a
// call that was not billed had none the platform should act on.
//
// How: the call's goroutine only puts the follow-ups on a bounded queue
// (DispatchOptions.QueueSize, 1024 by default) without ever blocking, and
// returns; a few workers (Workers, 4) call the Dispatcher, each attempt
// bounded by AttemptTimeout (10 s), and retry a failure up to MaxAttempts
// (5) times in all, waiting Backoff (100 ms) doubled after each failure up
// to MaxBackoff (5 s), each wait drawn between half and all of it. An error
// wrapping ErrDispatchPermanent and a panic are not retried. The reply the hook
// receives is decided before any of this and never changes.
//
// What is reported: a follow-up that cannot be queued (queue full, runner
// closed, no Dispatcher, a malformed Kind, more than MaxPerCall, 16, in one
// call, reported together in one DispatchError) is dropped at once; one whose attempts are exhausted, whose error is
// permanent, whose Dispatcher panicked or that Close abandoned has failed.
// Both are logged with the call's identity (a drop at Warn, one line per
// call with the count by reason, so that a capability returning thousands
// cannot flood the log; a failure at Error, one line each with its key),
// counted in Runner.DispatchStats, passed to
// DispatchOptions.OnFailure as a *DispatchError (a dead-letter hook) and, for
// drops, counted in the usage record (UsageRecord.FollowUpsDropped).
// Dropping rather than waiting is deliberate: a full queue means the
// platform is not keeping up, and making hooks wait would turn its outage
// into theirs.
//
// Durability: delivery is at least once for a process that lives: every
// queued follow-up is delivered, reported as failed, or still pending, and
// Runner.Close drains the queue. The queue is in memory: a follow-up queued
// when the process crashes is lost without a report. A platform that cannot
// lose a follow-up should make its Dispatcher write to its own durable
// queue, which is quick and rarely fails.
//
// # Errors
//
// Hooks see only an abi.Error body: a stable code and a message that never
// carries a Go error string from a provider, a stack trace, a path or a
// header. The operator sees the details through RunnerOptions.Logger and
// through the error Runner.Run returns, which wraps the package's sentinels
// (ErrUnknownCapability, ErrNotGranted, ErrInvalidRequest,
// ErrInsufficientCredit, ...) and typed errors (*DeniedError,
// *InvalidRequestError, *ExecuteError, *RegistrationError).
//
// # Credit
//
// Credit is reserve-then-settle: a Ledger holds the worst case before
// Execute, and the actual consumption is posted after it, so concurrent calls
// can never spend the same credit twice and a call can never be charged more
// than it reserved. MemoryLedger is an in-memory Ledger. RATIONALE.md gives
// the reasoning behind each policy, from #why-reserve-then-settle on.
//
// The runner and the runtime never import each other: the runtime declares
// the interface it consumes (HostCall(ctx, *abi.Call) abi.Reply), which
// *Runner satisfies, and the composition root wires the two.
package capability
