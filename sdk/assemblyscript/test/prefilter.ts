// The regex prefilters (required bytes, the first-byte set and its two-byte
// search, Regex.mayMatch) never lose a match: random patterns over random
// texts (case-insensitive letters, classes, alternations, assertions,
// non-ASCII bytes, the Kelvin sign, the long s and Greek sigmas, non-ASCII
// class members and ranges, an invalid byte) match
// exactly as the same program with no filter, and mayMatch is true whenever
// it matches. foldSum checks the fold table (fold.ts) over every rune. The C and Rust
// SDKs' tests hold their engines to the same (test_prefilter_differential,
// prefilter_differential). Built by make test-sdks; prefilter.mjs runs it.
import { Regex, ByteSet, compileError } from "../assembly/regex";
import { utf8 } from "../assembly/index";
import { foldNext, FOLD_SUM } from "../assembly/fold";

const atoms: string[] = ["a", "b", "k", "K", "-", "[a-c]", "[^a]", "\\w", "\\s", "\\d", ".", "(?i)k", "(?i:ab)", "(a|b)",
  "(?:ab|c)", "\\b", "^", "$", "é", "[é-ê]", "x?", "(?i)é", "\\S", "(?s).", "[[:alpha:]]", "(?i)[k-m]", "(?m)^", "a*", "b+",
  "(?i)s", "ſ", "[^\\x00-\\x7f]", "sk-", "(?i)bearer", "(?i)[^a-z]", "(?i)\\w", "(?i)\\W", "(?i)σ", "(?i)[\\Ws]",
  "(?i)\u212a", "[^ß]", "[a-é]", "(?i)[à-å]", "(?i)[^à-å]", "[а-я]", "(?i)[а-я]", "[\\x{1F600}-\\x{1F64F}]", "[α-ω]",
  "[\\x{3a3}\\x{17F}]", "[^\\x{80}-\\x{10FFFF}]", "[\\x{FFFD}]", "\\x{e9}"];
// "\xff" stands for the invalid byte 0xFF.
const chars: string[] = ["a", "b", "k", "K", "-", " ", "x", "é", "\n", "_", "\u212a", "ſ", "s", "S", "Σ", "ς", "É",
  "ß", "À", "П", "р", "\u{1f601}", "\xff", "λ", "©"];

let seed: u32 = 11;
function rnd(n: i32): i32 {
  seed = seed * 1103515245 + 12345;
  return <i32>((seed >> 16) % <u32>n);
}

function unfiltered(re: Regex): Regex {
  const r = new Regex();
  r.prog = re.prog;
  r.classes = re.classes;
  r.nslots = re.nslots;
  r.hasSecret = re.hasSecret;
  r.slots = new Array<i32>(re.nslots);
  r.firstAny = true;
  r.nfirst = 0;
  return r;
}

// foldOK reports whether foldNext is unicode.SimpleFold for every rune: its
// FNV-1a sum is the one sdk/internal/foldgen computed from Go's table.
export function foldOK(): bool {
  let h: u32 = 2166136261;
  for (let r = 0; r <= 0x10ffff; r++) {
    const v = <u32>foldNext(r);
    for (let i: u32 = 0; i < 4; i++) h = (h ^ ((v >> (8 * i)) & 255)) * 16777619;
  }
  return h == FOLD_SUM;
}

// failure is the first disagreement found, for the driver to print.
export let failure: string = "";

export function failureText(): string { return failure; }

// run returns how many disagreements it found and how many patterns
// compiled (failures << 16 | compiled / 16).
export function run(rounds: i32): i32 {
  let bad = 0, compiled = 0;
  for (let round = 0; round < rounds; round++) {
    let pat = "";
    const na = 1 + rnd(4);
    for (let i = 0; i < na; i++) {
      pat += atoms[rnd(atoms.length)];
      if (rnd(5) == 0) pat += rnd(2) != 0 ? "*" : "+";
      if (rnd(9) == 0 && i + 1 < na) pat += "|";
    }
    const re = Regex.compile(utf8(pat));
    if (re === null) continue;
    compiled++;
    const ref = unfiltered(re);
    let text = "";
    const nc = rnd(24);
    const bytes: u8[] = [];
    for (let i = 0; i < nc; i++) {
      const c = chars[rnd(chars.length)];
      text += c;
      if (c == "\xff") { bytes.push(0xff); continue; }
      const u = utf8(c);
      for (let k = 0; k < u.length; k++) bytes.push(u[k]);
    }
    const t = new Uint8Array(bytes.length);
    for (let k = 0; k < bytes.length; k++) t[k] = bytes[k];
    for (let from = 0; from <= min(t.length, 3); from++) {
      const got = re.findAt(t, from), want = ref.findAt(t, from);
      const same = got === null ? want === null : want !== null && got.start == want.start && got.end == want.end;
      if (!same) {
        if (bad == 0) failure = "pattern " + pat + " on " + text + " from " + from.toString() + ": " + (got === null ? "no match" : got.start.toString() + "," + got.end.toString()) + ", unfiltered " + (want === null ? "no match" : want.start.toString() + "," + want.end.toString());
        bad++;
      }
    }
    if (ref.findAt(t, 0) !== null && !re.mayMatch(ByteSet.of(t))) {
      if (bad == 0) failure = "mayMatch(" + pat + ") ruled out a match in " + text;
      bad++;
    }
  }
  return (bad << 16) | (compiled >> 4);
}

// limitsOK reports whether a class holds at most CLASS_RANGES non-ASCII
// ranges and a pattern MAX_RANGES: 64 separate characters fit in a class,
// 65 do not; eight such classes fit in a pattern, nine do not; and whether
// a class of non-ASCII members matches.
export function limitsOK(): bool {
  const cls = (n: i32): string => {
    let s = "[";
    for (let i = 0; i < n; i++) s += "\\x{" + (0x100 + 2 * i).toString(16) + "}";
    return s + "]";
  };
  const c64 = cls(64);
  const re = Regex.compile(utf8(c64));
  if (re === null || re.findAt(utf8("\u0102"), 0) === null) return false;
  if (Regex.compile(utf8(cls(65))) !== null || !compileError.includes("too many")) return false;
  if (Regex.compile(utf8(c64.repeat(8))) === null) return false;
  if (Regex.compile(utf8(c64.repeat(9))) !== null || !compileError.includes("too many")) return false;
  const ok = Regex.compile(utf8("(?i)[а-я]+"));
  if (ok === null) return false;
  const m = ok.findAt(utf8("xПр"), 0);
  return m !== null && m.start == 1 && m.end == 5;
}
