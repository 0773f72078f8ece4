use super::json::{self, Value};
use super::regex::Regex;
use super::*;

fn doc(point: &str, context: &str, settings: &str) -> String {
    format!(r#"{{"abi":"1.1","point":"{}","context":{},"settings":{},"meta":{{"hook":"h","invocation":"i-1","tenant":"t"}}}}"#, point, context, settings)
}

fn none(_: &str, _: &[u8]) -> (u32, Vec<u8>) {
    (status::UNKNOWN_CAPABILITY, br#"{"code":"unknown_capability","message":"x"}"#.to_vec())
}

#[test]
fn json_strict() {
    for ok in ["0", "-0", "1.5e3", r#""\u00e9\ud83d\ude00""#, "[]", "{}", r#"{"a":[1,{"b":null}],"c":true}"#, " [ false ] "] {
        assert!(json::parse(ok.as_bytes()).is_ok(), "{}", ok);
    }
    for bad in ["", " ", "01", "1.", ".5", "-", "[1,]", r#"{"a"}"#, "{a:1}", r#""\x""#, r#""\ud800""#, "\"\x01\"", "[1] 2", "nul", "'a'"] {
        assert!(json::parse(bad.as_bytes()).is_err(), "{}", bad);
    }
    assert!(json::parse(b"\"\xc3\"").is_err());
    let v = json::parse(br#"{"k\u0065y":"v\n\u00e9"}"#).unwrap();
    assert_eq!(v.get("key").and_then(|v| v.as_str()), Some("v\n\u{e9}"));
    let mut s = String::new();
    json::write(&mut s, &Value::String("a\"b\n\u{1}".into()));
    assert_eq!(s, r#""a\"b\n\u0001""#);
}

fn echo(inv: &mut Invocation) -> Result<Decision, String> {
    let s = format!("{}|{}|{}|{}|{}|{}", inv.point, inv.primary_field(), inv.primary_text(), inv.meta.hook, inv.meta.invocation, inv.meta.tenant);
    Ok(Decision::continue_().with_reason(&s))
}

#[test]
fn invocation_and_decisions() {
    let out = mock::run(&doc("message.outbound", r#"{"incoming":"q","outgoing":"hello"}"#, "{}"), echo, none).unwrap();
    assert_eq!(out, r#"{"action":"continue","reason":"message.outbound|outgoing|hello|h|i-1|t"}"#);
    fn modify(_: &mut Invocation) -> Result<Decision, String> {
        Ok(Decision::modify_primary("x\n".into()).with_reason("r").do_not_reply_again())
    }
    let out = mock::run(&doc("tool.after", r#"{"tool":"t","result":"y"}"#, "{}"), modify, none).unwrap();
    assert_eq!(out, r#"{"action":"modify","context":{"result":"x\n"},"reason":"r","do_not_reply_again":true}"#);
    assert!(mock::run(&doc("context.assemble", r#"{"items":[]}"#, "{}"), modify, none).is_err());
    fn block(_: &mut Invocation) -> Result<Decision, String> {
        Ok(Decision::block("bad").with_user_message("no"))
    }
    assert_eq!(mock::run(&doc("message.inbound", r#"{"incoming":"x"}"#, "{}"), block, none).unwrap(), r#"{"action":"block","reason":"bad","user_message":"no"}"#);
    fn ask(_: &mut Invocation) -> Result<Decision, String> {
        Ok(Decision::ask("check"))
    }
    assert_eq!(mock::run(&doc("tool.before", r#"{"tool":"t","arguments":{}}"#, "{}"), ask, none).unwrap(), r#"{"action":"ask","reason":"check"}"#);
    fn fail(_: &mut Invocation) -> Result<Decision, String> {
        Err("because".into())
    }
    assert_eq!(mock::run(&doc("message.inbound", r#"{"incoming":"x"}"#, "{}"), fail, none), Err("because".into()));
    assert!(mock::run(r#"{"point":1}"#, echo, none).is_err());
}

fn settings(inv: &mut Invocation) -> Result<Decision, String> {
    let s = format!("{}|{}|{}|{}|{:?}", inv.setting_string("s", "def"), inv.setting_f64("f", -1.0), inv.setting_i64("i", -1), inv.setting_bool("b", false), inv.setting_strings("list"));
    inv.settings_err()?;
    Ok(Decision::continue_().with_reason(&s))
}

#[test]
fn settings_accessors() {
    let out = mock::run(&doc("message.inbound", r#"{"incoming":"x"}"#, r#"{"s":"str","f":1.5,"i":7,"b":true,"list":["a","b"]}"#), settings, none).unwrap();
    assert!(out.contains(r#"str|1.5|7|true|Some([\"a\", \"b\"])"#), "{}", out);
    let out = mock::run(&doc("message.inbound", r#"{"incoming":"x"}"#, r#"{"s":null}"#), settings, none).unwrap();
    assert!(out.contains("def|-1|-1|false|None"), "{}", out);
    for bad in [r#"{"s":1}"#, r#"{"f":"1"}"#, r#"{"i":1.5}"#, r#"{"b":0}"#, r#"{"list":"a"}"#, r#"{"list":[1]}"#] {
        let e = mock::run(&doc("message.inbound", r#"{"incoming":"x"}"#, bad), settings, none).unwrap_err();
        assert!(e.starts_with("setting \""), "{}: {}", bad, e);
    }
}

fn calls(_: &mut Invocation) -> Result<Decision, String> {
    let a = format!("{:?}", llm_run("hi", 10).map(|s| s.len()));
    let b = format!("{:?}", kv_get("k").map(|v| v.map(|v| { let mut s = String::new(); json::write(&mut s, &v); s })));
    let c = format!("{:?}", kv_set("k", Value::Number("1".into())).is_ok());
    let d = format!("{:?}", log("info", "x").map_err(|e| e.code()));
    Ok(Decision::continue_().with_reason(&format!("{} {} {} {}", a, b, c, d)))
}

#[test]
fn host_calls() {
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(65000));
    let out = mock::run(&doc("message.inbound", r#"{"incoming":"x"}"#, "{}"), calls, move |name, payload| match name {
        "llm.run" => {
            assert!(std::str::from_utf8(payload).unwrap().contains(r#""max_tokens":10"#));
            (0, big.clone().into_bytes())
        }
        "kv.get" => (0, br#"{"found":true,"value":{"a":1}}"#.to_vec()),
        "kv.set" => (0, b"{}".to_vec()),
        _ => (status::DENIED, br#"{"code":"denied","message":"not granted"}"#.to_vec()),
    })
    .unwrap();
    assert!(out.contains(r#"Ok(65000) Ok(Some(\"{\\\"a\\\":1}\")) true Err(\"denied\")"#), "{}", out);
    assert_eq!(mock::calls(), vec!["llm.run", "kv.get", "kv.set", "log.write"]);
}

#[test]
fn regex() {
    let cases: &[(&str, &str, Option<(usize, usize)>)] = &[
        ("a+", "baaa", Some((1, 4))), ("a+?", "baaa", Some((1, 2))), (r"\bfoo\b", "xfoo foo", Some((5, 8))),
        ("(?i)BEAR", "a bear", Some((2, 6))), ("x{2,3}", "xxxxx", Some((0, 3))), ("x{2}", "x", None),
        ("[^a-c]+", "abcdef", Some((3, 6))), ("a|ab", "ab", Some((0, 1))), ("(?:ab)*c", "ababc", Some((0, 5))),
        ("^a", "ba", None), ("a$", "ba", Some((1, 2))), (r"\d{3}", "ab1234", Some((2, 5))),
        (r"[\s\S]*?END", "x\nyEND", Some((0, 6))), (".", "\u{e9}", Some((0, 2))), ("(a*)*b", "aaab", Some((0, 4))),
        ("a{,2}", "a{,2}", Some((0, 5))),
        // Unicode simple case folding under (?i), as Go's (the corpus's
        // redact-secrets/regexp-fold-*.json hold the engines to Go's answers)
        ("(?i)k", "\u{212a}", Some((0, 3))), ("(?i)[a-z]+", "s\u{17f}K", Some((0, 4))), ("(?i)[^a-z]", "\u{212a}\u{17f}-", Some((5, 6))),
        ("(?i)é+", "Éé", Some((0, 4))), (r"(?i)\W", "\u{212a}!", Some((3, 4))), (r"(?i)[\Ws]+", "\u{212a}!\u{17f}", Some((3, 6))),
        ("(?i)σ+", "Σς", Some((0, 4))), ("(?i)ß", "ss", None), ("k", "\u{212a}", None),
        // a repetition of a character of several bytes repeats the character
        ("ü{2}", "üü", Some((0, 4))), ("xé+", "xéé", Some((0, 5))),
        // non-ASCII class members and ranges, negated a whole character at a time
        ("[é-ë]+", "eéë", Some((1, 5))), ("[^ß]", "ßx", Some((2, 3))), ("[^a]", "\u{1f600}", Some((0, 4))),
        ("[a-é]+", "~©ê", Some((0, 3))), (r"[\x{1F600}-\x{1F64F}]", "a\u{1f601}", Some((1, 5))), (r"\x{e9}", "é", Some((0, 2))),
        ("(?i)[а-я]+", "Пр", Some((0, 4))), ("(?i)[^à-å]", "ÀÆ", Some((2, 4))), (r"[\w\x{e9}]+", "éa", Some((0, 3))),
        (r"(?i)[\W\x{17F}]", "ſ", Some((0, 2))), (r"(?i)[K\W]", "\u{212a}", Some((0, 3))),
    ];
    for (re, text, want) in cases {
        let r = Regex::new(re).unwrap_or_else(|e| panic!("{}: {}", re, e));
        assert_eq!(r.find_at(text.as_bytes(), 0).map(|m| (m.start, m.end)), *want, "{} on {}", re, text);
    }
    for bad in ["(", ")", "a**", "*", "a{2,1}", "[b-a]", "[a", r"\p{L}", "x{1001}", "(?P<a b>x)", "\\", "[ê-é]", r"\x{110000}", r"\x{}", r"\x{41", r"\x4"] {
        assert!(Regex::new(bad).is_err(), "{}", bad);
    }
    // A class holds at most CLASS_RANGES non-ASCII ranges, a pattern
    // MAX_RANGES: 64 separate characters fit in a class, 65 do not; eight
    // such classes fit in a pattern, nine do not.
    let class = |n: u32| format!("[{}]", (0..n).map(|i| format!(r"\x{{{:x}}}", 0x100 + 2 * i)).collect::<String>());
    assert!(Regex::new(&class(64)).unwrap().find_at("\u{102}".as_bytes(), 0).is_some());
    assert!(Regex::new(&class(65)).err().map_or(false, |e| e.contains("too many")));
    assert!(Regex::new(&class(64).repeat(8)).is_ok());
    assert!(Regex::new(&class(64).repeat(9)).err().map_or(false, |e| e.contains("too many")));
    let r = Regex::new(r"(?i)bearer\s+(?P<secret>\w+)").unwrap();
    assert_eq!(r.find_at(b"Bearer abc", 0).unwrap().secret, Some((7, 10)));
}

/// fold_next is unicode.SimpleFold for every rune: its FNV-1a sum is the
/// one sdk/internal/foldgen computed from Go's table.
#[test]
fn fold_table() {
    let mut h: u32 = 2166136261;
    for r in 0..=0x10ffffu32 {
        for b in crate::regex::fold_next(r).to_le_bytes() {
            h = (h ^ b as u32).wrapping_mul(16777619);
        }
    }
    assert_eq!(h, crate::regex::FOLD_SUM, "fold table sum");
}

/// The eight-bytes-at-a-time scanners agree with a byte loop on every
/// length and alignment, over bytes drawn to hit each special class.
#[test]
fn swar_scanners() {
    let alphabet = [b'a', b'Z', b' ', b'"', b'\\', 0x1f, 0x00, 0x7f, 0x80, 0xc3, 0xff, b'e', b'b'];
    let mut seed: u32 = 1;
    let mut buf = [0u8; 40];
    for round in 0..20000usize {
        let n = round % 37;
        for b in buf.iter_mut().take(n) {
            seed = seed.wrapping_mul(1103515245).wrapping_add(12345);
            *b = if (seed >> 16) % 4 != 0 { b'a' + ((seed >> 20) % 26) as u8 } else { alphabet[(seed >> 20) as usize % alphabet.len()] };
        }
        let s = &buf[..n];
        let want = s.iter().position(|&c| c < 0x20 || c == b'"' || c == b'\\').unwrap_or(n);
        assert_eq!(crate::json::plain_run(s), want, "plain_run {:?}", s);
        let (a, b) = (alphabet[round % alphabet.len()], b'a' + (round % 26) as u8);
        let want = s.iter().position(|&c| c == a || c == b).unwrap_or(n);
        assert_eq!(crate::regex::find2(s, a, b), want, "find2 {:?} {} {}", s, a, b);
    }
}

/// may_match rules a pattern out only when the text lacks a byte every
/// match contains, or every byte a match can start with.
#[test]
fn may_match() {
    use crate::regex::ByteSet;
    let sk = Regex::new(r"\bsk-[A-Za-z0-9]{4,}").unwrap();
    assert!(!sk.may_match(&ByteSet::of(b"ask me")), "no '-'");
    assert!(sk.may_match(&ByteSet::of(b"key sk-abcd")));
    let bearer = Regex::new(r"(?i)\bbearer\s+\w+").unwrap();
    assert!(!bearer.may_match(&ByteSet::of(b"no such word here")), "no b or B");
    assert!(bearer.may_match(&ByteSet::of(b"Bearer abc")));
    let any = Regex::new(r"x*").unwrap();
    assert!(any.may_match(&ByteSet::of(b"")), "an empty match needs nothing");
}

/// The prefilters (required bytes, the first-byte set and its two-byte
/// search, may_match) never lose a match: random patterns over random texts
/// (case-insensitive letters, classes, alternations, assertions, non-ASCII
/// bytes, the Kelvin sign, the long s and Greek sigmas, non-ASCII class
/// members and ranges, invalid bytes) match exactly as the same program
/// with no filter, and may_match is true whenever it matches.
#[test]
fn prefilter_differential() {
    use crate::regex::ByteSet;
    let atoms = ["a", "b", "k", "K", "-", "[a-c]", "[^a]", r"\w", r"\s", r"\d", ".", "(?i)k", "(?i:ab)", "(a|b)", "(?:ab|c)", r"\b", "^", "$", "é", "[é-ê]", "x?", "(?i)é", r"\S", "(?s).", "[[:alpha:]]", "(?i)[k-m]", "(?m)^", "a*", "b+", "(?i)s", "ſ", r"[^\x00-\x7f]", "sk-", "(?i)bearer", "(?i)[^a-z]", r"(?i)\w", r"(?i)\W", "(?i)σ", r"(?i)[\Ws]", "(?i)\u{212a}",
        "[^ß]", "[a-é]", "(?i)[à-å]", "(?i)[^à-å]", "[а-я]", "(?i)[а-я]", r"[\x{1F600}-\x{1F64F}]", "[α-ω]", r"[\x{3a3}\x{17F}]", r"[^\x{80}-\x{10FFFF}]", r"[\x{FFFD}]", r"\x{e9}"];
    let chars: [&[u8]; 26] = [b"a", b"b", b"k", b"K", b"-", b" ", b"x", "é".as_bytes(), b"\n", b"_", "\u{212a}".as_bytes(), "ſ".as_bytes(), b"s", b"S", "Σ".as_bytes(), "ς".as_bytes(), "É".as_bytes(),
        "ß".as_bytes(), "À".as_bytes(), "П".as_bytes(), "р".as_bytes(), "\u{1f601}".as_bytes(), b"\xff", "λ".as_bytes(), "©".as_bytes(), b"\xc3"];
    let mut seed: u32 = 11;
    let mut rnd = |n: usize| {
        seed = seed.wrapping_mul(1103515245).wrapping_add(12345);
        (seed >> 16) as usize % n
    };
    let mut compiled = 0;
    for _ in 0..20000 {
        let mut pat = String::new();
        let na = 1 + rnd(4);
        for i in 0..na {
            pat.push_str(atoms[rnd(atoms.len())]);
            if rnd(5) == 0 {
                pat.push_str(if rnd(2) == 0 { "*" } else { "+" });
            }
            if rnd(9) == 0 && i + 1 < na {
                pat.push('|');
            }
        }
        let re = match Regex::new(&pat) {
            Ok(re) => re,
            Err(_) => continue,
        };
        compiled += 1;
        let reference = re.unfiltered();
        let mut t = Vec::new();
        for _ in 0..rnd(24) {
            t.extend_from_slice(chars[rnd(chars.len())]);
        }
        let t = &t[..];
        let text = String::from_utf8_lossy(t);
        for from in 0..t.len().min(3) + 1 {
            let (got, want) = (re.find_at(t, from), reference.find_at(t, from));
            assert_eq!(got.map(|m| (m.start, m.end)), want.map(|m| (m.start, m.end)), "pattern {pat:?} on {text:?} from {from}");
        }
        if reference.find_at(t, 0).is_some() {
            assert!(re.may_match(&ByteSet::of(t)), "may_match({pat:?}) ruled out a match in {text:?}");
        }
    }
    assert!(compiled > 7000, "only {compiled} patterns compiled");
}
