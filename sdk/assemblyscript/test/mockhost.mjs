// mockhost.mjs: the AssemblyScript SDK's test double. AssemblyScript compiles
// only to wasm, so a hook's tests run its compiled module under Node with a
// mock host: this file instantiates the module with a JavaScript
// hook_v1.host_call that follows ABI.md (the parked invocation document,
// replies parked when larger than the guest's buffer, status codes) and serves
// capabilities from the test's functions. No wasmhooks binary and no network.
//
//   import { MockHost } from "./wasmhooks/test/mockhost.mjs";
//   const host = await MockHost.load("hook.wasm");
//   const r = host.run({ point: "message.inbound", context: { incoming: "hi" },
//                        settings: { word: "banana" } },
//                      { "llm.run": (payload) => ({ status: 0, body: { text: "short" } }) });
//   // r.decision: the decision object, or null when the hook failed (r.failed)
//   // r.calls: the capabilities called, in order; r.logs: log.write payloads
//
// One MockHost is one warm instance, as the runtime keeps one per binding:
// what the hook caches (compiled patterns, say) carries over between runs.
// Each run is one invocation; a capability with no function is answered 1
// (unknown_capability), log.write without one {} (its payload kept in logs).
import { readFileSync } from "node:fs";

// Status codes (ABI.md, Status codes).
export const OK = 0;
export const UNKNOWN_CAPABILITY = 1;
export const DENIED = 3;
export const BUFFER_TOO_SMALL = 8;
export const NO_PENDING = 9;
export const NOT_IN_INVOCATION = 11;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

export class MockHost {
  // load compiles and instantiates the module at path (or the bytes given).
  static async load(pathOrBytes) {
    const bytes = typeof pathOrBytes === "string" ? readFileSync(pathOrBytes) : pathOrBytes;
    const host = new MockHost();
    const module = await WebAssembly.compile(bytes);
    // ABI.md: an AssemblyScript hook built with --use abort=... imports
    // host_call alone (the host refuses env.abort).
    for (const imp of WebAssembly.Module.imports(module)) {
      if (imp.module !== "hook_v1" || imp.name !== "host_call") {
        throw new Error(`the module imports ${imp.module}.${imp.name}: an AssemblyScript hook imports hook_v1.host_call alone (build with --use abort=...)`);
      }
    }
    const instance = await WebAssembly.instantiate(module, {
      hook_v1: { host_call: (...args) => host.hostCall(...args) },
    });
    host.instance = instance;
    host.memory = instance.exports.memory;
    if (typeof instance.exports.hook_v1_handle !== "function") {
      throw new Error("the module does not export hook_v1_handle");
    }
    if (typeof instance.exports._initialize === "function") instance.exports._initialize();
    return host;
  }

  constructor() {
    this.parked = null; // { status, body: Uint8Array }
    this.inInvocation = false;
    this.capabilities = {};
    this.calls = [];
    this.logs = [];
  }

  bytes() {
    return new Uint8Array(this.memory.buffer);
  }

  // hostCall is hook_v1.host_call: an empty name and input take the parked
  // document or reply; anything else calls a capability.
  hostCall(namePtr, nameLen, inPtr, inLen, outPtr, outCap) {
    [namePtr, nameLen, inPtr, inLen, outPtr, outCap] = [namePtr, nameLen, inPtr, inLen, outPtr, outCap].map((v) => v >>> 0);
    if (nameLen === 0 && inLen === 0) {
      if (this.parked === null) return BigInt(NO_PENDING) << 32n;
      const { status, body } = this.parked;
      if (body.length > outCap) return (BigInt(BUFFER_TOO_SMALL) << 32n) | BigInt(body.length);
      this.bytes().set(body, outPtr);
      this.parked = null;
      return (BigInt(status) << 32n) | BigInt(body.length);
    }
    this.parked = null;
    if (!this.inInvocation) return BigInt(NOT_IN_INVOCATION) << 32n;
    const mem = this.bytes();
    const name = decoder.decode(mem.slice(namePtr, namePtr + nameLen));
    const input = decoder.decode(mem.slice(inPtr, inPtr + inLen));
    this.calls.push(name);
    const { status, body } = this.answer(name, input);
    const out = encoder.encode(typeof body === "string" ? body : JSON.stringify(body));
    if (out.length <= outCap) this.bytes().set(out, outPtr);
    else this.parked = { status, body: out };
    return (BigInt(status) << 32n) | BigInt(out.length);
  }

  answer(name, input) {
    const cap = this.capabilities[name];
    if (cap === undefined) {
      if (name === "log.write") {
        this.logs.push(input);
        return { status: OK, body: {} };
      }
      return { status: UNKNOWN_CAPABILITY, body: { code: "unknown_capability", message: "no mock for " + name } };
    }
    const r = typeof cap === "function" ? cap(JSON.parse(input), name) : cap;
    if (r === undefined || typeof r.status !== "number") {
      throw new Error(`the mock of ${name} must return { status, body }`);
    }
    return r;
  }

  // run invokes the hook once. inv: { point, context, settings?, meta? };
  // capabilities: { name: (payload) => ({ status, body }) or { status, body } }.
  // Returns { decision, failed, output, calls, logs }.
  run(inv, capabilities = {}) {
    const doc = encoder.encode(JSON.stringify({
      abi: 1,
      point: inv.point,
      context: inv.context ?? {},
      settings: inv.settings ?? {},
      meta: { hook: "mockhost", invocation: "mockhost-1", tenant: "test", ...(inv.meta ?? {}) },
    }));
    this.capabilities = capabilities;
    this.calls = [];
    this.logs = [];
    this.parked = { status: OK, body: doc };
    this.inInvocation = true;
    let r;
    try {
      r = this.instance.exports.hook_v1_handle(doc.length);
    } catch (e) {
      // A trap (unreachable, out of bounds): a hook failure to the host.
      r = 0n;
      this.trap = e;
    } finally {
      this.inInvocation = false;
      this.parked = null;
    }
    const result = { decision: null, failed: false, output: "", calls: this.calls, logs: this.logs };
    if (r === 0n) {
      result.failed = true;
      return result;
    }
    const ptr = Number(r >> 32n), len = Number(r & 0xffffffffn);
    result.output = decoder.decode(this.bytes().slice(ptr, ptr + len));
    result.decision = JSON.parse(result.output);
    return result;
  }
}
