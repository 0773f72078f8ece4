// block-prompt-injection in AssemblyScript: the same hook as ../main.go
// (same manifest, settings, signals, weights and reasons; the shared corpus
// in testdata/corpus checks it), written with the AssemblyScript SDK
// (sdk/assemblyscript). It works on UTF-8 bytes, with the C port's Unicode
// approximations (see ../c/hook.c): ASCII exact; letters, lower-casing and
// printability approximated by Unicode block, without tables.
import {
  handle, Invocation, Decision, Continue, Block, Fail, Value, Bytes, utf8, putRune, bytesEqual,
  JSTRING, JARRAY, JOBJECT, JNUMBER,
} from "../../../sdk/assemblyscript/assembly/index";

const MAX_GAP = 3;
const DEFAULT_USER_MESSAGE = "This message was blocked because it looks like an attempt to manipulate the assistant.";

const DEFAULT_TEXTS: string[] = [
  "ignore previous instructions", "ignore prior instructions", "ignore the above", "disregard all prior",
  "disregard previous instructions", "disregard the above", "forget your instructions", "forget everything above",
  "override your instructions", "new instructions", "you are now", "pretend you are", "from now on you",
  "system prompt", "reveal your instructions", "reveal your prompt", "print your instructions",
  "repeat the text above", "developer mode", "do anything now", "jailbreak",
];
const DEFAULT_WEIGHTS: f64[] = [1, 1, 0.5, 1, 1, 0.5, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 1, 1, 1, 0.5, 0.7, 1, 0.7];
const TEMPLATE_TOKENS: string[] = [
  "<|im_start|>", "<|im_end|>", "<|system|>", "<|assistant|>", "<|user|>", "<|endoftext|>",
  "<|begin_of_text|>", "<|start_header_id|>", "<|eot_id|>", "[inst]", "[/inst]", "<<sys>>", "<</sys>>",
];
const ROLE_LABELS: string[] = ["system:", "assistant:", "user:", "developer:", "### system", "### instruction", "### assistant", "<system>", "</system>"];

// The tokens and labels as UTF-8, made once per instance.
const TEMPLATE_BYTES: Uint8Array[] = TEMPLATE_TOKENS.map<Uint8Array>((t: string): Uint8Array => utf8(t));
const ROLE_BYTES: Uint8Array[] = ROLE_LABELS.map<Uint8Array>((t: string): Uint8Array => utf8(t));

// hasPrefixAt reports whether s[at:] starts with p.
function hasPrefixAt(s: Uint8Array, at: i32, end: i32, p: Uint8Array): bool {
  if (end - at < p.length) return false;
  for (let k = 0; k < p.length; k++) if (unchecked(s[at + k]) != unchecked(p[k])) return false;
  return true;
}

// ---- runes ----
let runeAt: i32 = 0; // the byte length of the last rune read
function nextRune(s: Uint8Array, i: i32): i32 {
  const c = <i32>s[i];
  runeAt = 1;
  if (c < 0x80) return c;
  let l = 0;
  let v = 0;
  if (c >= 0xc2 && c <= 0xdf) { l = 2; v = c & 0x1f; }
  else if (c >= 0xe0 && c <= 0xef) { l = 3; v = c & 0x0f; }
  else if (c >= 0xf0 && c <= 0xf4) { l = 4; v = c & 0x07; }
  else return 0xfffd;
  if (i + l > s.length) return 0xfffd;
  for (let k = 1; k < l; k++) {
    const d = <i32>s[i + k];
    if ((d & 0xc0) != 0x80) return 0xfffd;
    v = (v << 6) | (d & 0x3f);
  }
  runeAt = l;
  return v;
}
function toLower(r: i32): i32 {
  if (r >= 0x41 && r <= 0x5a) return r + 32;
  if (r < 0x80) return r;
  if (r >= 0xc0 && r <= 0xde && r != 0xd7) return r + 32;
  if (r >= 0x391 && r <= 0x3a9 && r != 0x3a2) return r + 32;
  if (r >= 0x410 && r <= 0x42f) return r + 32;
  if (r >= 0x400 && r <= 0x40f) return r + 80;
  return r;
}
function isWordRune(r: i32): bool {
  if (r < 0x80) return (r >= 0x30 && r <= 0x39) || (r >= 0x61 && r <= 0x7a) || (r >= 0x41 && r <= 0x5a);
  if (r == 0xaa || r == 0xb5 || r == 0xba) return true;
  if (r >= 0xc0 && r <= 0x24f) return r != 0xd7 && r != 0xf7;
  if (r >= 0x250 && r <= 0x2af) return true;
  if (r >= 0x370 && r <= 0x3ff) return r != 0x37e && r != 0x387;
  if (r >= 0x400 && r <= 0x52f) return r < 0x482 || r > 0x489;
  if (r >= 0x531 && r <= 0x1fff) return true;
  if (r >= 0x3040 && r <= 0x9fff) return r >= 0x3041 && !(r >= 0x30fb && r <= 0x30fc);
  if (r >= 0xac00 && r <= 0xd7af) return true;
  if (r >= 0xf900 && r <= 0xfaff) return true;
  return false;
}
function isInvisible(r: i32): bool {
  return (r >= 0x200b && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2060 && r <= 0x2064) ||
    (r >= 0x2066 && r <= 0x2069) || r == 0xfeff || r == 0xad;
}

let invisibleCount = 0;
let hidden = new Bytes();
// splitInvisible returns the visible bytes; counts invisible characters and
// collects the text hidden in tag characters.
function splitInvisible(s: Uint8Array): Uint8Array {
  const v = new Bytes();
  invisibleCount = 0;
  hidden = new Bytes();
  let i = 0;
  while (i < s.length) {
    const r = nextRune(s, i);
    const l = runeAt;
    if (r >= 0xe0000 && r <= 0xe007f) {
      if (r >= 0xe0020 && r <= 0xe007e) putRune(hidden, r - 0xe0000);
    } else if (r != 0x200d && isInvisible(r)) invisibleCount++;
    else v.slice(s, i, i + l);
    i += l;
  }
  return v.bytes();
}

function words(s: Uint8Array): Uint8Array[] {
  const vis = splitInvisible(s);
  const low = new Bytes();
  let i = 0;
  while (i < vis.length) { const r = nextRune(vis, i); i += runeAt; putRune(low, toLower(r)); }
  const b = low.bytes();
  const out: Uint8Array[] = [];
  i = 0;
  while (i < b.length) {
    const start = i;
    const r = nextRune(b, i);
    i += runeAt;
    if (!isWordRune(r)) continue;
    let end = i;
    while (i < b.length) {
      const q = nextRune(b, i);
      if (!isWordRune(q)) break;
      i += runeAt;
      end = i;
    }
    out.push(b.slice(start, end));
  }
  return out;
}

function matchFrom(t: Uint8Array[], pos: i32, ph: Uint8Array[], k: i32): bool {
  if (k == ph.length) return true;
  for (let j = pos; j < t.length && j <= pos + MAX_GAP; j++)
    if (bytesEqual(t[j], ph[k]) && matchFrom(t, j + 1, ph, k + 1)) return true;
  return false;
}
function containsPhrase(t: Uint8Array[], ph: Uint8Array[]): bool {
  if (ph.length == 0) return false;
  for (let i = 0; i < t.length; i++) if (bytesEqual(t[i], ph[0]) && matchFrom(t, i + 1, ph, 1)) return true;
  return false;
}

// num is strconv.FormatFloat(f, 'f', -1, 64) for ordinary magnitudes.
function num(f: f64): string {
  const s = f.toString();
  return s.endsWith(".0") ? s.substring(0, s.length - 2) : s;
}

// quote is strconv.Quote for printable text.
function quote(s: string): string {
  const hex = "0123456789abcdef";
  let o = "\"";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22) o += "\\\"";
    else if (c == 0x5c) o += "\\\\";
    else if (c == 7) o += "\\a";
    else if (c == 8) o += "\\b";
    else if (c == 12) o += "\\f";
    else if (c == 10) o += "\\n";
    else if (c == 13) o += "\\r";
    else if (c == 9) o += "\\t";
    else if (c == 11) o += "\\v";
    else if (c < 0x20 || c == 0x7f) o += "\\x" + hex.charAt(c >> 4) + hex.charAt(c & 15);
    else o += String.fromCharCode(c);
  }
  return o + "\"";
}

let total: f64 = 0;
let summary: string[] = [];
function add(what: string, w: f64): void {
  summary.push(what + " (+" + num(w) + ")");
  total += w;
}
function counted(n: i32, one: string, many: string): string {
  return n.toString() + " " + (n == 1 ? one : many);
}

function countSub(s: Uint8Array, t: Uint8Array): i32 {
  let c = 0;
  let i = 0;
  const tl = t.length;
  if (tl == 0) return 0;
  const t0 = t[0];
  while (i + tl <= s.length) {
    if (unchecked(s[i]) != t0) { i++; continue; }
    let ok = true;
    for (let k = 0; k < tl; k++) if (unchecked(s[i + k]) != unchecked(t[k])) { ok = false; break; }
    if (ok) { c++; i += tl; } else i++;
  }
  return c;
}

function isB64(c: i32): bool {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x2b || c == 0x2f || c == 0x2d || c == 0x5f;
}
function b64val(c: i32, url: bool): i32 {
  if (c >= 0x41 && c <= 0x5a) return c - 0x41;
  if (c >= 0x61 && c <= 0x7a) return c - 0x61 + 26;
  if (c >= 0x30 && c <= 0x39) return c - 0x30 + 52;
  if (c == (url ? 0x2d : 0x2b)) return 62;
  if (c == (url ? 0x5f : 0x2f)) return 63;
  return -1;
}
function printable(r: i32): bool {
  if (r < 0x80) return (r >= 0x20 && r < 0x7f) || (r >= 9 && r <= 13);
  if (r < 0xa0) return r == 0x85;
  return !isInvisible(r) && r != 0xfffd && !(r >= 0xe0000 && r <= 0xe007f);
}
function validUTF8(b: Uint8Array): bool {
  let i = 0;
  while (i < b.length) {
    const c = <i32>b[i];
    if (c < 0x80) { i++; continue; }
    const r = nextRune(b, i);
    if (r == 0xfffd && runeAt == 1) return false;
    if (r < (runeAt == 2 ? 0x80 : runeAt == 3 ? 0x800 : 0x10000) || (r >= 0xd800 && r <= 0xdfff) || r > 0x10ffff) return false;
    i += runeAt;
  }
  return true;
}
function decodeText(s: Uint8Array): Uint8Array | null {
  if (s.length % 4 == 1) return null;
  for (let u = 0; u < 2; u++) {
    const url = u == 1;
    const out = new Bytes();
    let acc = 0;
    let bits = 0;
    let ok = true;
    for (let i = 0; i < s.length; i++) {
      const v = b64val(s[i], url);
      if (v < 0) { ok = false; break; }
      acc = ((acc << 6) | v) & 0xffffff;
      bits += 6;
      if (bits >= 8) { bits -= 8; out.byte(<u8>((acc >> bits) & 0xff)); }
    }
    if (!ok) continue;
    const b = out.bytes();
    if (!validUTF8(b)) continue;
    let n = 0;
    let good = 0;
    let i = 0;
    while (i < b.length) { const r = nextRune(b, i); i += runeAt; n++; if (printable(r)) good++; }
    if (good * 10 >= n * 9) return b;
  }
  return null;
}

function lowerASCII(s: Uint8Array): Uint8Array {
  const o = s.slice(0);
  for (let i = 0; i < o.length; i++) { const c = o[i]; if (c >= 0x41 && c <= 0x5a) o[i] = c + 32; }
  return o;
}

function score(t: Uint8Array, texts: string[], weights: f64[]): void {
  total = 0;
  summary = [];
  const lower = lowerASCII(t);
  let n = 0;
  for (let i = 0; i < TEMPLATE_BYTES.length; i++) n += countSub(lower, TEMPLATE_BYTES[i]);
  if (n > 0) add(counted(n, "chat-template token", "chat-template tokens"), 1.0);

  let roles = 0;
  let i = 0;
  while (i <= lower.length) {
    let e = i;
    while (e < lower.length && lower[e] != 10) e++;
    let a = i;
    while (a < e && (lower[a] == 32 || (lower[a] >= 9 && lower[a] <= 13))) a++;
    for (let k = 0; k < ROLE_BYTES.length; k++) {
      if (hasPrefixAt(lower, a, e, ROLE_BYTES[k])) { roles++; break; }
    }
    i = e + 1;
  }
  if (roles >= 2) add(counted(roles, "role markers", "role markers"), 0.5);

  const visible = splitInvisible(t);
  const hid = hidden.bytes();
  if (invisibleCount > 0) add(counted(invisibleCount, "invisible character", "invisible characters"), 0.5);
  const scan = new Bytes();
  scan.all(visible);
  let hr = 0;
  for (let k = 0; k < hid.length; k++) if ((hid[k] & 0xc0) != 0x80) hr++;
  if (hr > 6) {
    add("text hidden in Unicode tag characters", 1.0);
    scan.byte(10);
    scan.all(hid);
  }
  const blobs: Uint8Array[] = [];
  i = 0;
  while (i < visible.length) {
    if (!isB64(visible[i])) { i++; continue; }
    let j = i;
    let up = false, lo = false, dg = false;
    while (j < visible.length && isB64(visible[j])) {
      const c = visible[j];
      up = up || (c >= 0x41 && c <= 0x5a);
      lo = lo || (c >= 0x61 && c <= 0x7a);
      dg = dg || (c >= 0x30 && c <= 0x39);
      j++;
    }
    if (j - i >= 40 && up && lo && dg) {
      const d = decodeText(visible.slice(i, j));
      if (d !== null && d.length > 0) blobs.push(d);
    }
    while (j < visible.length && visible[j] == 0x3d) j++;
    i = j;
  }
  if (blobs.length > 0) {
    add(counted(blobs.length, "base64-encoded text", "base64-encoded texts"), 0.5);
    for (let k = 0; k < blobs.length; k++) { scan.byte(10); scan.all(blobs[k]); }
  }
  const tokens = words(scan.bytes());
  for (let k = 0; k < texts.length; k++)
    if (containsPhrase(tokens, words(utf8(texts[k])))) add(quote(texts[k]), weights[k]);
}

function collect(b: Bytes, v: Value): void {
  if (v.kind == JSTRING) { b.all(v.bytes); b.byte(10); }
  else if (v.kind == JARRAY || v.kind == JOBJECT) for (let i = 0; i < v.items.length; i++) collect(b, v.items[i]);
}

let phraseError: string = "";
function parsePhrases(key: string, v: Value, texts: string[], weights: f64[]): bool {
  if (v.kind != JARRAY) { phraseError = "setting \"" + key + "\": want an array of phrases"; return false; }
  for (let i = 0; i < v.items.length; i++) {
    const e = v.items[i];
    let t = "";
    let w: f64 = 1;
    const item = "setting \"" + key + "\": item " + i.toString() + ": ";
    if (e.kind == JSTRING) t = e.asString();
    else if (e.kind == JOBJECT) {
      const p = e.get("phrase");
      if (p !== null && p.kind == JSTRING) t = p.asString();
      const wv = e.get("weight");
      if (wv !== null) {
        if (wv.kind != JNUMBER || !(wv.asNumber() > 0)) { phraseError = item + "\"weight\" must be a number greater than 0"; return false; }
        w = wv.asNumber();
      }
    } else { phraseError = item + "want a string or {\"phrase\", \"weight\"}"; return false; }
    if (words(utf8(t)).length == 0) { phraseError = item + "the phrase has no words"; return false; }
    texts.push(t);
    weights.push(w);
  }
  return true;
}

function decide(inv: Invocation): Decision {
  const threshold = inv.settingNumber("threshold", 1.0);
  const userMessage = inv.settingString("user_message", DEFAULT_USER_MESSAGE);
  const err = inv.settingError;
  if (err !== null) return Fail(err);
  if (!(threshold > 0)) return Fail("setting \"threshold\": must be greater than 0, got " + num(threshold));
  let texts: string[] = DEFAULT_TEXTS.slice(0);
  let weights: f64[] = DEFAULT_WEIGHTS.slice(0);
  const ps = inv.setting("phrases");
  if (ps !== null) {
    texts = [];
    weights = [];
    if (!parsePhrases("phrases", ps, texts, weights)) return Fail(phraseError);
  }
  const ex = inv.setting("extra_phrases");
  if (ex !== null && !parsePhrases("extra_phrases", ex, texts, weights)) return Fail(phraseError);

  const b = new Bytes();
  const v = inv.primaryValue();
  if (v !== null) collect(b, v);
  score(b.bytes(), texts, weights);
  if (total == 0) return Continue();
  const sum = summary.join(", ");
  if (total < threshold)
    return Continue().withReason("prompt-injection score " + num(total) + " is below the threshold " + num(threshold) + ": " + sum);
  return Block("prompt injection suspected (score " + num(total) + ", threshold " + num(threshold) + "): " + sum).withUserMessage(userMessage);
}

export function hook_v1_handle(inLen: u32): u64 {
  return handle(inLen, decide);
}
