// summarize in AssemblyScript: the same hook as ../main.go (same manifest,
// settings and decisions; the shared corpus in testdata/corpus checks it),
// written with the AssemblyScript SDK (sdk/assemblyscript).
import {
  handle, Invocation, Decision, Continue, Fail, ModifyPrimary, Value, llmRun, lastReply, statusCode,
  INSUFFICIENT_CREDIT, DENIED, RATE_LIMITED, MALFORMED_RESULT, utf8, text, JSTRING,
} from "../../../sdk/assemblyscript/assembly/index";

const DEFAULT_PROMPT_PREFIX = "Summarize the following text in a few sentences. Keep every fact, number, name and instruction the reader needs, and answer with the summary only.\n\n";

// runeCount counts the code points of UTF-8 bytes.
function runeCount(b: Uint8Array): i32 {
  let n = 0;
  for (let i = 0; i < b.length; i++) if ((unchecked(b[i]) & 0xc0) != 0x80) n++;
  return n;
}

function isSpace(s: string, i: i32): bool {
  const c = s.charCodeAt(i);
  return c == 0x20 || (c >= 0x09 && c <= 0x0d) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// trimSpace is Go's strings.TrimSpace.
function trimSpace(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && isSpace(s, a)) a++;
  while (b > a && isSpace(s, b - 1)) b--;
  return s.substring(a, b);
}

function explain(status: u32): string {
  if (status == INSUFFICIENT_CREDIT) return "insufficient credit for llm.run";
  if (status == DENIED) return "llm.run is not granted to this hook";
  if (status == RATE_LIMITED) return "llm.run is rate limited";
  if (status == MALFORMED_RESULT) return "llm.run returned a malformed result";
  return "llm.run failed (" + statusCode(status) + ")";
}

function decide(inv: Invocation): Decision {
  const minChars = inv.settingInt("min_chars", 400);
  const maxTokens = inv.settingInt("max_tokens", 120);
  const prefix = inv.settingString("prompt_prefix", DEFAULT_PROMPT_PREFIX);
  const err = inv.settingError;
  if (err !== null) return Fail(err);
  if (minChars < 0) return Fail("setting \"min_chars\": must be at least 0, got " + minChars.toString());
  if (maxTokens < 1) return Fail("setting \"max_tokens\": must be at least 1, got " + maxTokens.toString());
  const pv = inv.primaryValue();
  if (pv === null || pv.kind != JSTRING) return Continue();
  const n = runeCount(pv.bytes);
  if (n == 0 || <i64>n < minChars) return Continue();
  const out = llmRun(prefix + text(pv.bytes), <i32>min(maxTokens, <i64>i32.MAX_VALUE));
  if (out === null) return Continue().withReason("not summarized: " + explain(lastReply.status));
  const summary = trimSpace(out);
  const m = runeCount(utf8(summary));
  if (m == 0) return Continue().withReason("not summarized: the model returned an empty summary");
  if (m >= n) return Continue().withReason("not summarized: the summary (" + m.toString() + " characters) is not shorter than the text (" + n.toString() + ")");
  return ModifyPrimary(Value.str(summary)).withReason("summarized " + n.toString() + " characters to " + m.toString());
}

export function hook_v1_handle(inLen: u32): u64 {
  return handle(inLen, decide);
}
