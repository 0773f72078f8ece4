// A small regular-expression engine with Go's (RE2) syntax and
// leftmost-first semantics for the subset hooks use: the same engine as the
// C SDK's wasmhooks_regex.h and the Rust SDK's regex module (see there for
// the supported syntax). It matches UTF-8 bytes (Value.bytes), whole
// characters for . and classes, by backtracking in priority order, with a
// first-byte set and required bytes to skip start positions. Under (?i) a
// literal, a class's members and \w \W fold by Unicode simple case folding,
// as Go's regexp ((?i)k matches U+212A KELVIN SIGN), by fold.ts's table,
// which sdk/internal/foldgen generates from Go's unicode package.
import { foldNext, FOLD_RANGES } from "./fold";

const I_BYTE = 0;
const I_CLASS = 1;
const I_ANY = 2;
const I_ANYNL = 3;
const I_ASSERT = 4;
const I_SPLIT = 5;
const I_JMP = 6;
const I_SAVE = 7;
const I_CHECK = 8;
const I_MATCH = 9;

const A_BOT = 0;
const A_EOT = 1;
const A_BOL = 2;
const A_EOL = 3;
const A_WORD = 4;
const A_NOWORD = 5;

const N_EMPTY = 0;
const N_BYTE = 1;
const N_CLASS = 2;
const N_ANY = 3;
const N_ASSERT = 4;
const N_CAT = 5;
const N_ALT = 6;
const N_REP = 7;
const N_GROUP = 8;

const FI: i32 = 1;
const FS: i32 = 2;
const FM: i32 = 4;
const FU: i32 = 8;
const MAX_PROG = 40000;

// A class holds at most CLASS_RANGES ranges of non-ASCII characters (as it
// is read, folds included), a pattern MAX_RANGES in all: past either it is
// refused.
export const CLASS_RANGES = 64;
export const MAX_RANGES = 512;

// A class: the ASCII members in bits; a non-ASCII character r is a member
// when nonascii differs from whether r lies in one of the ranges
// r[2i]..r[2i+1] (sorted, disjoint, not adjacent).
class Class {
  bits: StaticArray<bool> = new StaticArray<bool>(128);
  nonascii: bool = false;
  r: i32[] = [];
  // within reports whether the non-ASCII character r lies in a range.
  within(r: i32): bool {
    let i = 0, j = this.r.length >> 1;
    while (i < j) {
      const h = (i + j) >> 1;
      if (unchecked(this.r[2 * h + 1]) < r) i = h + 1; else j = h;
    }
    return i < this.r.length >> 1 && unchecked(this.r[2 * i]) <= r;
  }
  // has reports whether the non-ASCII character r is a member.
  has(r: i32): bool { return this.nonascii != this.within(r); }
}

// A class as it is read; once a \W \S \D was read (perlneg), ex holds the
// non-ASCII characters every one of them leaves out (the folds \W leaves
// out under (?i)), and the class is every non-ASCII character but those of
// ex in none of the ranges.
class ClassBuilder {
  c: Class = new Class();
  perlneg: bool = false;
  ex: i32[] = [];
  over: bool = false;
  // add makes the characters lo..hi members.
  add(lo: i32, hi: i32): void {
    for (; lo <= hi && lo < 0x80; lo++) this.c.bits[lo] = true;
    if (lo > hi) return;
    const r = this.c.r, n = r.length >> 1;
    let i = 0;
    while (i < n && r[2 * i + 1] + 1 < lo) i++; // the first range not wholly before lo-1
    let j = i;
    while (j < n && r[2 * j] <= hi + 1) { // the ranges lo..hi touches merge into it
      if (r[2 * j] < lo) lo = r[2 * j];
      if (r[2 * j + 1] > hi) hi = r[2 * j + 1];
      j++;
    }
    if (i == j && n == CLASS_RANGES) { this.over = true; return; }
    r.splice(2 * i, 2 * (j - i)); // ranges i..j-1 become lo..hi
    r.push(0);
    r.push(0);
    for (let k = r.length - 1; k >= 2 * i + 2; k--) r[k] = r[k - 2];
    r[2 * i] = lo;
    r[2 * i + 1] = hi;
  }
  // range makes the characters lo..hi members, and under fold their whole
  // orbits of Unicode simple case folding, as Go's regexp does ((?i)k
  // matches U+212A KELVIN SIGN): the runes with an orbit are those of the
  // fold table's ranges.
  range(lo: i32, hi: i32, fold: bool): void {
    this.add(lo, hi);
    if (!fold) return;
    for (let i = 0; i < FOLD_RANGES.length; i++) {
      const w = FOLD_RANGES[i];
      const flo = <i32>(w >> 7), fhi = flo + <i32>(w & 127);
      for (let r = flo < lo ? lo : flo; r <= fhi && r <= hi; r++)
        for (let f = foldNext(r); f != r; f = foldNext(f)) this.add(f, f);
    }
  }
  // perl adds \d \w \s (or their negations), folded as Go folds them under
  // (?i) ((?i)\w holds U+212A, (?i)\W does not); false if e is not one.
  perl(e: i32, fold: bool): bool {
    const t = new ClassBuilder();
    const l = e | 0x20;
    if (l == 0x64) t.range(0x30, 0x39, fold);
    else if (l == 0x77) { t.range(0x30, 0x39, fold); t.range(0x61, 0x7a, fold); t.range(0x41, 0x5a, fold); t.c.bits[0x5f] = true; }
    else if (l == 0x73) { t.c.bits[9] = true; t.c.bits[10] = true; t.c.bits[12] = true; t.c.bits[13] = true; t.c.bits[32] = true; }
    else return false;
    const neg = e >= 0x41 && e <= 0x5a;
    for (let i = 0; i < 128; i++) if (neg ? !t.c.bits[i] : t.c.bits[i]) this.c.bits[i] = true;
    // t's non-ASCII members: the folds of \w, U+017F and U+212A
    const tr = t.c.r;
    if (!neg) {
      for (let i = 0; i < tr.length; i += 2) this.add(tr[i], tr[i + 1]);
      return true;
    }
    // the characters left out: t's, and those of every earlier one
    const ex: i32[] = [];
    for (let i = 0; i < tr.length; i += 2) if (!this.perlneg || this.ex.includes(tr[i])) ex.push(tr[i]);
    this.ex = ex;
    this.perlneg = true;
    return true;
  }
}

class Node {
  kind: i32 = N_EMPTY;
  arg: i32 = 0;
  kids: Node[] = [];
  min: i32 = 0;
  max: i32 = -1;
  greedy: bool = true;
  cap: bool = false;
}

function node(kind: i32, arg: i32): Node {
  const n = new Node();
  n.kind = kind;
  n.arg = arg;
  return n;
}

class Inst {
  op: i32;
  x: i32;
  y: i32;
  constructor(op: i32, x: i32, y: i32) { this.op = op; this.x = x; this.y = y; }
}

export class Match {
  start: i32 = -1;
  end: i32 = -1;
  secretStart: i32 = -1;
  secretEnd: i32 = -1;
}

// compileError says why the last compile returned null.
export let compileError: string = "";

// lead returns the first byte of the non-ASCII character r's UTF-8: a
// range's characters start with the bytes from its first's to its last's.
function lead(r: i32): i32 { return r < 0x800 ? 0xc0 | (r >> 6) : r < 0x10000 ? 0xe0 | (r >> 12) : 0xf0 | (r >> 18); }
function isAlnum(c: i32): bool { return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a); }
function isWord(c: i32): bool { return isAlnum(c) || c == 0x5f; }
function hexv(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

// decodeRune returns the UTF-8 character of length l (runeLen's) at s[i],
// or -1 if it is invalid.
function decodeRune(s: Uint8Array, i: i32, l: i32): i32 {
  const c = <i32>s[i];
  if (l == 1) return c < 0x80 ? c : -1;
  let v = c & (l == 2 ? 0x1f : l == 3 ? 0x0f : 0x07);
  for (let k = 1; k < l; k++) v = (v << 6) | (<i32>s[i + k] & 0x3f);
  const min = l == 2 ? 0x80 : l == 3 ? 0x800 : 0x10000;
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return -1;
  return v;
}

// runeLen is the length of the UTF-8 character at s[i] (1 if invalid).
export function runeLen(s: Uint8Array, i: i32): i32 {
  const c = <i32>s[i];
  let l = 1;
  if (c < 0x80) return 1;
  if (c >= 0xf0 && c <= 0xf4) l = 4;
  else if (c >= 0xe0) l = 3;
  else if (c >= 0xc2) l = 2;
  else return 1;
  if (i + l > s.length) return 1;
  for (let k = 1; k < l; k++) if ((<i32>s[i + k] & 0xc0) != 0x80) return 1;
  return l;
}

class P {
  s: Uint8Array;
  i: i32 = 0;
  flags: i32 = 0;
  classes: Class[] = [];
  hasSecret: bool = false;
  nodes: i32 = 0;
  nranges: i32 = 0;
  err: string | null = null;
  constructor(s: Uint8Array) { this.s = s; }
  peek(): i32 { return this.i < this.s.length ? <i32>this.s[this.i] : -1; }
  fail(m: string): Node | null { if (this.err === null) this.err = m; return null; }
  // escape returns a literal byte, -2 if not a literal escape, -1 on error.
  escape(): i32 {
    const e = this.peek();
    if (e < 0) { this.fail("trailing backslash at end of expression"); return -1; }
    this.i++;
    if (e == 0x6e) return 10;
    if (e == 0x74) return 9;
    if (e == 0x72) return 13;
    if (e == 0x66) return 12;
    if (e == 0x76) return 11;
    if (e == 0x61) return 7;
    if (e == 0x78) { // \xHH or \x{H...}: the character U+H...
      const braces = this.peek() == 0x7b;
      if (braces) this.i++;
      let v = 0, nd = 0;
      while (this.i < this.s.length && hexv(this.s[this.i]) >= 0 && (braces || nd < 2) && v <= 0x10ffff) {
        v = v * 16 + hexv(this.s[this.i++]);
        nd++;
      }
      if (braces && this.peek() != 0x7d) nd = 0;
      else if (braces) this.i++;
      if (nd == 0 || (!braces && nd < 2) || v > 0x10ffff) { this.fail("invalid escape sequence"); return -1; }
      return v;
    }
    if (e < 0x80 && !isAlnum(e)) return e;
    this.i--;
    return -2;
  }
  // classChar reads one member of a class at this.i: its character, -1 on
  // error, or -2 after a \d \w \s (added to b).
  classChar(b: ClassBuilder | null): i32 {
    const ch = <i32>this.s[this.i];
    if (ch >= 0x80) {
      const l = runeLen(this.s, this.i), r = decodeRune(this.s, this.i, l);
      if (r < 0) { this.fail("invalid UTF-8"); return -1; }
      this.i += l;
      return r;
    }
    this.i++;
    if (ch != 0x5c) return ch;
    const e = this.peek();
    if (b !== null && e >= 0 && b.perl(e, (this.flags & FI) != 0)) { this.i++; return -2; }
    const lo = this.escape();
    if (lo == -2) this.fail("invalid escape sequence");
    return lo < 0 ? -1 : lo;
  }
  klass(): Node | null {
    const c = new ClassBuilder();
    const fold = (this.flags & FI) != 0;
    const neg = this.peek() == 0x5e;
    if (neg) this.i++;
    let first = true;
    while (true) {
      const ch = this.peek();
      if (ch < 0) return this.fail("missing closing ]");
      if (ch == 0x5d && !first) { this.i++; break; }
      first = false;
      if (ch == 0x5b && this.i + 1 < this.s.length && this.s[this.i + 1] == 0x3a) return this.fail("[:class:] is not supported");
      const lo = this.classChar(c);
      if (lo == -2) continue;
      if (lo < 0) return null;
      let hi = lo;
      if (this.peek() == 0x2d && this.i + 1 < this.s.length && this.s[this.i + 1] != 0x5d) {
        this.i++;
        hi = this.classChar(null);
        if (hi < 0) return null;
        if (hi < lo) return this.fail("invalid character class range");
      }
      c.range(lo, hi, fold);
    }
    return this.done(c, neg);
  }
  // done stores b (negated when neg) as the pattern's next class.
  done(b: ClassBuilder, neg: bool): Node | null {
    if (b.over) return this.fail("too many non-ASCII ranges in a character class");
    const c = b.c;
    if (b.perlneg) { // every non-ASCII character but ex's in no range
      const r: i32[] = [];
      for (let k = 0; k < b.ex.length; k++) if (!c.within(b.ex[k])) { r.push(b.ex[k]); r.push(b.ex[k]); }
      c.r = r;
      c.nonascii = true;
    }
    if (neg) {
      for (let k = 0; k < 128; k++) c.bits[k] = !c.bits[k];
      c.nonascii = !c.nonascii;
    }
    this.nranges += c.r.length >> 1;
    if (this.nranges > MAX_RANGES) return this.fail("too many non-ASCII ranges in character classes");
    this.classes.push(c);
    return node(N_CLASS, this.classes.length - 1);
  }
  // literal parses the literal byte b, or the character at this.i - 1 (b
  // its first byte), or the character b of an escape (esc), as one class:
  // under (?i) when it has a fold orbit, when it has several bytes and a
  // repetition follows (so é+ repeats é, not its last byte), and when it is
  // a non-ASCII escape (\x{e9}).
  literal(b: i32, esc: bool): Node | null {
    const fold = (this.flags & FI) != 0;
    let r = b, l = 1;
    if (b >= 0x80 && !esc) {
      l = runeLen(this.s, this.i - 1);
      r = decodeRune(this.s, this.i - 1, l);
      if (r < 0) { r = b; l = 1; }
    }
    const q = l > 1 && this.i + l - 1 < this.s.length ? <i32>this.s[this.i + l - 1] : 0;
    const rep = q == 0x2a || q == 0x2b || q == 0x3f || q == 0x7b;
    if (rep || (esc && b >= 0x80) || (fold && foldNext(r) != r)) {
      this.i += l - 1;
      const c = new ClassBuilder();
      c.range(r, r, fold);
      return this.done(c, false);
    }
    return node(N_BYTE, b);
  }
  atom(depth: i32): Node | null {
    if (++this.nodes > 4000) return this.fail("expression too large");
    const ch = <i32>this.s[this.i++];
    if (ch == 0x28) { // (
      const saved = this.flags;
      let cap = false;
      if (this.peek() == 0x3f) {
        this.i++;
        if (this.peek() == 0x50 || this.peek() == 0x3c) {
          if (this.peek() == 0x50) this.i++;
          if (this.peek() != 0x3c) return this.fail("invalid named capture");
          this.i++;
          const start = this.i;
          while (isWord(this.peek())) this.i++; // a name is word characters, as Go's
          if (this.peek() != 0x3e || this.i == start) return this.fail("invalid named capture");
          if (this.i - start == 6 && String.UTF8.decodeUnsafe(this.s.dataStart + <usize>start, 6) == "secret") {
            // Go accepts a name twice and its SubexpIndex takes the leftmost:
            // a later "secret" is a plain group.
            if (!this.hasSecret) {
              this.hasSecret = true;
              cap = true;
            }
          }
          this.i++;
        } else {
          let neg = false;
          let any = false;
          while (true) {
            const f = this.peek();
            if (f < 0) return this.fail("missing closing )");
            this.i++;
            const bit = f == 0x69 ? FI : f == 0x73 ? FS : f == 0x6d ? FM : f == 0x55 ? FU : 0;
            if (f == 0x2d && !neg) { neg = true; any = false; }
            else if (bit != 0) { any = true; if (neg) this.flags &= ~bit; else this.flags |= bit; }
            else if ((f == 0x29 || f == 0x3a) && (any || !neg)) {
              if (f == 0x29) return node(N_EMPTY, 0);
              break;
            } else return this.fail("invalid or unsupported Perl syntax");
          }
        }
      }
      const inner = this.alt(depth + 1);
      if (inner === null) return null;
      if (this.peek() != 0x29) return this.fail("missing closing )");
      this.i++;
      this.flags = saved;
      const g = node(N_GROUP, 0);
      g.kids.push(inner);
      g.cap = cap;
      return g;
    }
    if (ch == 0x29) return this.fail("unexpected )");
    if (ch == 0x5b) return this.klass();
    if (ch == 0x2e) return node(N_ANY, (this.flags & FS) != 0 ? 1 : 0);
    if (ch == 0x5e) return node(N_ASSERT, (this.flags & FM) != 0 ? A_BOL : A_BOT);
    if (ch == 0x24) return node(N_ASSERT, (this.flags & FM) != 0 ? A_EOL : A_EOT);
    if (ch == 0x2a || ch == 0x2b || ch == 0x3f) return this.fail("missing argument to repetition operator");
    if (ch == 0x5c) {
      const e = this.peek();
      const a = e == 0x62 ? A_WORD : e == 0x42 ? A_NOWORD : e == 0x41 ? A_BOT : e == 0x7a ? A_EOT : -1;
      if (a >= 0) { this.i++; return node(N_ASSERT, a); }
      const c = new ClassBuilder();
      if (e >= 0 && c.perl(e, (this.flags & FI) != 0)) {
        this.i++;
        return this.done(c, false);
      }
      const b = this.escape();
      if (b == -2) return this.fail("invalid or unsupported escape sequence");
      if (b < 0) return null;
      return this.literal(b, true);
    }
    return this.literal(ch, false);
  }
  num(): i32 {
    const st = this.i;
    let v = 0;
    while (this.i < this.s.length && this.s[this.i] >= 0x30 && this.s[this.i] <= 0x39) {
      if (v < 1000000) v = v * 10 + (<i32>this.s[this.i] - 0x30);
      this.i++;
    }
    return this.i > st ? v : -1;
  }
  repeat(depth: i32): Node | null {
    let a = this.atom(depth);
    if (a === null) return null;
    let reps = 0;
    while (true) {
      const q = this.peek();
      let min = 0;
      let max = -1;
      if (q == 0x2a) { this.i++; }
      else if (q == 0x2b) { this.i++; min = 1; }
      else if (q == 0x3f) { this.i++; max = 1; }
      else if (q == 0x7b) {
        const save = this.i;
        this.i++;
        const x = this.num();
        let y = x;
        if (x >= 0 && this.peek() == 0x2c) { this.i++; y = this.num(); }
        if (x < 0 || this.peek() != 0x7d) { this.i = save; break; }
        this.i++;
        if (x > 1000 || y > 1000 || (y >= 0 && y < x)) return this.fail("invalid repeat count");
        min = x;
        max = y;
      } else break;
      if (++reps > 1) return this.fail("invalid nested repetition operator");
      if (a.kind == N_EMPTY) return this.fail("missing argument to repetition operator");
      let greedy = (this.flags & FU) == 0;
      if (this.peek() == 0x3f) { greedy = !greedy; this.i++; }
      const r = node(N_REP, 0);
      r.kids.push(a);
      r.min = min;
      r.max = max;
      r.greedy = greedy;
      a = r;
    }
    return a;
  }
  cat(depth: i32): Node | null {
    const n = node(N_CAT, 0);
    while (this.peek() >= 0 && this.peek() != 0x7c && this.peek() != 0x29) {
      const c = this.repeat(depth);
      if (c === null) return null;
      n.kids.push(c);
    }
    return n;
  }
  alt(depth: i32): Node | null {
    if (depth > 100) return this.fail("expression nests too deeply");
    const first = this.cat(depth);
    if (first === null || this.peek() != 0x7c) return first;
    const n = node(N_ALT, 0);
    n.kids.push(first);
    while (this.peek() == 0x7c) {
      this.i++;
      const c = this.cat(depth);
      if (c === null) return null;
      n.kids.push(c);
    }
    return n;
  }
}

function nullable(n: Node): bool {
  switch (n.kind) {
    case N_EMPTY: case N_ASSERT: return true;
    case N_BYTE: case N_CLASS: case N_ANY: return false;
    case N_GROUP: return nullable(n.kids[0]);
    case N_REP: return n.min == 0 || nullable(n.kids[0]);
    case N_CAT: { for (let i = 0; i < n.kids.length; i++) if (!nullable(n.kids[i])) return false; return true; }
    default: { for (let i = 0; i < n.kids.length; i++) if (nullable(n.kids[i])) return true; return false; }
  }
}

class Gen {
  prog: Inst[] = [];
  nslots: i32 = 4;
  err: bool = false;
  emit(op: i32, x: i32, y: i32): i32 {
    if (this.prog.length >= MAX_PROG) { this.err = true; return 0; }
    this.prog.push(new Inst(op, x, y));
    return this.prog.length - 1;
  }
  split(at: i32, greedy: bool, body: i32, out: i32): void {
    const i = this.prog[at];
    i.op = I_SPLIT;
    if (greedy) { i.x = body; i.y = out; } else { i.x = out; i.y = body; }
  }
  gen(n: Node): void {
    if (this.err) return;
    switch (n.kind) {
      case N_EMPTY: break;
      case N_BYTE: this.emit(I_BYTE, n.arg, 0); break;
      case N_CLASS: this.emit(I_CLASS, n.arg, 0); break;
      case N_ANY: this.emit(n.arg != 0 ? I_ANYNL : I_ANY, 0, 0); break;
      case N_ASSERT: this.emit(I_ASSERT, n.arg, 0); break;
      case N_GROUP: {
        if (n.cap) this.emit(I_SAVE, 2, 0);
        this.gen(n.kids[0]);
        if (n.cap) this.emit(I_SAVE, 3, 0);
        break;
      }
      case N_CAT: { for (let i = 0; i < n.kids.length; i++) this.gen(n.kids[i]); break; }
      case N_ALT: {
        const jumps: i32[] = [];
        for (let i = 0; i < n.kids.length; i++) {
          const last = i + 1 == n.kids.length;
          const s = last ? -1 : this.emit(I_MATCH, 0, 0);
          this.gen(n.kids[i]);
          if (!last) {
            jumps.push(this.emit(I_JMP, 0, 0));
            this.split(s, true, s + 1, this.prog.length);
          }
        }
        for (let i = 0; i < jumps.length; i++) if (!this.err) this.prog[jumps[i]].x = this.prog.length;
        break;
      }
      case N_REP: {
        const c = n.kids[0];
        for (let i = 0; i < n.min; i++) this.gen(c);
        if (n.max < 0) {
          const nul = nullable(c);
          const lp = this.emit(I_MATCH, 0, 0);
          const slot = this.nslots;
          if (nul) { this.nslots++; this.emit(I_SAVE, slot, 0); }
          this.gen(c);
          if (nul) this.emit(I_CHECK, slot, 0);
          this.emit(I_JMP, lp, 0);
          if (!this.err) this.split(lp, n.greedy, lp + 1, this.prog.length);
        } else {
          const splits: i32[] = [];
          for (let i = n.min; i < n.max; i++) { splits.push(this.emit(I_MATCH, 0, 0)); this.gen(c); }
          if (!this.err) for (let i = 0; i < splits.length; i++) this.split(splits[i], n.greedy, splits[i] + 1, this.prog.length);
        }
        break;
      }
    }
  }
}

export class Regex {
  prog: Inst[] = [];
  classes: Class[] = [];
  nslots: i32 = 4;
  hasSecret: bool = false;
  first: StaticArray<bool> = new StaticArray<bool>(256);
  firstAny: bool = false;
  // The first-byte set when it is one or two ASCII bytes (nfirst 0: use first).
  first0: u8 = 0;
  first1: u8 = 0;
  nfirst: i32 = 0;
  required: u8[] = [];
  // the backtracking stack: triples (a, b, kind)
  stack: i32[] = [];
  slots: i32[] = [];

  // compile compiles pattern (UTF-8); null with compileError set on error.
  static compile(pattern: Uint8Array): Regex | null {
    const p = new P(pattern);
    const root = p.alt(0);
    if (root !== null && p.i < pattern.length) p.fail("unexpected )");
    if (root === null || p.err !== null) { const e = p.err; compileError = e === null ? "invalid expression" : e; return null; }
    const re = new Regex();
    if (root.kind == N_CAT) for (let i = 0; i < root.kids.length; i++) if (root.kids[i].kind == N_BYTE) re.required.push(<u8>root.kids[i].arg);
    const g = new Gen();
    g.emit(I_SAVE, 0, 0);
    g.gen(root);
    g.emit(I_SAVE, 1, 0);
    g.emit(I_MATCH, 0, 0);
    if (g.err) { compileError = "expression too large"; return null; }
    re.prog = g.prog;
    re.classes = p.classes;
    re.nslots = g.nslots;
    re.hasSecret = p.hasSecret;
    re.slots = new Array<i32>(g.nslots);
    re.firstBytes();
    return re;
  }

  firstBytes(): void {
    const seen = new StaticArray<bool>(this.prog.length);
    const stack: i32[] = [0];
    while (stack.length > 0) {
      const pc = stack.pop();
      if (seen[pc]) continue;
      seen[pc] = true;
      const i = this.prog[pc];
      if (i.op == I_BYTE) this.first[i.x] = true;
      else if (i.op == I_CLASS) {
        const c = this.classes[i.x];
        for (let b = 0; b < 128; b++) if (c.bits[b]) this.first[b] = true;
        for (let k = 0; k < c.r.length; k += 2) { // the first bytes of the ranges' characters
          const lo = c.r[k], hi = c.r[k + 1], ffd = lo <= 0xfffd && hi >= 0xfffd; // an invalid byte reads as U+FFFD
          for (let b = ffd ? 0x80 : lead(lo); b <= (ffd ? 0xff : lead(hi)); b++) this.first[b] = true;
        }
        if (c.nonascii) for (let b = 128; b < 256; b++) this.first[b] = true;
      } else if (i.op == I_ANY || i.op == I_ANYNL) {
        for (let b = 0; b < 256; b++) if (b != 10 || i.op == I_ANYNL) this.first[b] = true;
      } else if (i.op == I_MATCH) { this.firstAny = true; return; }
      else if (i.op == I_SPLIT) { stack.push(i.y); stack.push(i.x); }
      else if (i.op == I_JMP) stack.push(i.x);
      else stack.push(pc + 1);
    }
    let nb = 0;
    for (let b = 0; b < 256; b++) {
      if (!this.first[b]) continue;
      if (b >= 0x80 || nb == 2) return;
      if (nb == 0) this.first0 = <u8>b; else this.first1 = <u8>b;
      nb++;
    }
    if (nb == 1) this.first1 = this.first0;
    this.nfirst = nb;
  }

  run(s: Uint8Array, start: i32): bool {
    const slots = this.slots;
    for (let k = 0; k < this.nslots; k++) unchecked(slots[k] = -1);
    const st = this.stack;
    st.length = 0;
    st.push(0); st.push(start); st.push(-1);
    const n = s.length;
    while (st.length > 0) {
      const kind = st.pop();
      const b = st.pop();
      const a = st.pop();
      if (kind >= 0) { unchecked(slots[a] = b); continue; }
      let pc = a;
      let pos = b;
      while (true) {
        const ins = unchecked(this.prog[pc]);
        const op = ins.op;
        if (op == I_BYTE) {
          if (pos < n && <i32>unchecked(s[pos]) == ins.x) { pos++; pc++; continue; }
          break;
        } else if (op == I_CLASS) {
          if (pos >= n) break;
          const c = <i32>unchecked(s[pos]);
          const k = unchecked(this.classes[ins.x]);
          if (c < 0x80) { if (!unchecked(k.bits[c])) break; pos++; }
          else if (k.r.length == 0) { if (!k.nonascii) break; pos += runeLen(s, pos); }
          else {
            let l = runeLen(s, pos);
            let r = decodeRune(s, pos, l);
            if (r < 0) { r = 0xfffd; l = 1; } // an invalid byte is one U+FFFD, as in Go
            if (!k.has(r)) break;
            pos += l;
          }
          pc++;
        } else if (op == I_ANY || op == I_ANYNL) {
          if (pos >= n || (op == I_ANY && s[pos] == 10)) break;
          pos += runeLen(s, pos);
          pc++;
        } else if (op == I_ASSERT) {
          let ok = false;
          const w = ins.x;
          if (w == A_BOT) ok = pos == 0;
          else if (w == A_EOT) ok = pos == n;
          else if (w == A_BOL) ok = pos == 0 || s[pos - 1] == 10;
          else if (w == A_EOL) ok = pos == n || s[pos] == 10;
          else {
            const x = pos > 0 && isWord(s[pos - 1]);
            const y = pos < n && isWord(s[pos]);
            ok = (x != y) == (w == A_WORD);
          }
          if (!ok) break;
          pc++;
        } else if (op == I_SPLIT) {
          st.push(ins.y); st.push(pos); st.push(-1);
          pc = ins.x;
        } else if (op == I_JMP) {
          pc = ins.x;
        } else if (op == I_SAVE) {
          st.push(ins.x); st.push(unchecked(slots[ins.x])); st.push(1);
          unchecked(slots[ins.x] = pos);
          pc++;
        } else if (op == I_CHECK) {
          if (unchecked(slots[ins.x]) == pos) break;
          pc++;
        } else {
          return true;
        }
      }
    }
    return false;
  }

  // mayMatch reports whether a match can exist in a text holding the bytes
  // of set: false when a byte every match contains is absent, or every byte
  // a match can start with (for a first-byte set of one or two ASCII bytes).
  mayMatch(set: ByteSet): bool {
    for (let i = 0; i < this.required.length; i++) if (!set.has(unchecked(this.required[i]))) return false;
    return this.nfirst == 0 || set.has(this.first0) || set.has(this.first1);
  }

  // findAt returns the leftmost-first match in s[from:], or null.
  findAt(s: Uint8Array, from: i32): Match | null {
    const n = s.length;
    for (let i = 0; i < this.required.length; i++) {
      const r = unchecked(this.required[i]);
      if (find2(s, from, n, r, r) == n) return null;
    }
    const first = this.first;
    let p = from;
    while (p <= n) {
      if (this.nfirst != 0) {
        // Only the (ASCII) first bytes can start a match.
        p = find2(s, p, n, this.first0, this.first1);
        if (p >= n) break;
      } else if (!this.firstAny) {
        while (p < n) {
          const c = unchecked(s[p]);
          if (c >= 0x80 || unchecked(first[c])) break;
          p++;
        }
      }
      if (this.firstAny || (p < s.length && unchecked(this.first[s[p]]))) {
        if (this.run(s, p)) {
          const m = new Match();
          m.start = this.slots[0];
          m.end = this.slots[1];
          m.secretStart = this.slots[2];
          m.secretEnd = this.slots[3];
          return m;
        }
      }
      if (p == s.length) break;
      p += runeLen(s, p);
    }
    return null;
  }
}

// find2 returns the index of the first byte of s[from:n] equal to a or b,
// or n: eight bytes at a time (SWAR), as wasm has no vector memchr and a
// loop per byte costs several times the instructions.
export function find2(s: Uint8Array, from: i32, n: i32, a: u8, b: u8): i32 {
  const ONES: u64 = 0x0101010101010101;
  const HIGHS: u64 = 0x8080808080808080;
  const ma = ONES * <u64>a, mb = ONES * <u64>b;
  const base = s.dataStart;
  let i = from;
  while (i + 8 <= n) {
    const v = load<u64>(base + <usize>i);
    const x = v ^ ma, y = v ^ mb;
    if ((((x - ONES) & ~x) | ((y - ONES) & ~y)) & HIGHS) break;
    i += 8;
  }
  while (i < n) {
    const c = load<u8>(base + <usize>i);
    if (c == a || c == b) break;
    i++;
  }
  return i;
}

// ByteSet: the bytes a text holds, found in one pass; Regex.mayMatch then
// rules a pattern out without scanning the text for its required bytes
// again (ten patterns over one text: one pass instead of one or two each).
export class ByteSet {
  bits: StaticArray<bool> = new StaticArray<bool>(256);
  static of(s: Uint8Array): ByteSet {
    const set = new ByteSet();
    const bits = set.bits;
    const base = s.dataStart;
    for (let i = 0; i < s.length; i++) unchecked(bits[load<u8>(base + <usize>i)] = true);
    return set;
  }
  has(b: u8): bool { return unchecked(this.bits[b]); }
}
