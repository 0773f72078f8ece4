//! A small regular-expression engine with the syntax and leftmost-first
//! semantics of Go's regexp (RE2) for the subset hooks use; the same engine
//! as the C SDK's wasmhooks_regex.h (see there for the supported syntax).
//! Matching backtracks in priority order over UTF-8 bytes, whole characters
//! for `.` and classes; a first-byte set and the literal bytes every match
//! must contain skip most start positions. Under `(?i)` a literal, a class's
//! members and `\w` `\W` fold by Unicode simple case folding, as Go's regexp
//! (`(?i)k` matches U+212A KELVIN SIGN), by fold.rs's table, which
//! sdk/internal/foldgen generates from Go's unicode package.

include!("fold.rs");

#[derive(Clone, Copy)]
enum Inst {
    Byte(u8),
    Class(usize),
    Any(bool), // true: also newline
    Assert(Assertion),
    Split(usize, usize),
    Jmp(usize),
    Save(usize),
    Check(usize),
    Match,
}

#[derive(Clone, Copy, PartialEq)]
enum Assertion {
    Bot,
    Eot,
    Bol,
    Eol,
    Word,
    NoWord,
}

/// A class holds at most 64 ranges of non-ASCII characters (as it is read,
/// folds included), a pattern 512 in all: past either it is refused.
pub const CLASS_RANGES: usize = 64;
/// The non-ASCII ranges of all a pattern's classes (see CLASS_RANGES).
pub const MAX_RANGES: usize = 512;

/// A class: the ASCII members in bits; a non-ASCII character r is a member
/// when nonascii differs from whether r lies in one of ranges (sorted,
/// disjoint, not adjacent).
#[derive(Clone, Default)]
struct Class {
    bits: [u32; 4],
    nonascii: bool,
    ranges: Vec<(u32, u32)>,
}

impl Class {
    fn set(&mut self, b: u8) {
        self.bits[(b >> 5) as usize] |= 1 << (b & 31);
    }
    fn test(&self, b: u8) -> bool {
        b < 128 && (self.bits[(b >> 5) as usize] >> (b & 31)) & 1 == 1
    }
    /// Whether the non-ASCII character r lies in one of the ranges.
    fn within(&self, r: u32) -> bool {
        let i = self.ranges.partition_point(|&(_, hi)| hi < r);
        i < self.ranges.len() && self.ranges[i].0 <= r
    }
    /// Whether the non-ASCII character r is a member.
    fn has(&self, r: u32) -> bool {
        self.nonascii != self.within(r)
    }
}

/// A class as it is read; once a \W \S \D was read, perlneg holds the
/// non-ASCII characters every one of them leaves out (the folds \W leaves
/// out under (?i)), and the class is every non-ASCII character but those
/// in none of the ranges.
#[derive(Default)]
struct ClassBuilder {
    c: Class,
    perlneg: Option<Vec<u32>>,
    over: bool,
}

impl ClassBuilder {
    /// Makes the characters lo..=hi members.
    fn add(&mut self, mut lo: u32, mut hi: u32) {
        while lo <= hi && lo < 0x80 {
            self.c.set(lo as u8);
            lo += 1;
        }
        if lo > hi {
            return;
        }
        let r = &mut self.c.ranges;
        // the ranges lo..=hi touches (or is adjacent to) merge into it
        let i = r.partition_point(|&(_, h)| h + 1 < lo);
        let mut j = i;
        while j < r.len() && r[j].0 <= hi + 1 {
            lo = lo.min(r[j].0);
            hi = hi.max(r[j].1);
            j += 1;
        }
        if i == j && r.len() == CLASS_RANGES {
            self.over = true;
            return;
        }
        r.splice(i..j, [(lo, hi)]);
    }
    /// Makes the characters lo..=hi members, and under fold their whole
    /// orbits of Unicode simple case folding, as Go's regexp does ((?i)k
    /// matches U+212A KELVIN SIGN): the runes with an orbit are those of
    /// the fold table's ranges.
    fn range(&mut self, lo: u32, hi: u32, fold: bool) {
        self.add(lo, hi);
        if !fold {
            return;
        }
        for &w in FOLD_RANGES.iter() {
            let (flo, fhi) = (w >> 7, (w >> 7) + (w & 127));
            for r in flo.max(lo)..=fhi.min(hi) {
                let mut f = fold_next(r);
                while f != r {
                    self.add(f, f);
                    f = fold_next(f);
                }
            }
        }
    }
    /// Adds \d \w \s (or their negations), folded as Go folds them under
    /// (?i) ((?i)\w holds U+212A, (?i)\W does not); false if e is not one.
    fn perl(&mut self, e: u8, fold: bool) -> bool {
        let mut t = ClassBuilder::default();
        match e.to_ascii_lowercase() {
            b'd' => t.range(b'0' as u32, b'9' as u32, fold),
            b'w' => {
                t.range(b'0' as u32, b'9' as u32, fold);
                t.range(b'a' as u32, b'z' as u32, fold);
                t.range(b'A' as u32, b'Z' as u32, fold);
                t.c.set(b'_');
            }
            b's' => {
                for c in [b'\t', b'\n', 0x0c, b'\r', b' '] {
                    t.c.set(c);
                }
            }
            _ => return false,
        }
        let neg = e.is_ascii_uppercase();
        for i in 0..4 {
            self.c.bits[i] |= if neg { !t.c.bits[i] } else { t.c.bits[i] };
        }
        // t's non-ASCII members: the folds of \w, U+017F and U+212A
        let runes = t.c.ranges.iter().map(|&(r, _)| r);
        if !neg {
            for r in runes {
                self.add(r, r);
            }
            return true;
        }
        // the characters left out: t's, and those of every earlier one
        let ex = runes.filter(|r| self.perlneg.as_ref().map_or(true, |ex| ex.contains(r))).collect();
        self.perlneg = Some(ex);
        true
    }
}

enum Node {
    Empty,
    Byte(u8),
    Class(usize),
    Any(bool),
    Assert(Assertion),
    Cat(Vec<Node>),
    Alt(Vec<Node>),
    Rep(Box<Node>, u32, Option<u32>, bool),
    Group(Box<Node>, bool),
}

const FI: u8 = 1;
const FS: u8 = 2;
const FM: u8 = 4;
const FU: u8 = 8;
const MAX_PROG: usize = 40000;

/// A compiled pattern.
pub struct Regex {
    prog: Vec<Inst>,
    classes: Vec<Class>,
    nslots: usize,
    /// Whether the pattern has a group named "secret".
    pub has_secret: bool,
    first: [bool; 256],
    first_any: bool,
    /// The first-byte set when it is one or two ASCII bytes (0: use first).
    firstb: [u8; 2],
    nfirstb: u8,
    required: Vec<u8>,
}

/// The bytes a text holds, found in one pass: `Regex::may_match` then rules
/// a pattern out without scanning the text for its required bytes again
/// (ten patterns over one text: one pass instead of one or two each).
pub struct ByteSet([bool; 256]);

impl ByteSet {
    /// The set of the bytes of s.
    pub fn of(s: &[u8]) -> ByteSet {
        let mut set = [false; 256];
        for &c in s {
            set[c as usize] = true;
        }
        ByteSet(set)
    }
    /// Whether b occurs.
    pub fn has(&self, b: u8) -> bool {
        self.0[b as usize]
    }
}

/// find2 returns the index of the first byte of s equal to a or b, or
/// s.len(): eight bytes at a time (SWAR), as wasm has no vector memchr and
/// a loop per byte costs several times the instructions.
pub fn find2(s: &[u8], a: u8, b: u8) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let (ma, mb) = (ONES * a as u64, ONES * b as u64);
    let mut i = 0;
    // chunks_exact: each chunk is one unaligned 8-byte load, no bounds check.
    for chunk in s.chunks_exact(8) {
        let v = u64::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7]]);
        let (x, y) = (v ^ ma, v ^ mb);
        if ((x.wrapping_sub(ONES) & !x) | (y.wrapping_sub(ONES) & !y)) & HIGHS != 0 {
            break;
        }
        i += 8;
    }
    match s[i..].iter().position(|&c| c == a || c == b) {
        Some(k) => i + k,
        None => s.len(),
    }
}

/// A match: the whole span, and the "secret" group's span if it took part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    pub start: usize,
    pub end: usize,
    pub secret: Option<(usize, usize)>,
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
    flags: u8,
    classes: Vec<Class>,
    has_secret: bool,
    nodes: usize,
    nranges: usize,
}

fn hexv(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

impl<'a> P<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn count(&mut self) -> Result<(), String> {
        self.nodes += 1;
        if self.nodes > 4000 {
            return Err("expression too large".into());
        }
        Ok(())
    }
    fn escape(&mut self) -> Result<Option<u32>, String> {
        let e = self.peek().ok_or("trailing backslash at end of expression")?;
        self.i += 1;
        Ok(Some(match e {
            b'n' => b'\n' as u32,
            b't' => b'\t' as u32,
            b'r' => b'\r' as u32,
            b'f' => 0x0c,
            b'v' => 0x0b,
            b'a' => 7,
            b'x' => {
                // \xHH or \x{H...}: the character U+H...
                let braces = self.peek() == Some(b'{');
                self.i += braces as usize;
                let (mut v, mut nd) = (0u32, 0);
                while let Some(d) = self.peek().and_then(hexv) {
                    if (!braces && nd == 2) || v > 0x10ffff {
                        break;
                    }
                    v = v * 16 + d as u32;
                    nd += 1;
                    self.i += 1;
                }
                let closed = !braces || self.peek() == Some(b'}');
                self.i += braces as usize;
                if nd == 0 || !closed || (!braces && nd < 2) || v > 0x10ffff {
                    return Err("invalid escape sequence".into());
                }
                v
            }
            c if c < 0x80 && !c.is_ascii_alphanumeric() => c as u32,
            _ => {
                self.i -= 1;
                return Ok(None);
            }
        }))
    }
    /// One member of a class at self.i: its character, or None after a \d
    /// \w \s (added to b).
    fn class_char(&mut self, b: Option<&mut ClassBuilder>) -> Result<Option<u32>, String> {
        let ch = self.s[self.i];
        if ch >= 0x80 {
            let (r, l) = decode(&self.s[self.i..]).ok_or("invalid UTF-8")?;
            self.i += l;
            return Ok(Some(r));
        }
        self.i += 1;
        if ch != b'\\' {
            return Ok(Some(ch as u32));
        }
        if let (Some(b), Some(e)) = (b, self.peek()) {
            if b.perl(e, self.flags & FI != 0) {
                self.i += 1;
                return Ok(None);
            }
        }
        Ok(Some(self.escape()?.ok_or("invalid escape sequence")?))
    }
    fn class(&mut self) -> Result<Node, String> {
        let mut c = ClassBuilder::default();
        let fold = self.flags & FI != 0;
        let neg = self.peek() == Some(b'^');
        if neg {
            self.i += 1;
        }
        let mut first = true;
        loop {
            let ch = self.peek().ok_or("missing closing ]")?;
            if ch == b']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            if ch == b'[' && self.s.get(self.i + 1) == Some(&b':') {
                return Err("[:class:] is not supported".into());
            }
            let lo = match self.class_char(Some(&mut c))? {
                Some(lo) => lo,
                None => continue,
            };
            let mut hi = lo;
            if self.peek() == Some(b'-') && self.s.get(self.i + 1).map_or(false, |&c| c != b']') {
                self.i += 1;
                hi = self.class_char(None)?.ok_or("invalid escape sequence")?;
                if hi < lo {
                    return Err("invalid character class range".into());
                }
            }
            c.range(lo, hi, fold);
        }
        self.done(c, neg)
    }
    /// Stores b (negated when neg) as the pattern's next class.
    fn done(&mut self, b: ClassBuilder, neg: bool) -> Result<Node, String> {
        if b.over {
            return Err("too many non-ASCII ranges in a character class".into());
        }
        let mut c = b.c;
        if let Some(ex) = b.perlneg {
            // every non-ASCII character but ex's in no range
            c.ranges = ex.into_iter().filter(|&r| !c.within(r)).map(|r| (r, r)).collect();
            c.nonascii = true;
        }
        if neg {
            for b in c.bits.iter_mut() {
                *b = !*b;
            }
            c.nonascii = !c.nonascii;
        }
        self.nranges += c.ranges.len();
        if self.nranges > MAX_RANGES {
            return Err("too many non-ASCII ranges in character classes".into());
        }
        self.classes.push(c);
        Ok(Node::Class(self.classes.len() - 1))
    }
    /// The literal byte b, or the character at self.i - 1 (b its first
    /// byte), or the character b of an escape (esc), as one class: under
    /// (?i) when it has a fold orbit, when it has several bytes and a
    /// repetition follows (so é+ repeats é, not its last byte), and when it
    /// is a non-ASCII escape (\x{e9}).
    fn literal(&mut self, b: u32, esc: bool) -> Result<Node, String> {
        let fold = self.flags & FI != 0;
        let (r, l) = if b >= 0x80 && !esc { decode(&self.s[self.i - 1..]).unwrap_or((b, 1)) } else { (b, 1) };
        let rep = l > 1 && matches!(self.s.get(self.i + l - 1), Some(b'*' | b'+' | b'?' | b'{'));
        if rep || (esc && b >= 0x80) || (fold && fold_next(r) != r) {
            self.i += l - 1;
            let mut c = ClassBuilder::default();
            c.range(r, r, fold);
            return self.done(c, false);
        }
        Ok(Node::Byte(b as u8))
    }
    fn atom(&mut self, depth: usize) -> Result<Node, String> {
        self.count()?;
        let ch = self.s[self.i];
        self.i += 1;
        match ch {
            b'(' => {
                let saved = self.flags;
                let mut cap = false;
                if self.peek() == Some(b'?') {
                    self.i += 1;
                    if matches!(self.peek(), Some(b'P') | Some(b'<')) {
                        if self.peek() == Some(b'P') {
                            self.i += 1;
                        }
                        if self.peek() != Some(b'<') {
                            return Err("invalid named capture".into());
                        }
                        self.i += 1;
                        let start = self.i;
                        // A name is word characters, as Go's.
                        while self.peek().map_or(false, is_word) {
                            self.i += 1;
                        }
                        if self.peek() != Some(b'>') || self.i == start {
                            return Err("invalid named capture".into());
                        }
                        if &self.s[start..self.i] == b"secret" {
                            // Go accepts a name twice and its SubexpIndex
                            // takes the leftmost: a later "secret" is a
                            // plain group.
                            if !self.has_secret {
                                self.has_secret = true;
                                cap = true;
                            }
                        }
                        self.i += 1;
                    } else {
                        let (mut neg, mut any) = (false, false);
                        loop {
                            let f = self.peek().ok_or("missing closing )")?;
                            self.i += 1;
                            let bit = match f {
                                b'i' => FI,
                                b's' => FS,
                                b'm' => FM,
                                b'U' => FU,
                                _ => 0,
                            };
                            if f == b'-' && !neg {
                                neg = true;
                                any = false;
                            } else if bit != 0 {
                                any = true;
                                if neg {
                                    self.flags &= !bit;
                                } else {
                                    self.flags |= bit;
                                }
                            } else if (f == b')' || f == b':') && (any || !neg) {
                                if f == b')' {
                                    return Ok(Node::Empty);
                                }
                                break;
                            } else {
                                return Err("invalid or unsupported Perl syntax".into());
                            }
                        }
                    }
                }
                let inner = self.alt(depth + 1)?;
                if self.peek() != Some(b')') {
                    return Err("missing closing )".into());
                }
                self.i += 1;
                self.flags = saved;
                Ok(Node::Group(Box::new(inner), cap))
            }
            b')' => Err("unexpected )".into()),
            b'[' => self.class(),
            b'.' => Ok(Node::Any(self.flags & FS != 0)),
            b'^' => Ok(Node::Assert(if self.flags & FM != 0 { Assertion::Bol } else { Assertion::Bot })),
            b'$' => Ok(Node::Assert(if self.flags & FM != 0 { Assertion::Eol } else { Assertion::Eot })),
            b'*' | b'+' | b'?' => Err("missing argument to repetition operator".into()),
            b'\\' => {
                if let Some(e) = self.peek() {
                    let a = match e {
                        b'b' => Some(Assertion::Word),
                        b'B' => Some(Assertion::NoWord),
                        b'A' => Some(Assertion::Bot),
                        b'z' => Some(Assertion::Eot),
                        _ => None,
                    };
                    if let Some(a) = a {
                        self.i += 1;
                        return Ok(Node::Assert(a));
                    }
                    let mut c = ClassBuilder::default();
                    if c.perl(e, self.flags & FI != 0) {
                        self.i += 1;
                        return self.done(c, false);
                    }
                }
                let b = self.escape()?.ok_or("invalid or unsupported escape sequence")?;
                self.literal(b, true)
            }
            c => self.literal(c as u32, false),
        }
    }
    fn repeat_count(&mut self) -> Result<Option<(u32, Option<u32>)>, String> {
        let mut j = self.i;
        let num = |j: &mut usize, s: &[u8]| -> Option<u32> {
            let st = *j;
            let mut v: u32 = 0;
            while *j < s.len() && s[*j].is_ascii_digit() {
                v = v.saturating_mul(10).saturating_add((s[*j] - b'0') as u32).min(1_000_000);
                *j += 1;
            }
            if *j > st {
                Some(v)
            } else {
                None
            }
        };
        let a = match num(&mut j, self.s) {
            Some(a) => a,
            None => return Ok(None),
        };
        let mut b = Some(a);
        if self.s.get(j) == Some(&b',') {
            j += 1;
            b = num(&mut j, self.s);
        }
        if self.s.get(j) != Some(&b'}') {
            return Ok(None);
        }
        self.i = j + 1;
        if a > 1000 || b.map_or(false, |b| b > 1000 || b < a) {
            return Err("invalid repeat count".into());
        }
        Ok(Some((a, b)))
    }
    fn repeat(&mut self, depth: usize) -> Result<Node, String> {
        let mut atom = self.atom(depth)?;
        let mut reps = 0;
        while let Some(q) = self.peek() {
            let (min, max) = match q {
                b'*' => (0, None),
                b'+' => (1, None),
                b'?' => (0, Some(1)),
                b'{' => {
                    self.i += 1;
                    match self.repeat_count()? {
                        Some(r) => r,
                        None => {
                            self.i -= 1;
                            break;
                        }
                    }
                }
                _ => break,
            };
            if q != b'{' {
                self.i += 1;
            }
            reps += 1;
            if reps > 1 {
                return Err("invalid nested repetition operator".into());
            }
            if matches!(atom, Node::Empty) {
                return Err("missing argument to repetition operator".into());
            }
            let mut greedy = self.flags & FU == 0;
            if self.peek() == Some(b'?') {
                greedy = !greedy;
                self.i += 1;
            }
            atom = Node::Rep(Box::new(atom), min, max, greedy);
        }
        Ok(atom)
    }
    fn cat(&mut self, depth: usize) -> Result<Node, String> {
        let mut v = Vec::new();
        while let Some(c) = self.peek() {
            if c == b'|' || c == b')' {
                break;
            }
            v.push(self.repeat(depth)?);
        }
        Ok(Node::Cat(v))
    }
    fn alt(&mut self, depth: usize) -> Result<Node, String> {
        if depth > 100 {
            return Err("expression nests too deeply".into());
        }
        let first = self.cat(depth)?;
        if self.peek() != Some(b'|') {
            return Ok(first);
        }
        let mut v = vec![first];
        while self.peek() == Some(b'|') {
            self.i += 1;
            v.push(self.cat(depth)?);
        }
        Ok(Node::Alt(v))
    }
}

fn nullable(n: &Node) -> bool {
    match n {
        Node::Empty | Node::Assert(_) => true,
        Node::Byte(_) | Node::Class(_) | Node::Any(_) => false,
        Node::Group(c, _) => nullable(c),
        Node::Rep(c, min, _, _) => *min == 0 || nullable(c),
        Node::Cat(v) => v.iter().all(nullable),
        Node::Alt(v) => v.iter().any(nullable),
    }
}

struct Gen {
    prog: Vec<Inst>,
    nslots: usize,
}

impl Gen {
    fn emit(&mut self, i: Inst) -> Result<usize, String> {
        if self.prog.len() >= MAX_PROG {
            return Err("expression too large".into());
        }
        self.prog.push(i);
        Ok(self.prog.len() - 1)
    }
    fn split(&mut self, at: usize, greedy: bool, body: usize, out: usize) {
        self.prog[at] = if greedy { Inst::Split(body, out) } else { Inst::Split(out, body) };
    }
    fn gen(&mut self, n: &Node) -> Result<(), String> {
        match n {
            Node::Empty => {}
            Node::Byte(b) => {
                self.emit(Inst::Byte(*b))?;
            }
            Node::Class(k) => {
                self.emit(Inst::Class(*k))?;
            }
            Node::Any(nl) => {
                self.emit(Inst::Any(*nl))?;
            }
            Node::Assert(a) => {
                self.emit(Inst::Assert(*a))?;
            }
            Node::Group(c, cap) => {
                if *cap {
                    self.emit(Inst::Save(2))?;
                }
                self.gen(c)?;
                if *cap {
                    self.emit(Inst::Save(3))?;
                }
            }
            Node::Cat(v) => {
                for c in v {
                    self.gen(c)?;
                }
            }
            Node::Alt(v) => {
                let mut jumps = Vec::new();
                for (i, c) in v.iter().enumerate() {
                    let last = i + 1 == v.len();
                    let split = if last { None } else { Some(self.emit(Inst::Match)?) };
                    self.gen(c)?;
                    if let Some(s) = split {
                        jumps.push(self.emit(Inst::Jmp(0))?);
                        let out = self.prog.len();
                        self.split(s, true, s + 1, out);
                    }
                }
                let end = self.prog.len();
                for j in jumps {
                    self.prog[j] = Inst::Jmp(end);
                }
            }
            Node::Rep(c, min, max, greedy) => {
                for _ in 0..*min {
                    self.gen(c)?;
                }
                match max {
                    None => {
                        let null = nullable(c);
                        let lp = self.emit(Inst::Match)?;
                        let slot = self.nslots;
                        if null {
                            self.nslots += 1;
                            self.emit(Inst::Save(slot))?;
                        }
                        self.gen(c)?;
                        if null {
                            self.emit(Inst::Check(slot))?;
                        }
                        self.emit(Inst::Jmp(lp))?;
                        let out = self.prog.len();
                        self.split(lp, *greedy, lp + 1, out);
                    }
                    Some(max) => {
                        let mut splits = Vec::new();
                        for _ in *min..*max {
                            splits.push(self.emit(Inst::Match)?);
                            self.gen(c)?;
                        }
                        let out = self.prog.len();
                        for s in splits {
                            self.split(s, *greedy, s + 1, out);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The first byte of the non-ASCII character r's UTF-8: a range's
/// characters start with the bytes from its first's to its last's.
fn lead(r: u32) -> usize {
    (if r < 0x800 { 0xc0 | r >> 6 } else if r < 0x10000 { 0xe0 | r >> 12 } else { 0xf0 | r >> 18 }) as usize
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The UTF-8 character at s[0] and its length, if valid.
fn decode(s: &[u8]) -> Option<(u32, usize)> {
    let l = rune_len(s);
    if l == 1 && s[0] >= 0x80 {
        return None;
    }
    std::str::from_utf8(&s[..l]).ok()?.chars().next().map(|c| (c as u32, l))
}

/// The length of the UTF-8 character at s[0] (1 for an invalid byte).
pub fn rune_len(s: &[u8]) -> usize {
    let c = s[0];
    let l = if c < 0x80 {
        1
    } else if c >= 0xF0 {
        4
    } else if c >= 0xE0 {
        3
    } else if c >= 0xC2 {
        2
    } else {
        return 1;
    };
    if s.len() < l || std::str::from_utf8(&s[..l]).is_err() {
        1
    } else {
        l
    }
}

impl Regex {
    /// Compiles pattern; Err with Go-like messages on a syntax error.
    pub fn new(pattern: &str) -> Result<Regex, String> {
        let mut p = P { s: pattern.as_bytes(), i: 0, flags: 0, classes: Vec::new(), has_secret: false, nodes: 0, nranges: 0 };
        let root = p.alt(0)?;
        if p.i < p.s.len() {
            return Err("unexpected )".into());
        }
        let mut required = Vec::new();
        if let Node::Cat(v) = &root {
            for n in v {
                if let Node::Byte(b) = n {
                    required.push(*b);
                }
            }
        }
        let mut g = Gen { prog: Vec::new(), nslots: 4 };
        g.emit(Inst::Save(0))?;
        g.gen(&root)?;
        g.emit(Inst::Save(1))?;
        g.emit(Inst::Match)?;
        let mut re = Regex { prog: g.prog, classes: p.classes, nslots: g.nslots, has_secret: p.has_secret, first: [false; 256], first_any: false, firstb: [0; 2], nfirstb: 0, required };
        re.first_bytes();
        Ok(re)
    }

    fn first_bytes(&mut self) {
        let mut seen = vec![false; self.prog.len()];
        let mut stack = vec![0usize];
        while let Some(pc) = stack.pop() {
            if seen[pc] {
                continue;
            }
            seen[pc] = true;
            match self.prog[pc] {
                Inst::Byte(b) => self.first[b as usize] = true,
                Inst::Class(k) => {
                    let c = &self.classes[k];
                    for b in 0..128u8 {
                        if c.test(b) {
                            self.first[b as usize] = true;
                        }
                    }
                    // the first bytes of the ranges' characters (any, negated;
                    // all of 0x80-0xFF with U+FFFD, which an invalid byte reads as)
                    for &(lo, hi) in c.ranges.iter() {
                        let (from, to) = if lo <= 0xfffd && hi >= 0xfffd { (0x80, 0xff) } else { (lead(lo), lead(hi)) };
                        self.first[from..=to].fill(true);
                    }
                    if c.nonascii {
                        self.first[0x80..].fill(true);
                    }
                }
                Inst::Any(nl) => {
                    for b in 0..256 {
                        if nl || b != b'\n' as usize {
                            self.first[b] = true;
                        }
                    }
                }
                Inst::Match => {
                    self.first_any = true;
                    return;
                }
                Inst::Split(x, y) => {
                    stack.push(y);
                    stack.push(x);
                }
                Inst::Jmp(x) => stack.push(x),
                _ => stack.push(pc + 1),
            }
        }
        let mut nb = 0;
        for b in 0..256 {
            if self.first[b] {
                if b >= 0x80 || nb == 2 {
                    return;
                }
                self.firstb[nb] = b as u8;
                nb += 1;
            }
        }
        if nb == 1 {
            self.firstb[1] = self.firstb[0];
        }
        self.nfirstb = nb as u8;
    }

    fn run(&self, s: &[u8], start: usize, slots: &mut [isize], stack: &mut Vec<(usize, usize, isize)>) -> bool {
        // A frame is (pc, pos, -1) to try, or (slot, old value, 1) to restore.
        for x in slots.iter_mut() {
            *x = -1;
        }
        stack.clear();
        stack.push((0, start, -1));
        while let Some((a, b, kind)) = stack.pop() {
            if kind >= 0 {
                slots[a] = b as isize - 1;
                continue;
            }
            let (mut pc, mut pos) = (a, b);
            loop {
                match self.prog[pc] {
                    Inst::Byte(c) => {
                        if pos < s.len() && s[pos] == c {
                            pos += 1;
                            pc += 1;
                            continue;
                        }
                        break;
                    }
                    Inst::Class(k) => {
                        if pos >= s.len() {
                            break;
                        }
                        let c = s[pos];
                        if c < 0x80 {
                            if !self.classes[k].test(c) {
                                break;
                            }
                            pos += 1;
                        } else {
                            let k = &self.classes[k];
                            if k.ranges.is_empty() {
                                if !k.nonascii {
                                    break;
                                }
                                pos += rune_len(&s[pos..]);
                            } else {
                                // an invalid byte is one U+FFFD, as in Go
                                let (r, l) = decode(&s[pos..]).unwrap_or((0xfffd, 1));
                                if !k.has(r) {
                                    break;
                                }
                                pos += l;
                            }
                        }
                        pc += 1;
                    }
                    Inst::Any(nl) => {
                        if pos >= s.len() || (!nl && s[pos] == b'\n') {
                            break;
                        }
                        pos += rune_len(&s[pos..]);
                        pc += 1;
                    }
                    Inst::Assert(a) => {
                        let ok = match a {
                            Assertion::Bot => pos == 0,
                            Assertion::Eot => pos == s.len(),
                            Assertion::Bol => pos == 0 || s[pos - 1] == b'\n',
                            Assertion::Eol => pos == s.len() || s[pos] == b'\n',
                            _ => {
                                let x = pos > 0 && is_word(s[pos - 1]);
                                let y = pos < s.len() && is_word(s[pos]);
                                (x != y) == (a == Assertion::Word)
                            }
                        };
                        if !ok {
                            break;
                        }
                        pc += 1;
                    }
                    Inst::Split(x, y) => {
                        stack.push((y, pos, -1));
                        pc = x;
                    }
                    Inst::Jmp(x) => pc = x,
                    Inst::Save(k) => {
                        stack.push((k, (slots[k] + 1) as usize, 1));
                        slots[k] = pos as isize;
                        pc += 1;
                    }
                    Inst::Check(k) => {
                        if slots[k] == pos as isize {
                            break;
                        }
                        pc += 1;
                    }
                    Inst::Match => return true,
                }
            }
        }
        false
    }

    /// The same program with no prefilter (required bytes, first-byte set):
    /// the reference the prefilters are tested against.
    #[cfg(test)]
    pub(crate) fn unfiltered(&self) -> Regex {
        Regex { prog: self.prog.clone(), classes: self.classes.clone(), nslots: self.nslots, has_secret: self.has_secret, first: [true; 256], first_any: true, firstb: [0; 2], nfirstb: 0, required: Vec::new() }
    }

    /// Whether a match can exist in a text holding the bytes of set: false
    /// when a byte every match contains is absent, or every byte a match
    /// can start with (for a first-byte set of one or two ASCII bytes).
    pub fn may_match(&self, set: &ByteSet) -> bool {
        if !self.required.iter().all(|&b| set.has(b)) {
            return false;
        }
        self.nfirstb == 0 || set.has(self.firstb[0]) || set.has(self.firstb[1])
    }

    /// The leftmost-first match in s[from..], as Go's regexp finds it.
    pub fn find_at(&self, s: &[u8], from: usize) -> Option<Match> {
        for &b in &self.required {
            if find2(&s[from..], b, b) == s.len() - from {
                return None;
            }
        }
        // Allocated at the first candidate position: most calls find none.
        let mut slots: Vec<isize> = Vec::new();
        let mut stack = Vec::new();
        let mut p = from;
        while p <= s.len() {
            if self.nfirstb != 0 {
                // Only the (ASCII) first bytes can start a match.
                p += find2(&s[p..], self.firstb[0], self.firstb[1]);
                if p >= s.len() {
                    break;
                }
            } else if !self.first_any {
                while p < s.len() && s[p] < 0x80 && !self.first[s[p] as usize] {
                    p += 1;
                }
            }
            if self.first_any || (p < s.len() && self.first[s[p] as usize]) {
                if slots.is_empty() {
                    slots = vec![-1isize; self.nslots];
                }
                if self.run(s, p, &mut slots, &mut stack) {
                    let secret = if slots[2] >= 0 { Some((slots[2] as usize, slots[3] as usize)) } else { None };
                    return Some(Match { start: slots[0] as usize, end: slots[1] as usize, secret });
                }
            }
            if p == s.len() {
                break;
            }
            p += rune_len(&s[p..]);
        }
        None
    }

    /// Every match in s, in order, as Go's FindAll: after an empty match the
    /// search moves on by one character.
    pub fn find_all(&self, s: &[u8]) -> Vec<Match> {
        let mut out = Vec::new();
        let mut from = 0;
        while from <= s.len() {
            let m = match self.find_at(s, from) {
                Some(m) => m,
                None => break,
            };
            out.push(m);
            if m.end > m.start {
                from = m.end;
            } else if m.end >= s.len() {
                break;
            } else {
                from = m.end + rune_len(&s[m.end..]);
            }
        }
        out
    }
}
