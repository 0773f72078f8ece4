// wasmhooks: the AssemblyScript SDK for wasmhooks hooks (hook ABI v1, ABI.md).
//
// What the Go SDK gives: the invocation decoded (point, primary field and
// value, context, settings with type errors recorded, meta), a JSON reader
// and writer that keep strings as UTF-8 bytes, the decisions, and host calls
// (llmRun, kvGet, kvSet, log, call) with their statuses. A hook exports
// hook_v1_handle itself, in one line:
//
//   import { handle, Invocation, Decision, Continue } from "wasmhooks/assembly";
//   function decide(inv: Invocation): Decision { return Continue(); }
//   export function hook_v1_handle(inLen: u32): u64 { return handle(inLen, decide); }
//
// Build (npm's assemblyscript): asc hook.ts -O3 --runtime incremental
//   --use abort=sdk/assemblyscript/assembly/index/abortHook -o hook.wasm
// (the --use drops the env.abort import the host refuses). A handler fails the
// hook by returning Fail("why").

// ---- the import ----
@external("hook_v1", "host_call")
declare function host_call(namePtr: usize, nameLen: u32, inPtr: usize, inLen: u32, outPtr: usize, outCap: u32): u64;

// abortHook replaces AssemblyScript's env.abort: a trap, which the host
// reports as a hook failure.
export function abortHook(message: string | null, file: string | null, line: u32, column: u32): void {
  unreachable();
}

// ---- status codes (ABI.md, Status codes) ----
export const OK: u32 = 0;
export const UNKNOWN_CAPABILITY: u32 = 1;
export const INVALID_REQUEST: u32 = 2;
export const DENIED: u32 = 3;
export const INSUFFICIENT_CREDIT: u32 = 4;
export const CAPABILITY_FAILED: u32 = 5;
export const RESULT_TOO_LARGE: u32 = 6;
export const REQUEST_TOO_LARGE: u32 = 7;
export const BUFFER_TOO_SMALL: u32 = 8;
export const NO_PENDING: u32 = 9;
export const QUOTA_EXCEEDED: u32 = 10;
export const NOT_IN_INVOCATION: u32 = 11;
export const RATE_LIMITED: u32 = 12;
// Not an ABI status: the SDK could not read the capability's result.
export const MALFORMED_RESULT: u32 = 0x10000;

const CODES: string[] = ["ok", "unknown_capability", "invalid_request", "denied", "insufficient_credit",
  "capability_failed", "result_too_large", "request_too_large", "buffer_too_small", "no_pending",
  "quota_exceeded", "not_in_invocation", "rate_limited"];

export function statusCode(s: u32): string {
  if (s < <u32>CODES.length) return CODES[s];
  if (s == MALFORMED_RESULT) return "malformed_result";
  return "status_" + s.toString();
}

// ---- bytes ----
export class Bytes {
  data: Uint8Array = new Uint8Array(64);
  n: i32 = 0;
  grow(extra: i32): void {
    if (this.n + extra <= this.data.length) return;
    let cap = this.data.length * 2;
    while (cap < this.n + extra) cap *= 2;
    const d = new Uint8Array(cap);
    memory.copy(d.dataStart, this.data.dataStart, this.n);
    this.data = d;
  }
  byte(b: u8): void {
    this.grow(1);
    unchecked(this.data[this.n++] = b);
  }
  raw(p: usize, len: i32): void {
    this.grow(len);
    memory.copy(this.data.dataStart + <usize>this.n, p, len);
    this.n += len;
  }
  slice(a: Uint8Array, start: i32, end: i32): void {
    this.raw(a.dataStart + <usize>start, end - start);
  }
  all(a: Uint8Array): void {
    this.raw(a.dataStart, a.length);
  }
  str(s: string): void {
    const b = String.UTF8.encode(s);
    this.raw(changetype<usize>(b), b.byteLength);
  }
  bytes(): Uint8Array {
    const o = new Uint8Array(this.n);
    memory.copy(o.dataStart, this.data.dataStart, this.n);
    return o;
  }
  toString(): string {
    return String.UTF8.decodeUnsafe(this.data.dataStart, this.n);
  }
}

export function utf8(s: string): Uint8Array {
  return Uint8Array.wrap(String.UTF8.encode(s));
}

export function text(b: Uint8Array): string {
  return String.UTF8.decodeUnsafe(b.dataStart, b.length);
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): bool {
  if (a.length != b.length) return false;
  return memory.compare(a.dataStart, b.dataStart, a.length) == 0;
}

// ---- JSON ----
export const JNULL: i32 = 0;
export const JFALSE: i32 = 1;
export const JTRUE: i32 = 2;
export const JNUMBER: i32 = 3;
export const JSTRING: i32 = 4;
export const JARRAY: i32 = 5;
export const JOBJECT: i32 = 6;

// A JSON value. Strings (and keys) are kept as UTF-8 bytes; numbers as
// written.
const NO_BYTES = new Uint8Array(0);

export class Value {
  kind: i32 = JNULL;
  // string (unescaped) or number text. Empty values share one empty array
  // (it holds nothing to change; a value gets its own by assignment).
  bytes: Uint8Array = NO_BYTES;
  // items: array elements, or object values; keys: object keys, in document
  // order. Allocated at first use: a string or number never pays for them.
  private _items: Value[] | null = null;
  private _keys: Uint8Array[] | null = null;
  get items(): Value[] {
    let a = this._items;
    if (a === null) { a = []; this._items = a; }
    return a;
  }
  set items(a: Value[]) { this._items = a; }
  get keys(): Uint8Array[] {
    let a = this._keys;
    if (a === null) { a = []; this._keys = a; }
    return a;
  }
  set keys(a: Uint8Array[]) { this._keys = a; }

  static str(s: string): Value {
    const v = new Value();
    v.kind = JSTRING;
    v.bytes = utf8(s);
    return v;
  }
  static strBytes(b: Uint8Array): Value {
    const v = new Value();
    v.kind = JSTRING;
    v.bytes = b;
    return v;
  }
  static num(s: string): Value {
    const v = new Value();
    v.kind = JNUMBER;
    v.bytes = utf8(s);
    return v;
  }
  static object(): Value {
    const v = new Value();
    v.kind = JOBJECT;
    return v;
  }
  static array(): Value {
    const v = new Value();
    v.kind = JARRAY;
    return v;
  }
  set(key: string, v: Value): Value {
    this.keys.push(utf8(key));
    this.items.push(v);
    return this;
  }
  get(key: string): Value | null {
    if (this.kind != JOBJECT) return null;
    // An ASCII key (all of the ABI's, most settings') is compared as it
    // is: no UTF-8 copy to allocate on every look-up.
    const n = key.length;
    let ascii = true;
    for (let j = 0; j < n; j++) if (<u32>key.charCodeAt(j) >= 0x80) { ascii = false; break; }
    if (!ascii) {
      const k = utf8(key);
      for (let i = 0; i < this.keys.length; i++) if (bytesEqual(this.keys[i], k)) return this.items[i];
      return null;
    }
    for (let i = 0; i < this.keys.length; i++) {
      const kb = unchecked(this.keys[i]);
      if (kb.length != n) continue;
      let j = 0;
      while (j < n && <u32>unchecked(kb[j]) == <u32>key.charCodeAt(j)) j++;
      if (j == n) return unchecked(this.items[i]);
    }
    return null;
  }
  isString(): bool { return this.kind == JSTRING; }
  asString(): string { return text(this.bytes); }
  asNumber(): f64 { return F64.parseFloat(text(this.bytes)); }
}

let jsonError: string | null = null;

class Parser {
  b: Uint8Array;
  i: i32 = 0;
  constructor(b: Uint8Array) { this.b = b; }
  fail(msg: string): Value | null {
    if (jsonError === null) jsonError = "invalid JSON at byte " + this.i.toString() + ": " + msg;
    return null;
  }
  ws(): void {
    while (this.i < this.b.length) {
      const c = unchecked(this.b[this.i]);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.i++;
    }
  }
  value(depth: i32): Value | null {
    this.ws();
    if (this.i >= this.b.length) return this.fail("unexpected end");
    const c = this.b[this.i];
    if (c == 0x7b || c == 0x5b) { // { [
      if (depth >= 128) return this.fail("too deep");
      const obj = c == 0x7b;
      const close: u8 = obj ? 0x7d : 0x5d;
      const v = obj ? Value.object() : Value.array();
      this.i++;
      this.ws();
      if (this.i < this.b.length && this.b[this.i] == close) { this.i++; return v; }
      while (true) {
        if (obj) {
          this.ws();
          if (this.i >= this.b.length || this.b[this.i] != 0x22) return this.fail("want a key");
          const k = this.string();
          if (k === null) return null;
          this.ws();
          if (this.i >= this.b.length || this.b[this.i] != 0x3a) return this.fail("want ':'");
          this.i++;
          v.keys.push(k);
        }
        const e = this.value(depth + 1);
        if (e === null) return null;
        v.items.push(e);
        this.ws();
        if (this.i < this.b.length && this.b[this.i] == 0x2c) { this.i++; continue; }
        if (this.i < this.b.length && this.b[this.i] == close) { this.i++; return v; }
        return this.fail("want ',' or a closing bracket");
      }
      return null;
    }
    if (c == 0x22) {
      const s = this.string();
      return s === null ? null : Value.strBytes(s);
    }
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
    if (this.lit("null")) { return new Value(); }
    if (this.lit("true")) { const v = new Value(); v.kind = JTRUE; return v; }
    if (this.lit("false")) { const v = new Value(); v.kind = JFALSE; return v; }
    return this.fail("invalid value");
  }
  lit(s: string): bool {
    const n = s.length;
    if (this.i + n > this.b.length) return false;
    for (let k = 0; k < n; k++) if (<i32>this.b[this.i + k] != s.charCodeAt(k)) return false;
    this.i += n;
    return true;
  }
  digits(): i32 {
    const s = this.i;
    while (this.i < this.b.length && this.b[this.i] >= 0x30 && this.b[this.i] <= 0x39) this.i++;
    return this.i - s;
  }
  number(): Value | null {
    const s = this.i;
    if (this.b[this.i] == 0x2d) this.i++;
    if (this.i < this.b.length && this.b[this.i] == 0x30) this.i++;
    else if (this.digits() == 0) return this.fail("invalid number");
    if (this.i < this.b.length && this.b[this.i] == 0x2e) {
      this.i++;
      if (this.digits() == 0) return this.fail("invalid number");
    }
    if (this.i < this.b.length && (this.b[this.i] == 0x65 || this.b[this.i] == 0x45)) {
      this.i++;
      if (this.i < this.b.length && (this.b[this.i] == 0x2b || this.b[this.i] == 0x2d)) this.i++;
      if (this.digits() == 0) return this.fail("invalid number");
    }
    const v = new Value();
    v.kind = JNUMBER;
    v.bytes = this.b.subarray(s, this.i);
    return v;
  }
  hex4(): i32 {
    if (this.i + 4 > this.b.length) return -1;
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const c = <i32>this.b[this.i + k];
      let d = -1;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
      else if (c >= 0x41 && c <= 0x46) d = c - 0x41 + 10;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    this.i += 4;
    return v;
  }
  // string parses the string at this.i (the opening quote) into UTF-8 bytes.
  string(): Uint8Array | null {
    this.i++;
    // The common case, a string without escapes: a view of the document,
    // no copy (one object for the collector instead of two).
    const first = this.i;
    this.i = plainRun(this.b, this.i, this.b.length);
    if (this.i < this.b.length && unchecked(this.b[this.i]) == 0x22) {
      this.i++;
      return this.b.subarray(first, this.i - 1);
    }
    this.i = first;
    const out = new Bytes();
    while (true) {
      const start = this.i;
      this.i = plainRun(this.b, this.i, this.b.length);
      out.slice(this.b, start, this.i);
      if (this.i >= this.b.length) { this.fail("unterminated string"); return null; }
      const c = this.b[this.i];
      if (c == 0x22) { this.i++; return out.bytes(); }
      if (c < 0x20) { this.fail("control character in string"); return null; }
      this.i++;
      if (this.i >= this.b.length) { this.fail("unterminated string"); return null; }
      const e = this.b[this.i++];
      if (e == 0x22 || e == 0x5c || e == 0x2f) out.byte(e);
      else if (e == 0x62) out.byte(8);
      else if (e == 0x66) out.byte(12);
      else if (e == 0x6e) out.byte(10);
      else if (e == 0x72) out.byte(13);
      else if (e == 0x74) out.byte(9);
      else if (e == 0x75) {
        let v = this.hex4();
        if (v < 0) { this.fail("invalid \\u escape"); return null; }
        if (v >= 0xdc00 && v <= 0xdfff) { this.fail("lone surrogate"); return null; }
        if (v >= 0xd800 && v <= 0xdbff) {
          if (this.i + 2 > this.b.length || this.b[this.i] != 0x5c || this.b[this.i + 1] != 0x75) { this.fail("lone surrogate"); return null; }
          this.i += 2;
          const w = this.hex4();
          if (w < 0xdc00 || w > 0xdfff) { this.fail("lone surrogate"); return null; }
          v = 0x10000 + ((v - 0xd800) << 10) + (w - 0xdc00);
        }
        putRune(out, v);
      } else { this.fail("invalid escape"); return null; }
    }
    return null;
  }
}

export function putRune(out: Bytes, v: i32): void {
  if (v < 0x80) out.byte(<u8>v);
  else if (v < 0x800) { out.byte(<u8>(0xc0 | (v >> 6))); out.byte(<u8>(0x80 | (v & 63))); }
  else if (v < 0x10000) { out.byte(<u8>(0xe0 | (v >> 12))); out.byte(<u8>(0x80 | ((v >> 6) & 63))); out.byte(<u8>(0x80 | (v & 63))); }
  else { out.byte(<u8>(0xf0 | (v >> 18))); out.byte(<u8>(0x80 | ((v >> 12) & 63))); out.byte(<u8>(0x80 | ((v >> 6) & 63))); out.byte(<u8>(0x80 | (v & 63))); }
}

// parse parses a JSON document; null with lastJSONError() set on error.
export function parse(b: Uint8Array): Value | null {
  jsonError = null;
  const p = new Parser(b);
  const v = p.value(0);
  if (v === null) return null;
  p.ws();
  if (p.i != b.length) return p.fail("data after the value");
  return v;
}

export function lastJSONError(): string {
  const e = jsonError;
  return e === null ? "" : e;
}

const HEX = "0123456789abcdef";

// plainRun returns the index of the first byte of b[from:n] that a JSON
// string cannot hold as it is ('"', '\\' or a control character), or n:
// eight bytes at a time (SWAR), as a loop per byte costs several times the
// instructions in wasm.
export function plainRun(b: Uint8Array, from: i32, n: i32): i32 {
  const ONES: u64 = 0x0101010101010101;
  const HIGHS: u64 = 0x8080808080808080;
  const base = b.dataStart;
  let i = from;
  while (i + 8 <= n) {
    const v = load<u64>(base + <usize>i);
    const q = v ^ (ONES * 0x22), e = v ^ (ONES * 0x5c);
    if ((((v - ONES * 0x20) & ~v) | ((q - ONES) & ~q) | ((e - ONES) & ~e)) & HIGHS) break;
    i += 8;
  }
  while (i < n) {
    const c = load<u8>(base + <usize>i);
    if (c == 0x22 || c == 0x5c || c < 0x20) break;
    i++;
  }
  return i;
}

// writeString appends UTF-8 bytes s[start:end] as a JSON string literal.
export function writeString(out: Bytes, s: Uint8Array, start: i32 = 0, end: i32 = -1): void {
  if (end < 0) end = s.length;
  out.byte(0x22);
  let run = start;
  out.grow(end - start + 2);
  for (let i = start; i < end; i++) {
    i = plainRun(s, i, end);
    if (i >= end) break;
    const c = unchecked(s[i]);
    out.slice(s, run, i);
    run = i + 1;
    if (c == 0x22) { out.byte(0x5c); out.byte(0x22); }
    else if (c == 0x5c) { out.byte(0x5c); out.byte(0x5c); }
    else if (c == 0x0a) { out.byte(0x5c); out.byte(0x6e); }
    else if (c == 0x0d) { out.byte(0x5c); out.byte(0x72); }
    else if (c == 0x09) { out.byte(0x5c); out.byte(0x74); }
    else {
      out.str("\\u00");
      out.byte(<u8>HEX.charCodeAt(c >> 4));
      out.byte(<u8>HEX.charCodeAt(c & 15));
    }
  }
  out.slice(s, run, end);
  out.byte(0x22);
}

export function write(out: Bytes, v: Value): void {
  switch (v.kind) {
    case JNULL: out.str("null"); break;
    case JTRUE: out.str("true"); break;
    case JFALSE: out.str("false"); break;
    case JNUMBER: out.all(v.bytes); break;
    case JSTRING: writeString(out, v.bytes); break;
    case JARRAY: {
      out.byte(0x5b);
      for (let i = 0; i < v.items.length; i++) { if (i > 0) out.byte(0x2c); write(out, v.items[i]); }
      out.byte(0x5d);
      break;
    }
    default: {
      out.byte(0x7b);
      for (let i = 0; i < v.items.length; i++) {
        if (i > 0) out.byte(0x2c);
        writeString(out, v.keys[i]);
        out.byte(0x3a);
        write(out, v.items[i]);
      }
      out.byte(0x7d);
    }
  }
}

// ---- the invocation ----
export function primaryFieldOf(point: string): string {
  if (point == "message.inbound") return "incoming";
  if (point == "message.outbound") return "outgoing";
  if (point == "tool.before") return "arguments";
  if (point == "tool.after") return "result";
  if (point == "llm.before") return "prompt";
  if (point == "llm.after") return "response";
  if (point == "compaction") return "summary";
  if (point == "memory.read" || point == "memory.write") return "value";
  return "";
}

export class Invocation {
  point: string = "";
  context: Value;
  settings: Value;
  constructor(context: Value | null = null, settings: Value | null = null) {
    this.context = context !== null ? context : Value.object();
    this.settings = settings !== null ? settings : Value.object();
  }
  // meta's hook, invocation and tenant, decoded when first read (most
  // hooks never read them: no UTF-16 copies to make and collect).
  private _meta: Value | null = null;
  private _hook: string | null = null;
  private _invocation: string | null = null;
  private _tenant: string | null = null;
  get hook(): string { let v = this._hook; if (v === null) { v = metaString(this._meta, "hook"); this._hook = v; } return v; }
  set hook(v: string) { this._hook = v; }
  get invocation(): string { let v = this._invocation; if (v === null) { v = metaString(this._meta, "invocation"); this._invocation = v; } return v; }
  set invocation(v: string) { this._invocation = v; }
  get tenant(): string { let v = this._tenant; if (v === null) { v = metaString(this._meta, "tenant"); this._tenant = v; } return v; }
  set tenant(v: string) { this._tenant = v; }
  setMeta(meta: Value | null): void { this._meta = meta; }
  // settingError is set by the first setting accessor that found a value of
  // the wrong type (the Go SDK's SettingsErr).
  settingError: string | null = null;

  primaryField(): string { return primaryFieldOf(this.point); }
  primaryValue(): Value | null {
    const f = this.primaryField();
    return f.length == 0 ? null : this.context.get(f);
  }
  // primaryText is the primary field if it is a string, else "".
  primaryText(): string {
    const v = this.primaryValue();
    return v !== null && v.kind == JSTRING ? v.asString() : "";
  }
  // setting is key's value, or null if absent or null.
  setting(key: string): Value | null {
    const v = this.settings.get(key);
    return v === null || v.kind == JNULL ? null : v;
  }
  bad(key: string, want: string): void {
    if (this.settingError === null) this.settingError = "setting \"" + key + "\": want " + want;
  }
  settingString(key: string, def: string): string {
    const v = this.setting(key);
    if (v === null) return def;
    if (v.kind != JSTRING) { this.bad(key, "a string"); return def; }
    return v.asString();
  }
  settingNumber(key: string, def: f64): f64 {
    const v = this.setting(key);
    if (v === null) return def;
    if (v.kind != JNUMBER) { this.bad(key, "a number"); return def; }
    return v.asNumber();
  }
  settingInt(key: string, def: i64): i64 {
    const v = this.setting(key);
    if (v === null) return def;
    const f = v.kind == JNUMBER ? v.asNumber() : NaN;
    if (v.kind != JNUMBER || Math.trunc(f) != f || Math.abs(f) > 9007199254740991.0) { this.bad(key, "an integer"); return def; }
    return <i64>f;
  }
  settingBool(key: string, def: bool): bool {
    const v = this.setting(key);
    if (v === null) return def;
    if (v.kind != JTRUE && v.kind != JFALSE) { this.bad(key, "a boolean"); return def; }
    return v.kind == JTRUE;
  }
  // settingStrings returns the array of strings, or null when absent (or
  // of the wrong type, which records an error).
  settingStrings(key: string): Uint8Array[] | null {
    const v = this.setting(key);
    if (v === null) return null;
    if (v.kind != JARRAY) { this.bad(key, "an array of strings"); return null; }
    const out: Uint8Array[] = [];
    for (let i = 0; i < v.items.length; i++) {
      if (v.items[i].kind != JSTRING) { this.bad(key, "an array of strings"); return null; }
      out.push(v.items[i].bytes);
    }
    return out;
  }
}

function metaString(meta: Value | null, key: string): string {
  if (meta === null) return "";
  const v = meta.get(key);
  return v !== null && v.kind == JSTRING ? v.asString() : "";
}

// decodeInvocation decodes an invocation document; null with
// decodeError set on failure.
let decodeError: string = "";
export function decodeInvocation(doc: Uint8Array): Invocation | null {
  const v = parse(doc);
  if (v === null) { decodeError = lastJSONError(); return null; }
  const p = v.get("point");
  const c = v.get("context");
  if (p === null || p.kind != JSTRING) { decodeError = "the invocation has no point"; return null; }
  if (c === null || c.kind != JOBJECT) { decodeError = "the invocation's context is not an object"; return null; }
  const s = v.get("settings");
  const inv = new Invocation(c, s !== null && s.kind == JOBJECT ? s : null);
  inv.point = p.asString();
  const meta = v.get("meta");
  inv.setMeta(meta);
  return inv;
}

// ---- decisions ----
export const CONTINUE: i32 = 0;
export const MODIFY: i32 = 1;
export const BLOCK: i32 = 2;
export const ASK: i32 = 3;
export const FAIL: i32 = 4;

export class Decision {
  action: i32 = CONTINUE;
  field: string = "";       // modify: "" means the point's primary field
  value: Value | null = null;
  reason: string = "";
  userMessage: string = "";
  doNotReplyAgain: bool = false;

  withReason(r: string): Decision { this.reason = r; return this; }
  withUserMessage(m: string): Decision { this.userMessage = m; return this; }
  setDoNotReplyAgain(): Decision { this.doNotReplyAgain = true; return this; }
}

export function Continue(): Decision { return new Decision(); }
export function Modify(field: string, value: Value): Decision {
  const d = new Decision();
  d.action = MODIFY;
  d.field = field;
  d.value = value;
  return d;
}
export function ModifyPrimary(value: Value): Decision { return Modify("", value); }
export function Block(reason: string): Decision { const d = new Decision(); d.action = BLOCK; d.reason = reason; return d; }
export function Ask(reason: string): Decision { const d = new Decision(); d.action = ASK; d.reason = reason; return d; }
// Fail makes the hook fail (hook_v1_handle returns 0): the host applies the
// hook's failure policy.
export function Fail(why: string): Decision { const d = new Decision(); d.action = FAIL; d.reason = why; return d; }

const ACTIONS: string[] = ["continue", "modify", "block", "ask"];

// encode writes d's canonical JSON for point; false if it cannot be encoded.
export function encode(d: Decision, point: string, out: Bytes): bool {
  if (d.action < 0 || d.action > ASK) return false;
  out.str("{\"action\":\"");
  out.str(ACTIONS[d.action]);
  out.byte(0x22);
  if (d.action == MODIFY) {
    const f = d.field.length > 0 ? d.field : primaryFieldOf(point);
    if (f.length == 0) return false;
    out.str(",\"context\":{");
    writeString(out, utf8(f));
    out.byte(0x3a);
    const v = d.value;
    if (v === null) out.str("null"); else write(out, v);
    out.byte(0x7d);
  }
  if (d.reason.length > 0) { out.str(",\"reason\":"); writeString(out, utf8(d.reason)); }
  if (d.userMessage.length > 0) { out.str(",\"user_message\":"); writeString(out, utf8(d.userMessage)); }
  if (d.doNotReplyAgain) out.str(",\"do_not_reply_again\":true");
  out.byte(0x7d);
  return true;
}

// ---- host calls ----
let inInvocation = false;

export class Reply {
  status: u32 = 0;
  body: Uint8Array = new Uint8Array(0);
  message: string = ""; // the error object's message, for a non-zero status
}

const SCRATCH: i32 = 16 << 10;
let scratch = new Uint8Array(SCRATCH);

// call calls capability name with a JSON payload.
export function call(name: string, payload: Uint8Array): Reply {
  const r = new Reply();
  if (!inInvocation) { r.status = NOT_IN_INVOCATION; return r; }
  const nm = utf8(name);
  let buf = scratch;
  const res = host_call(nm.dataStart, nm.length, payload.dataStart, payload.length, buf.dataStart, buf.length);
  let st = <u32>(res >> 32);
  const n = <i32>(<u32>res);
  if (n > buf.length) {
    buf = new Uint8Array(n);
    const t = host_call(0, 0, 0, 0, buf.dataStart, n);
    const ts = <u32>(t >> 32);
    if (ts == BUFFER_TOO_SMALL || ts == NO_PENDING || <i32>(<u32>t) != n) { r.status = ts; return r; }
    st = ts;
  }
  r.status = st;
  r.body = buf.slice(0, n);
  if (st != OK) {
    const e = parse(r.body);
    if (e !== null) {
      const m = e.get("message");
      if (m !== null && m.kind == JSTRING) r.message = m.asString();
    }
  }
  return r;
}

function callObject(name: string, payload: Value): Value | null {
  const b = new Bytes();
  write(b, payload);
  lastReply = call(name, b.bytes());
  if (lastReply.status != OK) return null;
  const v = parse(lastReply.body);
  if (v === null || v.kind != JOBJECT) { lastReply.status = MALFORMED_RESULT; return null; }
  return v;
}

// lastReply is the reply of the last llmRun, kvGet, kvSet or log: its
// status says why a call returned null or false.
export let lastReply: Reply = new Reply();

// llmRun runs the host's model on prompt; the reply's text, or null (see
// lastReply.status).
export function llmRun(prompt: string, maxTokens: i32): string | null {
  const p = Value.object().set("prompt", Value.str(prompt));
  if (maxTokens > 0) p.set("max_tokens", Value.num(maxTokens.toString()));
  const v = callObject("llm.run", p);
  if (v === null) return null;
  const t = v.get("text");
  if (t === null || t.kind != JSTRING) { lastReply.status = MALFORMED_RESULT; return null; }
  return t.asString();
}

// kvGet reads key: its value, a JSON null Value when not found, or null on
// failure (see lastReply.status).
export function kvGet(key: string): Value | null {
  const v = callObject("kv.get", Value.object().set("key", Value.str(key)));
  if (v === null) return null;
  const f = v.get("found");
  const val = v.get("value");
  if (f !== null && f.kind != JTRUE && f.kind != JFALSE && f.kind != JNULL) { lastReply.status = MALFORMED_RESULT; return null; }
  const found = f !== null && f.kind != JNULL ? f.kind == JTRUE : val !== null && val.kind != JNULL;
  return found && val !== null ? val : new Value();
}

export function kvSet(key: string, value: Value): bool {
  return callObject("kv.set", Value.object().set("key", Value.str(key)).set("value", value)) !== null;
}

export function log(level: string, message: string): bool {
  return callObject("log.write", Value.object().set("level", Value.str(level)).set("message", Value.str(message))) !== null;
}

// ---- the export's body ----
let output: Uint8Array = new Uint8Array(0);
let running = false;
// lastFailure says why the last invocation failed.
export let lastFailure: string = "";

// handle is the body of hook_v1_handle: takes the invocation, runs decide,
// returns the packed decision, or 0 when the hook fails.
export function handle(inLen: u32, decide: (inv: Invocation) => Decision): u64 {
  lastFailure = "";
  if (running) { lastFailure = "hook_v1_handle re-entered"; return 0; }
  running = true;
  const doc = new Uint8Array(<i32>inLen);
  const r = host_call(0, 0, 0, 0, doc.dataStart, inLen);
  if ((r >> 32) != 0 || <u32>r != inLen) { running = false; lastFailure = "taking the invocation failed"; return 0; }
  const inv = decodeInvocation(doc);
  if (inv === null) { running = false; lastFailure = decodeError; return 0; }
  inInvocation = true;
  const d = decide(inv);
  inInvocation = false;
  running = false;
  if (d.action == FAIL) { lastFailure = d.reason; return 0; }
  const out = new Bytes();
  if (!encode(d, inv.point, out)) { lastFailure = "the decision cannot be encoded at " + inv.point; return 0; }
  // The buffer itself is the output (no copy): it lives until the next
  // invocation replaces it, after the host has copied it.
  output = out.data;
  return (<u64>output.dataStart << 32) | <u64>out.n;
}
