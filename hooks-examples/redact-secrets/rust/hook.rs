//! redact-secrets in Rust: the same hook as ../main.go (same manifest,
//! settings and decisions; the shared corpus in testdata/corpus checks it),
//! written with the Rust SDK (sdk/rust) and its RE2-subset regexp.
use std::cell::RefCell;
use wasmhooks::json::Value;
use wasmhooks::regex::{ByteSet, Regex};
use wasmhooks::{hook, Decision, Invocation};

const DEFAULT_PATTERNS: [&str; 11] = [
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
    r"(?:AKIA|ASIA)[0-9A-Z]{16,}",
    r"\bsk-[A-Za-z0-9_-]{20,}",
    r"sk-(?:[A-Za-z0-9]{32,}[A-Za-z0-9_-]*|(?:proj|svcacct|admin|ant-[a-z]+[0-9]+)-[A-Za-z0-9_-]{40,}|or-v[0-9]+-[0-9a-f]{64}[A-Za-z0-9_-]*)",
    r"gh[pousr]_[A-Za-z0-9]{36}[A-Za-z0-9_]*",
    r"github_pat_[A-Za-z0-9_]{22,}",
    r"xox[abposr]-[A-Za-z0-9-]{10,}",
    r"AIza[0-9A-Za-z_-]{35,}",
    r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*",
    r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)",
    r"[A-Za-z0-9_.%+-]+@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,14}\.[A-Za-z]{2,63}",
];

thread_local! {
    // The last compiled pattern list: an instance serves one hook with one
    // set of settings, so this almost always hits.
    static CACHE: RefCell<(Vec<String>, Vec<Regex>)> = RefCell::new((Vec::new(), Vec::new()));
}

fn handle(inv: &mut Invocation) -> Result<Decision, String> {
    let patterns = inv.setting_strings("patterns");
    let extra = inv.setting_strings("extra_patterns");
    let replacement = inv.setting_string("replacement", "[REDACTED]");
    inv.settings_err()?;
    // The default list is compared without building it: no allocation on
    // the common path.
    let defaults = patterns.is_none() && extra.as_ref().map_or(true, |e| e.is_empty());
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let same = if defaults {
            c.0.len() == DEFAULT_PATTERNS.len() && c.0.iter().zip(DEFAULT_PATTERNS.iter()).all(|(a, b)| a == b)
        } else {
            false
        };
        let mut all: Vec<String> = Vec::new();
        if !same {
            all = patterns.unwrap_or_else(|| DEFAULT_PATTERNS.iter().map(|s| s.to_string()).collect());
            all.extend(extra.unwrap_or_default());
        }
        if !same && (c.0 != all || c.1.len() != all.len()) {
            let mut res = Vec::with_capacity(all.len());
            for (i, p) in all.iter().enumerate() {
                res.push(Regex::new(p).map_err(|e| format!("setting patterns: pattern {} ({:?}) is not a valid regular expression: {}", i, p, e))?);
            }
            *c = (all, res);
        }
        let value = match inv.primary_value() {
            Some(v) => v,
            None => return Ok(Decision::continue_()),
        };
        let mut r = Redactor { res: &c.1, replacement: &replacement, count: 0 };
        let redacted = r.value(value);
        if r.count == 0 {
            return Ok(Decision::continue_());
        }
        let reason = format!("redacted {} {}", r.count, if r.count == 1 { "secret" } else { "secrets" });
        Ok(Decision::modify_primary(redacted).with_reason(&reason))
    })
}

struct Redactor<'a> {
    res: &'a [Regex],
    replacement: &'a str,
    count: usize,
}

impl<'a> Redactor<'a> {
    fn value(&mut self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|e| self.value(e)).collect()),
            Value::Object(m) => Value::Object(m.iter().map(|(k, e)| (k.clone(), self.value(e))).collect()),
            other => other.clone(),
        }
    }

    // Spans are found in the original text and merged where they overlap,
    // so each secret counts once whatever the order of the patterns.
    fn text(&mut self, s: &str) -> String {
        let b = s.as_bytes();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        // One pass finds the bytes the text holds; a pattern whose required
        // bytes are not all there is not run.
        let set = ByteSet::of(b);
        for re in self.res {
            if !re.may_match(&set) {
                continue;
            }
            for m in re.find_all(b) {
                let sp = match (re.has_secret, m.secret) {
                    (true, Some(sec)) => sec,
                    _ => (m.start, m.end),
                };
                if sp.1 > sp.0 {
                    spans.push(sp);
                }
            }
        }
        if spans.is_empty() {
            return s.to_string();
        }
        spans.sort_by_key(|sp| sp.0);
        let mut out = String::with_capacity(s.len());
        let (mut last, mut i) = (0, 0);
        while i < spans.len() {
            let mut cur = spans[i];
            i += 1;
            while i < spans.len() && spans[i].0 < cur.1 {
                cur.1 = cur.1.max(spans[i].1);
                i += 1;
            }
            out.push_str(&s[last..cur.0]);
            out.push_str(self.replacement);
            last = cur.1;
            self.count += 1;
        }
        out.push_str(&s[last..]);
        out
    }
}

hook!(handle);
