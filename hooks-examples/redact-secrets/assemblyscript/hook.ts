// redact-secrets in AssemblyScript: the same hook as ../main.go (same
// manifest, settings and decisions; the shared corpus in testdata/corpus
// checks it), written with the AssemblyScript SDK (sdk/assemblyscript) and its
// RE2-subset regexp. Strings stay UTF-8 bytes from the input to the output.
import {
  handle, Invocation, Decision, Continue, Fail, ModifyPrimary, Value, Bytes, utf8, bytesEqual,
  JSTRING, JARRAY, JOBJECT,
} from "../../../sdk/assemblyscript/assembly/index";
import { Regex, ByteSet, compileError, runeLen } from "../../../sdk/assemblyscript/assembly/regex";

const DEFAULT_PATTERNS: string[] = [
  "-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\\s\\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
  "(?:AKIA|ASIA)[0-9A-Z]{16,}",
  "\\bsk-[A-Za-z0-9_-]{20,}",
  "sk-(?:[A-Za-z0-9]{32,}[A-Za-z0-9_-]*|(?:proj|svcacct|admin|ant-[a-z]+[0-9]+)-[A-Za-z0-9_-]{40,}|or-v[0-9]+-[0-9a-f]{64}[A-Za-z0-9_-]*)",
  "gh[pousr]_[A-Za-z0-9]{36}[A-Za-z0-9_]*",
  "github_pat_[A-Za-z0-9_]{22,}",
  "xox[abposr]-[A-Za-z0-9-]{10,}",
  "AIza[0-9A-Za-z_-]{35,}",
  "eyJ[A-Za-z0-9_-]{5,}\\.eyJ[A-Za-z0-9_-]{5,}\\.[A-Za-z0-9_-]+(?:\\.[A-Za-z0-9_-]+)*",
  "(?i)\\bbearer\\s+(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)",
  "[A-Za-z0-9_.%+-]+@[A-Za-z0-9-]{1,63}(?:\\.[A-Za-z0-9-]{1,63}){0,14}\\.[A-Za-z]{2,63}",
];

// The last compiled pattern list: an instance serves one hook with one set
// of settings, so this almost always hits.
let cacheKey: Uint8Array[] = [];
let cacheRes: Regex[] = [];
let compileFailure: string = "";

function compileAll(pats: Uint8Array[]): Regex[] | null {
  let same = pats.length == cacheKey.length;
  for (let i = 0; same && i < pats.length; i++) same = bytesEqual(pats[i], cacheKey[i]);
  if (same) return cacheRes;
  const res: Regex[] = [];
  for (let i = 0; i < pats.length; i++) {
    const r = Regex.compile(pats[i]);
    if (r === null) {
      compileFailure = "setting patterns: pattern " + i.toString() + " is not a valid regular expression: " + compileError;
      return null;
    }
    res.push(r);
  }
  cacheKey = pats;
  cacheRes = res;
  return res;
}

let res: Regex[] = [];
let defaultRes: Regex[] | null = null;
let replacementText: string = "";
let replacement: Uint8Array = new Uint8Array(0);
let count = 0;

// redactText returns s with every match replaced, or s itself. Spans are
// found in the original text and merged where they overlap, so each secret
// counts once whatever the order of the patterns.
function redactText(s: Uint8Array): Uint8Array {
  const starts: i32[] = [];
  const ends: i32[] = [];
  // One pass finds the bytes the text holds; a pattern whose required bytes
  // are not all there is not run.
  const set = ByteSet.of(s);
  for (let r = 0; r < res.length; r++) {
    const re = res[r];
    if (!re.mayMatch(set)) continue;
    let from = 0;
    while (from <= s.length) {
      const m = re.findAt(s, from);
      if (m === null) break;
      let a = m.start;
      let b = m.end;
      if (re.hasSecret && m.secretStart >= 0) { a = m.secretStart; b = m.secretEnd; }
      if (b > a) { starts.push(a); ends.push(b); }
      if (m.end > m.start) from = m.end;
      else if (m.end >= s.length) break;
      else from = m.end + runeLen(s, m.end);
    }
  }
  if (starts.length == 0) return s;
  // sort the spans by start (insertion sort: there are few)
  for (let i = 1; i < starts.length; i++) {
    const a = starts[i];
    const b = ends[i];
    let j = i - 1;
    while (j >= 0 && starts[j] > a) { starts[j + 1] = starts[j]; ends[j + 1] = ends[j]; j--; }
    starts[j + 1] = a;
    ends[j + 1] = b;
  }
  const out = new Bytes();
  out.grow(s.length + 16 * replacement.length);
  let last = 0;
  let i = 0;
  while (i < starts.length) {
    const cs = starts[i];
    let ce = ends[i];
    i++;
    while (i < starts.length && starts[i] < ce) { if (ends[i] > ce) ce = ends[i]; i++; }
    out.slice(s, last, cs);
    out.all(replacement);
    last = ce;
    count++;
  }
  out.slice(s, last, s.length);
  return out.bytes();
}

function redactValue(v: Value): Value {
  if (v.kind == JSTRING) return Value.strBytes(redactText(v.bytes));
  if (v.kind == JARRAY || v.kind == JOBJECT) {
    const o = new Value();
    o.kind = v.kind;
    o.keys = v.keys;
    for (let i = 0; i < v.items.length; i++) o.items.push(redactValue(v.items[i]));
    return o;
  }
  return v;
}

function decide(inv: Invocation): Decision {
  const pats = inv.settingStrings("patterns");
  const extra = inv.settingStrings("extra_patterns");
  const repl = inv.settingString("replacement", "[REDACTED]");
  const err = inv.settingError;
  if (err !== null) return Fail(err);
  // The default list, compiled once: no UTF-8 copies to make and compare.
  const defaults = pats === null && (extra === null || extra.length == 0);
  if (defaults && defaultRes !== null) {
    res = defaultRes!;
  } else {
    let all: Uint8Array[] = [];
    if (pats === null) { for (let i = 0; i < DEFAULT_PATTERNS.length; i++) all.push(utf8(DEFAULT_PATTERNS[i])); }
    else all = all.concat(pats);
    if (extra !== null) all = all.concat(extra);
    const compiled = compileAll(all);
    if (compiled === null) return Fail(compileFailure);
    res = compiled;
    if (defaults) defaultRes = compiled;
  }
  if (repl != replacementText) { replacementText = repl; replacement = utf8(repl); }
  count = 0;
  const v = inv.primaryValue();
  if (v === null) return Continue();
  const redacted = redactValue(v);
  if (count == 0) return Continue();
  return ModifyPrimary(redacted).withReason("redacted " + count.toString() + (count == 1 ? " secret" : " secrets"));
}

export function hook_v1_handle(inLen: u32): u64 {
  return handle(inLen, decide);
}
