//! A small JSON reader and writer. The reader checks the grammar, escapes,
//! surrogates and UTF-8 of RFC 8259; the host has already applied the rest
//! of its strict rules (duplicate keys, number limits: ABI.md, Strict JSON)
//! to every document it hands a hook. Numbers keep their text.

/// A JSON value. Objects keep their members in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// A number, as written.
    Number(String),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// Member key of an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

const MAX_DEPTH: usize = 128;

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

/// Parses a JSON document.
pub fn parse(b: &[u8]) -> Result<Value, String> {
    let mut p = Parser { b, i: 0 };
    let v = p.value(0)?;
    p.ws();
    if p.i != b.len() {
        return Err(p.err("data after the value"));
    }
    Ok(v)
}

impl<'a> Parser<'a> {
    fn err(&self, what: &str) -> String {
        format!("invalid JSON at byte {}: {}", self.i, what)
    }
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn lit(&mut self, s: &str, v: Value) -> Result<Value, String> {
        if self.b[self.i..].starts_with(s.as_bytes()) {
            self.i += s.len();
            Ok(v)
        } else {
            Err(self.err("invalid value"))
        }
    }
    fn value(&mut self, depth: usize) -> Result<Value, String> {
        self.ws();
        if self.i >= self.b.len() {
            return Err(self.err("unexpected end"));
        }
        match self.b[self.i] {
            b'{' | b'[' => {
                if depth >= MAX_DEPTH {
                    return Err(self.err("too deep"));
                }
                let obj = self.b[self.i] == b'{';
                let close = if obj { b'}' } else { b']' };
                self.i += 1;
                let mut arr = Vec::new();
                let mut members = Vec::new();
                self.ws();
                if self.i < self.b.len() && self.b[self.i] == close {
                    self.i += 1;
                } else {
                    loop {
                        if obj {
                            self.ws();
                            if self.i >= self.b.len() || self.b[self.i] != b'"' {
                                return Err(self.err("want a key"));
                            }
                            let k = self.string()?;
                            self.ws();
                            if self.i >= self.b.len() || self.b[self.i] != b':' {
                                return Err(self.err("want ':'"));
                            }
                            self.i += 1;
                            let v = self.value(depth + 1)?;
                            members.push((k, v));
                        } else {
                            arr.push(self.value(depth + 1)?);
                        }
                        self.ws();
                        if self.i < self.b.len() && self.b[self.i] == b',' {
                            self.i += 1;
                            continue;
                        }
                        if self.i < self.b.len() && self.b[self.i] == close {
                            self.i += 1;
                            break;
                        }
                        return Err(self.err("want ',' or a closing bracket"));
                    }
                }
                Ok(if obj { Value::Object(members) } else { Value::Array(arr) })
            }
            b'"' => Ok(Value::String(self.string()?)),
            b'n' => self.lit("null", Value::Null),
            b't' => self.lit("true", Value::Bool(true)),
            b'f' => self.lit("false", Value::Bool(false)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.err("invalid value")),
        }
    }
    fn digits(&mut self) -> usize {
        let s = self.i;
        while self.i < self.b.len() && self.b[self.i].is_ascii_digit() {
            self.i += 1;
        }
        self.i - s
    }
    fn number(&mut self) -> Result<Value, String> {
        let s = self.i;
        if self.b[self.i] == b'-' {
            self.i += 1;
        }
        if self.i < self.b.len() && self.b[self.i] == b'0' {
            self.i += 1;
        } else if self.digits() == 0 {
            return Err(self.err("invalid number"));
        }
        if self.i < self.b.len() && self.b[self.i] == b'.' {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.err("invalid number"));
            }
        }
        if self.i < self.b.len() && (self.b[self.i] == b'e' || self.b[self.i] == b'E') {
            self.i += 1;
            if self.i < self.b.len() && (self.b[self.i] == b'+' || self.b[self.i] == b'-') {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("invalid number"));
            }
        }
        Ok(Value::Number(String::from_utf8_lossy(&self.b[s..self.i]).into_owned()))
    }
    fn hex4(&mut self) -> Result<u32, String> {
        if self.i + 4 > self.b.len() {
            return Err(self.err("invalid \\u escape"));
        }
        let s = std::str::from_utf8(&self.b[self.i..self.i + 4]).map_err(|_| self.err("invalid \\u escape"))?;
        let v = u32::from_str_radix(s, 16).map_err(|_| self.err("invalid \\u escape"))?;
        if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(self.err("invalid \\u escape"));
        }
        self.i += 4;
        Ok(v)
    }
    fn string(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let start = self.i;
            self.i += plain_run(&self.b[self.i..]);
            out.extend_from_slice(&self.b[start..self.i]);
            if self.i >= self.b.len() {
                return Err(self.err("unterminated string"));
            }
            match self.b[self.i] {
                b'"' => {
                    self.i += 1;
                    return String::from_utf8(out).map_err(|_| self.err("invalid UTF-8"));
                }
                b'\\' => {
                    self.i += 1;
                    if self.i >= self.b.len() {
                        return Err(self.err("unterminated string"));
                    }
                    let e = self.b[self.i];
                    self.i += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let v = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&v) {
                                if !self.b[self.i..].starts_with(b"\\u") {
                                    return Err(self.err("lone surrogate"));
                                }
                                self.i += 2;
                                let w = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&w) {
                                    return Err(self.err("lone surrogate"));
                                }
                                0x10000 + ((v - 0xD800) << 10) + (w - 0xDC00)
                            } else {
                                v
                            };
                            char::from_u32(cp).ok_or_else(|| self.err("lone surrogate"))?
                        }
                        _ => return Err(self.err("invalid escape")),
                    };
                    let mut tmp = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
                }
                _ => return Err(self.err("control character in string")),
            }
        }
    }
}

/// Appends s as a JSON string literal.
pub fn write_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    out.reserve(b.len() + 2);
    out.push('"');
    let (mut i, mut run) = (0, 0);
    while i < b.len() {
        i += plain_run(&b[i..]);
        if i >= b.len() {
            break;
        }
        // i is at '"', '\\' or a control character: all ASCII, so the
        // runs around it are whole characters.
        out.push_str(&s[run..i]);
        match b[i] {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c => {
                out.push_str("\\u00");
                out.push(HEX[(c >> 4) as usize] as char);
                out.push(HEX[(c & 15) as usize] as char);
            }
        }
        i += 1;
        run = i;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// plain_run returns how many bytes from b[0] on need no escaping in a JSON
/// string (not '"', '\\' or a control character), eight at a time (SWAR):
/// in wasm a loop per byte costs several times the instructions.
pub fn plain_run(b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    // chunks_exact: each chunk is one unaligned 8-byte load, no bounds check.
    for chunk in b.chunks_exact(8) {
        let v = u64::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7]]);
        let (q, e) = (v ^ (ONES * b'"' as u64), v ^ (ONES * b'\\' as u64));
        let hit = (v.wrapping_sub(ONES * 0x20) & !v) | (q.wrapping_sub(ONES) & !q) | (e.wrapping_sub(ONES) & !e);
        if hit & HIGHS != 0 {
            break;
        }
        i += 8;
    }
    match b[i..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20) {
        Some(k) => i + k,
        None => b.len(),
    }
}

/// Appends v as compact JSON.
pub fn write(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(n),
        Value::String(s) => write_string(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, e) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, e);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, e)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write(out, e);
            }
            out.push('}');
        }
    }
}
