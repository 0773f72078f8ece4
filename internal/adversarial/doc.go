// Package adversarial is the adversarial suite: hostile hooks and hostile
// inputs, run through the real runtime and the real capability runner
// wired as cmd/wasmhooks wires them, each followed by a check of the
// invariants SECURITY.md promises:
//
//   - the host process is fine: a canary invocation on a fresh tenant still
//     reaches a decision;
//   - goroutines return to their baseline and every instance is back in its
//     pool or closed (runtime.Stats: Instances == Idle);
//   - no instance that faulted is reused (Result.Reused, and a fresh
//     instance's state on the next invocation);
//   - no credit is lost, charged twice or charged for work that did not
//     happen: every reservation is resolved exactly once, no balance is
//     negative, and the ledger, the usage records and the invocations'
//     reports agree on what was charged, to whom;
//   - nothing of one tenant or invocation is visible to another.
//
// The corpus is testdata/adversarial: WAT sources assembled by the tests with
// wabt's wat2wasm, chiefly hostile.wat, a hook that interprets a script carried
// in its invocation. Malformed modules that WAT cannot express are generated
// by the tests. SECURITY.md maps every threat to the test that would fail if
// its defence were removed.
//
// The package holds only tests.
package adversarial
