// Package chain runs hooks as a middleware chain between the user and the
// agent: the bindings at a hook point, in order, over one piece of traffic.
//
// A Binding puts a hook module at a point, in a phase, with a priority,
// settings (validated against the module's settings_schema when the
// configuration is built), grants, a fail policy and limits (runtime.Limits;
// in the JSON configuration ParseConfig reads, its JSON form).
//
// # Order
//
// The bindings of a point run in this order, and this is the only place it is
// defined: by phase (observers, then transformers, then guards), then by
// priority, lower first, then by position in Config.Bindings. Two bindings
// with the same name are refused when the configuration is built.
//
// # Phases
//
//   - Observers always run (nothing runs before them that could stop the
//     chain) and cannot change anything: a modify, block or ask from an
//     observer is ignored, reported in the trace and the audit record, and
//     logged. An observer's failure never blocks.
//   - Transformers may continue or modify; each sees the context as the
//     transformers before it left it, and a modify may set only the point's
//     changeable fields, each to a value of the field's type
//     (abi.Point.CheckField); anything else is an invalid output, the
//     transformer's failure. A modify is also bounded by what the bindings
//     after it accept: a context larger than the smallest of their input
//     limits less their invocation envelope is the transformer's own
//     output_too_large (its fail policy, its breaker), so a transformer cannot
//     make a later hook fail by size. A block or ask from a transformer is
//     ignored and reported.
//   - Guards see the context as the transformers left it and may continue,
//     block or ask. A block ends the run; an ask pauses it (see Approvals). A
//     modify from a guard is ignored and reported.
//   - do_not_reply_again, like block and ask, belongs to guards: from an
//     observer or a transformer it is ignored and reported.
//   - short_circuit (ABI 1.2), on a guard's continue, ends the run with allow:
//     the guards after it do not run, and each has a trace step and an audit
//     record with By = "short_circuit" (Outcome.ShortCircuit names the
//     guard). From an observer or a transformer it is ignored and reported.
//   - Seed 002's words (ABI 1.2) apply as the actions they normalise to:
//     allow as continue, rewrite as modify, require_approval as ask (its
//     pending kept in the Approval). Step.Wire and the audit record's wire
//     say which shape a decision came in when it was not the canonical one.
//   - notify (ABI 1.2) changes no traffic, so every phase may return it: the
//     run continues and Outcome.Notifications carries it to the platform
//     (binding, reason, payload), audited as "notify".
//
// # Points
//
// Each point allows some phases (abi.Point.Phases): the lifecycle points of
// ABI 1.2 (session.created, context.overflow, compaction.completed, ...) are
// notification points, for observers only; a binding in a phase its point
// does not allow refuses the configuration. A platform registers its own
// points in Options.Points (abi.NewPointRegistry checks them; their names
// start with "x."), used by bindings, runs, field checks and approvals as
// the built-in ones are.
//
// # Failures
//
// A hook that reaches no decision (an abi.Failure, whose code is one of
// abi.FailureCodes: trap, timeout, memory, invalid_output and the other
// hook failures; runtime.Code of the error when the runtime refuses the
// invocation, such as limit_exceeded for a context that grew past the input
// limit; circuit_open when the breaker skipped it) is
// answered by its binding's fail policy: open continues, closed blocks with a
// reason that names the failure and By = "fail_policy", so it is never
// mistaken for a hook's block. DefaultFailPolicy gives the defaults. A
// binding that fails BreakerConfig.Failures times in a row for a tenant is
// not run for a backoff; its fail policy applies meanwhile, then one trial
// run decides whether it closes again.
//
// # Approvals
//
// A guard's ask pauses the run: Run returns a Pending outcome with an
// Approval that carries the paused run's state. Resolve (approve, deny or
// edit) resumes it from the next binding, on this process or another one that
// reads the approval from a durable ApprovalStore. ExpirePending applies the
// expiry policy to approvals nobody resolved in time. The store is not
// trusted with the approval: the chain seals it (HMAC-SHA256 under
// Options.ApprovalKey) and on resume checks the seal, its id, tenant and
// point, and that the binding and module that asked are where the paused run
// says; a resolved approval leaves a tombstone, so it resolves at most once.
// A mismatch is an *ApprovalError with a stable code, and the approval stays
// as it was.
//
// Config.ToolApprovals marks tools (by name or path.Match pattern) that need
// approval at tool.before without a guard hook (seed 002's
// requires_approval): the call takes a guard's ask path, with By "config"
// and the binding name "config:" + the rule's name.
//
// # Audit and observability
//
// Every step writes one hash-chained audit record (package audit), allow
// included; every run, hook and host call gets an OpenTelemetry span; logs
// go to log/slog, with a hook's output attributed to its binding and never
// interpreted.
//
// # Hot reload
//
// Reload swaps the configuration atomically. A run holds the configuration
// it started with until it ends; modules no longer bound are closed when the
// last such run ends. A refused configuration leaves the one in force.
package chain
