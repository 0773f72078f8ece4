//! block-prompt-injection in Rust: the same hook as ../main.go (same
//! manifest, settings, signals, weights and reasons; the shared corpus in
//! testdata/corpus checks it), written with the Rust SDK (sdk/rust).
//!
//! Unicode: Go's unicode.IsLetter/IsDigit become char::is_alphabetic and
//! is_numeric, strings.ToLower becomes char::to_lowercase, and
//! unicode.IsPrint an approximation (not a control, format or private-use
//! character); they agree on the text the corpus holds and differ only at the
//! edges of the Unicode tables.
use wasmhooks::json::Value;
use wasmhooks::{hook, Decision, Invocation};

const DEFAULT_USER_MESSAGE: &str = "This message was blocked because it looks like an attempt to manipulate the assistant.";
const MAX_GAP: usize = 3;

const DEFAULT_PHRASES: [(&str, f64); 21] = [
    ("ignore previous instructions", 1.0), ("ignore prior instructions", 1.0), ("ignore the above", 0.5),
    ("disregard all prior", 1.0), ("disregard previous instructions", 1.0), ("disregard the above", 0.5),
    ("forget your instructions", 1.0), ("forget everything above", 1.0), ("override your instructions", 1.0),
    ("new instructions", 0.5), ("you are now", 0.5), ("pretend you are", 0.5), ("from now on you", 0.5),
    ("system prompt", 0.5), ("reveal your instructions", 1.0), ("reveal your prompt", 1.0),
    ("print your instructions", 1.0), ("repeat the text above", 0.5), ("developer mode", 0.7),
    ("do anything now", 1.0), ("jailbreak", 0.7),
];
const TEMPLATE_TOKENS: [&str; 13] = [
    "<|im_start|>", "<|im_end|>", "<|system|>", "<|assistant|>", "<|user|>", "<|endoftext|>",
    "<|begin_of_text|>", "<|start_header_id|>", "<|eot_id|>", "[inst]", "[/inst]", "<<sys>>", "<</sys>>",
];
const ROLE_LABELS: [&str; 9] = ["system:", "assistant:", "user:", "developer:", "### system", "### instruction", "### assistant", "<system>", "</system>"];

fn handle(inv: &mut Invocation) -> Result<Decision, String> {
    let threshold = inv.setting_f64("threshold", 1.0);
    let user_message = inv.setting_string("user_message", DEFAULT_USER_MESSAGE);
    inv.settings_err()?;
    if !(threshold > 0.0) {
        return Err(format!("setting \"threshold\": must be greater than 0, got {}", threshold));
    }
    let mut phrases: Vec<(String, f64)> = DEFAULT_PHRASES.iter().map(|(t, w)| (t.to_string(), *w)).collect();
    if let Some(v) = inv.setting("phrases") {
        phrases = parse_phrases("phrases", v)?;
    }
    if let Some(v) = inv.setting("extra_phrases") {
        phrases.extend(parse_phrases("extra_phrases", v)?);
    }
    let mut text = String::new();
    if let Some(v) = inv.primary_value() {
        collect(&mut text, v);
    }
    let r = score(&text, &phrases);
    if r.total == 0.0 {
        return Ok(Decision::continue_());
    }
    let summary = r.signals.iter().map(|(w, x)| format!("{} (+{})", w, x)).collect::<Vec<_>>().join(", ");
    if r.total < threshold {
        return Ok(Decision::continue_().with_reason(&format!(
            "prompt-injection score {} is below the threshold {}: {}", r.total, threshold, summary)));
    }
    Ok(Decision::block(&format!("prompt injection suspected (score {}, threshold {}): {}", r.total, threshold, summary))
        .with_user_message(&user_message))
}

fn parse_phrases(key: &str, v: &Value) -> Result<Vec<(String, f64)>, String> {
    let arr = match v {
        Value::Array(a) => a,
        _ => return Err(format!("setting {:?}: want an array of phrases", key)),
    };
    let mut out = Vec::new();
    for (i, e) in arr.iter().enumerate() {
        let (text, weight) = match e {
            Value::String(s) => (s.clone(), 1.0),
            Value::Object(_) => {
                let t = e.get("phrase").and_then(|p| p.as_str()).unwrap_or("").to_string();
                let w = match e.get("weight") {
                    None => 1.0,
                    Some(w) => match w.as_f64() {
                        Some(f) if f > 0.0 => f,
                        _ => return Err(format!("setting {:?}: item {}: \"weight\" must be a number greater than 0", key, i)),
                    },
                };
                (t, w)
            }
            _ => return Err(format!("setting {:?}: item {}: want a string or {{\"phrase\", \"weight\"}}", key, i)),
        };
        if words(&text).is_empty() {
            return Err(format!("setting {:?}: item {}: the phrase has no words", key, i));
        }
        out.push((text, weight));
    }
    Ok(out)
}

fn collect(b: &mut String, v: &Value) {
    match v {
        Value::String(s) => {
            b.push_str(s);
            b.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|e| collect(b, e)),
        Value::Object(m) => m.iter().for_each(|(_, e)| collect(b, e)),
        _ => {}
    }
}

struct Score {
    total: f64,
    signals: Vec<(String, f64)>,
}

impl Score {
    fn add(&mut self, what: String, w: f64) {
        self.signals.push((what, w));
        self.total += w;
    }
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn score(text: &str, phrases: &[(String, f64)]) -> Score {
    let mut r = Score { total: 0.0, signals: Vec::new() };
    let lower = text.to_lowercase();
    let n: usize = TEMPLATE_TOKENS.iter().map(|t| lower.matches(t).count()).sum();
    if n > 0 {
        r.add(format!("{} chat-template {}", n, plural(n, "token", "tokens")), 1.0);
    }
    let n = lower.split('\n').filter(|l| {
        let l = l.trim();
        ROLE_LABELS.iter().any(|p| l.starts_with(p))
    }).count();
    if n >= 2 {
        r.add(format!("{} role markers", n), 0.5);
    }
    let (visible, invisible, hidden) = split_invisible(text);
    if invisible > 0 {
        r.add(format!("{} invisible {}", invisible, plural(invisible, "character", "characters")), 0.5);
    }
    let mut scan = visible.clone();
    if hidden.chars().count() > 6 {
        r.add("text hidden in Unicode tag characters".into(), 1.0);
        scan.push('\n');
        scan.push_str(&hidden);
    }
    let blobs = base64_blobs(&visible);
    if !blobs.is_empty() {
        r.add(format!("{} base64-encoded {}", blobs.len(), plural(blobs.len(), "text", "texts")), 0.5);
        for b in &blobs {
            scan.push('\n');
            scan.push_str(b);
        }
    }
    let tokens = words(&scan);
    for (p, w) in phrases {
        if contains_phrase(&tokens, &words(p)) {
            r.add(quote(p), *w);
        }
    }
    r
}

/// Go's strconv.Quote for printable text.
fn quote(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\u{7}' => o.push_str("\\a"),
            '\u{8}' => o.push_str("\\b"),
            '\u{c}' => o.push_str("\\f"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '\u{b}' => o.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => o.push_str(&format!("\\x{:02x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn is_invisible(r: u32) -> bool {
    (0x200B..=0x200F).contains(&r) || (0x202A..=0x202E).contains(&r) || (0x2060..=0x2064).contains(&r)
        || (0x2066..=0x2069).contains(&r) || r == 0xFEFF || r == 0xAD
}

fn split_invisible(s: &str) -> (String, usize, String) {
    let (mut v, mut n, mut h) = (String::with_capacity(s.len()), 0, String::new());
    for c in s.chars() {
        let r = c as u32;
        if (0xE0000..=0xE007F).contains(&r) {
            if (0xE0020..=0xE007E).contains(&r) {
                h.push(char::from_u32(r - 0xE0000).unwrap_or('?'));
            }
        } else if r != 0x200D && is_invisible(r) {
            n += 1;
        } else {
            v.push(c);
        }
    }
    (v, n, h)
}

fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'+' || c == b'/' || c == b'-' || c == b'_'
}

fn base64_blobs(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !is_b64(b[i]) {
            i += 1;
            continue;
        }
        let mut j = i;
        let (mut up, mut lo, mut dg) = (false, false, false);
        while j < b.len() && is_b64(b[j]) {
            up |= b[j].is_ascii_uppercase();
            lo |= b[j].is_ascii_lowercase();
            dg |= b[j].is_ascii_digit();
            j += 1;
        }
        if j - i >= 40 && up && lo && dg {
            if let Some(t) = decode_text(&b[i..j]) {
                if !t.is_empty() {
                    out.push(t);
                }
            }
        }
        while j < b.len() && b[j] == b'=' {
            j += 1;
        }
        i = j;
    }
    out
}

fn b64val(c: u8, url: bool) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => (c - b'A') as u32,
        b'a'..=b'z' => (c - b'a') as u32 + 26,
        b'0'..=b'9' => (c - b'0') as u32 + 52,
        b'+' if !url => 62,
        b'/' if !url => 63,
        b'-' if url => 62,
        b'_' if url => 63,
        _ => return None,
    })
}

fn printable(c: char) -> bool {
    if c.is_whitespace() {
        return true;
    }
    let r = c as u32;
    !(c.is_control() || is_invisible(r) || (0xE0000..=0xE007F).contains(&r) || (0xE000..=0xF8FF).contains(&r) || r == 0xFFFD)
}

fn decode_text(s: &[u8]) -> Option<String> {
    if s.len() % 4 == 1 {
        return None;
    }
    'enc: for url in [false, true] {
        let mut out = Vec::with_capacity(s.len() * 3 / 4);
        let (mut acc, mut bits) = (0u32, 0);
        for &c in s {
            let v = match b64val(c, url) {
                Some(v) => v,
                None => continue 'enc,
            };
            acc = (acc << 6) | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        let t = match String::from_utf8(out) {
            Ok(t) => t,
            Err(_) => continue,
        };
        let total = t.chars().count();
        let ok = t.chars().filter(|&c| printable(c)).count();
        if ok * 10 >= total * 9 {
            return Some(t);
        }
    }
    None
}

fn words(s: &str) -> Vec<String> {
    let (v, _, _) = split_invisible(s);
    v.to_lowercase().split(|c: char| !(c.is_alphabetic() || c.is_numeric())).filter(|w| !w.is_empty()).map(String::from).collect()
}

fn contains_phrase(text: &[String], phrase: &[String]) -> bool {
    if phrase.is_empty() {
        return false;
    }
    (0..text.len()).any(|i| text[i] == phrase[0] && match_from(text, i + 1, &phrase[1..]))
}

fn match_from(text: &[String], pos: usize, rest: &[String]) -> bool {
    if rest.is_empty() {
        return true;
    }
    let mut j = pos;
    while j < text.len() && j <= pos + MAX_GAP {
        if text[j] == rest[0] && match_from(text, j + 1, &rest[1..]) {
            return true;
        }
        j += 1;
    }
    false
}

hook!(handle);
