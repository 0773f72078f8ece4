// Package runtime is the wazero host of wasmhooks: it validates and compiles
// hook modules, keeps warm instances in pools per (module, tenant, hook)
// under a runtime-wide budget (count, bytes, idle time), runs one
// invocation at a time on an instance under per-hook limits, and serves the
// hook's one door, hook_v1.host_call, by copying bytes in and out of guest
// memory and handing each call to a HostCaller (the capability runner).
//
// The flow of one invocation (see ABI.md):
//
//  1. Load validates the module (size, imports, exports, memory, manifest)
//     without running it, rewrites it to meter its execution (a fuel
//     counter and a stack limiter, runtime/internal/meter), then compiles
//     it; compiled code is cached by the sha256 of the original bytes, in
//     memory and optionally on disk.
//  2. Invoke takes a warm instance from the pool of (module, tenant, hook) or
//     creates one (running the start function and _initialize under
//     Limits.InitFuel, where host calls are answered NOT_IN_INVOCATION),
//     parks the invocation document, sets the fuel and stack budgets, and
//     calls hook_v1_handle(len). Running out of either fails the
//     invocation (fuel_exhausted, stack_exhausted), deterministically. The
//     fuel is handed to the guest in slices (FuelSlice); between two, the
//     guest calls back into the host, which checks the deadline and the
//     caller's context (timeout) and gives Go's scheduler a safe point.
//     Host functions (the WASI set and host_call) are charged fuel for
//     their work, cap it per call, and look at the clock every
//     HostWorkPerCheck units of it: no host function outruns the deadline
//     (see Limits.Timeout). A caller that runs one module at one point
//     under the same limits again and again (the chain) prepares it once
//     (Prepare: the point and the limits checked once) and calls
//     InvokePrepared.
//  3. Each host_call is bounds-checked (an out-of-range pointer is an ABI
//     violation that ends the invocation), quota-checked (count, bytes,
//     sizes), and passed to the HostCaller; the reply is written into the
//     guest's buffer if it fits and parked for a take otherwise. Nothing is
//     ever re-run to deliver a result.
//  4. The output is bounds-checked, copied and decoded strictly into a
//     canonical decision. An instance that trapped, timed out, violated the
//     ABI, produced an invalid output or grew past its memory high-water mark
//     is closed, never reused.
//
// runtime imports abi and wazero only; it never imports the capability
// package. The two meet through the HostCaller interface, wired by the
// embedder (see cmd/wasmhooks).
package runtime
