//! wasmhooks: the Rust SDK for wasmhooks hooks (hook ABI v1, ABI.md).
//!
//! A crate with no dependencies (std only), built for
//! `wasm32-unknown-unknown`: the module then imports `hook_v1.host_call`
//! alone. It gives what the Go SDK (`sdk/`) gives:
//!
//! - the `hook_v1_handle` export (the [`hook!`] macro), the take of the
//!   invocation document, pointer packing and status codes;
//! - the [`Invocation`] decoded: point, primary field and text, context,
//!   settings (typed accessors that record type errors, [`Invocation::settings_err`]),
//!   meta;
//! - a strict JSON reader and writer ([`json`]);
//! - the [`Decision`]s: continue, modify (a field or the point's primary
//!   field), block, ask, with reason, user message and do_not_reply_again;
//!   a handler that returns `Err` fails the hook (the host's failure policy
//!   decides);
//! - host calls: [`call`], [`llm_run`], [`kv_get`], [`kv_set`], [`log`],
//!   returning an [`Error`] with the ABI status;
//! - [`regex`]: an RE2-subset regular-expression engine (Go's syntax and
//!   leftmost-first semantics) for hooks that take patterns as settings;
//! - a native test double ([`mock`]): built for anything but wasm32, the
//!   host call is served by the test, so `cargo test`/`rustc --test` runs a
//!   hook's code natively.
//!
//! ```ignore
//! use wasmhooks::{hook, Decision, Invocation};
//! fn handle(inv: &mut Invocation) -> Result<Decision, String> {
//!     let word = inv.setting_string("word", "secret");
//!     inv.settings_err()?;
//!     let text = inv.primary_text();
//!     if !text.contains(&word) { return Ok(Decision::continue_()); }
//!     Ok(Decision::modify_primary(text.replace(&word, "***").into()).with_reason("redacted"))
//! }
//! hook!(handle);
//! ```
//!
//! Build (Debian: `apt-get install rustc libstd-rust-dev-wasm32`):
//!
//! ```sh
//! rustc --edition=2021 --crate-type=rlib --crate-name=wasmhooks --target=wasm32-unknown-unknown \
//!   -C opt-level=3 -C panic=abort -o libwasmhooks.rlib sdk/rust/src/lib.rs
//! rustc --edition=2021 --crate-type=cdylib --target=wasm32-unknown-unknown -C opt-level=3 \
//!   -C panic=abort -C lto -C strip=symbols --extern wasmhooks=libwasmhooks.rlib -o hook.wasm hook.rs
//! ```
//!
//! or with Debian's cargo, offline (the crate has no dependencies; Cargo.toml
//! holds the size flags as its release profile):
//! `RUSTC=/usr/bin/rustc cargo build --offline --release --target wasm32-unknown-unknown`.

pub mod json;
pub mod regex;

use json::Value;
use std::cell::RefCell;

/// ABI status codes (ABI.md, Status codes).
pub mod status {
    pub const OK: u32 = 0;
    pub const UNKNOWN_CAPABILITY: u32 = 1;
    pub const INVALID_REQUEST: u32 = 2;
    pub const DENIED: u32 = 3;
    pub const INSUFFICIENT_CREDIT: u32 = 4;
    pub const CAPABILITY_FAILED: u32 = 5;
    pub const RESULT_TOO_LARGE: u32 = 6;
    pub const REQUEST_TOO_LARGE: u32 = 7;
    pub const BUFFER_TOO_SMALL: u32 = 8;
    pub const NO_PENDING: u32 = 9;
    pub const QUOTA_EXCEEDED: u32 = 10;
    pub const NOT_IN_INVOCATION: u32 = 11;
    pub const RATE_LIMITED: u32 = 12;
    /// Not an ABI status: the SDK could not read the capability's result.
    pub const MALFORMED_RESULT: u32 = 0x10000;

    /// The lower-case code of a status, as in the error object.
    pub fn code(s: u32) -> String {
        const CODES: [&str; 13] = [
            "ok", "unknown_capability", "invalid_request", "denied", "insufficient_credit",
            "capability_failed", "result_too_large", "request_too_large", "buffer_too_small",
            "no_pending", "quota_exceeded", "not_in_invocation", "rate_limited",
        ];
        match s {
            _ if (s as usize) < CODES.len() => CODES[s as usize].to_string(),
            MALFORMED_RESULT => "malformed_result".to_string(),
            _ => format!("status_{}", s),
        }
    }
}

/// The point's primary text field, or "" (ABI.md, Hook points).
pub fn primary_field_of(point: &str) -> &'static str {
    match point {
        "message.inbound" => "incoming",
        "message.outbound" => "outgoing",
        "tool.before" => "arguments",
        "tool.after" => "result",
        "llm.before" => "prompt",
        "llm.after" => "response",
        "compaction" => "summary",
        "memory.read" | "memory.write" => "value",
        _ => "",
    }
}

/// Meta identifies an invocation (for logs and correlation only).
#[derive(Debug, Default, Clone)]
pub struct Meta {
    pub hook: String,
    pub invocation: String,
    pub tenant: String,
}

/// One run of the hook: the point, the traffic and the operator's settings.
#[derive(Debug)]
pub struct Invocation {
    pub point: String,
    /// The context object's fields.
    pub context: Value,
    /// The settings object (an empty object when there are none).
    pub settings: Value,
    pub meta: Meta,
    setting_errors: Vec<String>,
}

impl Invocation {
    /// Decodes an invocation document.
    pub fn decode(doc: &[u8]) -> Result<Invocation, String> {
        let v = json::parse(doc).map_err(|e| format!("decoding the invocation: {}", e))?;
        // The document's members are moved out, not cloned (the context
        // holds the traffic: a copy would cost a pass over it). The first
        // of duplicate keys wins, as Value::get finds it.
        let (mut point, mut context, mut settings, mut meta_v) = (None, None, None, None);
        if let Value::Object(members) = v {
            for (k, val) in members {
                let slot = match k.as_str() {
                    "point" => &mut point,
                    "context" => &mut context,
                    "settings" => &mut settings,
                    "meta" => &mut meta_v,
                    _ => continue,
                };
                if slot.is_none() {
                    *slot = Some(val);
                }
            }
        }
        let point = match point {
            Some(Value::String(s)) => s,
            _ => return Err("the invocation has no point".into()),
        };
        let context = match context {
            Some(c @ Value::Object(_)) => c,
            _ => return Err("the invocation's context is not an object".into()),
        };
        let settings = match settings {
            Some(s @ Value::Object(_)) => s,
            _ => Value::Object(Vec::new()),
        };
        let m = |k: &str| meta_v.as_ref().and_then(|m| m.get(k)).and_then(|s| s.as_str()).unwrap_or("").to_string();
        let meta = Meta { hook: m("hook"), invocation: m("invocation"), tenant: m("tenant") };
        Ok(Invocation { point, context, settings, meta, setting_errors: Vec::new() })
    }

    /// The point's primary field name ("outgoing" at message.outbound...), or "".
    pub fn primary_field(&self) -> &'static str {
        primary_field_of(&self.point)
    }
    /// The primary field's value, if the point has one and it is present.
    pub fn primary_value(&self) -> Option<&Value> {
        match self.primary_field() {
            "" => None,
            f => self.context.get(f),
        }
    }
    /// The primary field if it is a string, else "".
    pub fn primary_text(&self) -> &str {
        self.primary_value().and_then(|v| v.as_str()).unwrap_or("")
    }
    /// Context field key.
    pub fn context_value(&self, key: &str) -> Option<&Value> {
        self.context.get(key)
    }
    /// Setting key, if present and not null.
    pub fn setting(&self, key: &str) -> Option<&Value> {
        match self.settings.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }
    fn bad(&mut self, key: &str, want: &str) {
        self.setting_errors.push(format!("setting \"{}\": want {}", key, want));
    }
    /// Setting key as a string; def if absent or null; records an error if
    /// it has another type.
    pub fn setting_string(&mut self, key: &str, def: &str) -> String {
        match self.setting(key) {
            None => def.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                self.bad(key, "a string");
                def.to_string()
            }
        }
    }
    /// Setting key as a number.
    pub fn setting_f64(&mut self, key: &str, def: f64) -> f64 {
        match self.setting(key).map(|v| v.as_f64()) {
            None => def,
            Some(Some(f)) => f,
            Some(None) => {
                self.bad(key, "a number");
                def
            }
        }
    }
    /// Setting key as an integer (an integral number within ±(2^53 − 1)).
    pub fn setting_i64(&mut self, key: &str, def: i64) -> i64 {
        match self.setting(key).map(|v| v.as_f64()) {
            None => def,
            Some(Some(f)) if f.fract() == 0.0 && f.abs() <= 9007199254740991.0 => f as i64,
            Some(_) => {
                self.bad(key, "an integer");
                def
            }
        }
    }
    /// Setting key as a boolean.
    pub fn setting_bool(&mut self, key: &str, def: bool) -> bool {
        match self.setting(key) {
            None => def,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.bad(key, "a boolean");
                def
            }
        }
    }
    /// Setting key as an array of strings; None if absent or null (or of
    /// the wrong type, which records an error).
    pub fn setting_strings(&mut self, key: &str) -> Option<Vec<String>> {
        let out = match self.setting(key) {
            None => return None,
            Some(Value::Array(a)) => a.iter().map(|e| e.as_str().map(String::from)).collect::<Option<Vec<_>>>(),
            Some(_) => None,
        };
        if out.is_none() {
            self.bad(key, "an array of strings");
        }
        out
    }
    /// The errors the setting accessors recorded, joined; Ok if none.
    pub fn settings_err(&self) -> Result<(), String> {
        if self.setting_errors.is_empty() {
            Ok(())
        } else {
            Err(self.setting_errors.join("\n"))
        }
    }
}

/// The four actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Continue,
    Modify,
    Block,
    Ask,
}

/// What the hook tells the host to do. Build with the constructors and
/// refine with the `with_...` methods.
#[derive(Debug, Clone)]
pub struct Decision {
    pub action: Action,
    /// Modify: the field (None: the point's primary field) and its value.
    pub field: Option<String>,
    pub value: Option<Value>,
    pub reason: String,
    pub user_message: String,
    pub do_not_reply_again: bool,
}

impl Decision {
    fn new(action: Action) -> Decision {
        Decision { action, field: None, value: None, reason: String::new(), user_message: String::new(), do_not_reply_again: false }
    }
    /// Let the traffic through unchanged.
    pub fn continue_() -> Decision {
        Decision::new(Action::Continue)
    }
    /// Change context field to value (only the point's changeable fields).
    pub fn modify(field: &str, value: Value) -> Decision {
        Decision { field: Some(field.to_string()), value: Some(value), ..Decision::new(Action::Modify) }
    }
    /// Change the point's primary field to value.
    pub fn modify_primary(value: Value) -> Decision {
        Decision { value: Some(value), ..Decision::new(Action::Modify) }
    }
    /// Stop the traffic.
    pub fn block(reason: &str) -> Decision {
        Decision::new(Action::Block).with_reason(reason)
    }
    /// Hold the traffic until a human approves it.
    pub fn ask(reason: &str) -> Decision {
        Decision::new(Action::Ask).with_reason(reason)
    }
    pub fn with_reason(mut self, reason: &str) -> Decision {
        self.reason = reason.to_string();
        self
    }
    pub fn with_user_message(mut self, msg: &str) -> Decision {
        self.user_message = msg.to_string();
        self
    }
    pub fn do_not_reply_again(mut self) -> Decision {
        self.do_not_reply_again = true;
        self
    }
    /// The canonical decision document for a hook at point.
    pub fn encode(&self, point: &str) -> Result<String, String> {
        let mut s = String::from("{\"action\":\"");
        s.push_str(match self.action {
            Action::Continue => "continue",
            Action::Modify => "modify",
            Action::Block => "block",
            Action::Ask => "ask",
        });
        s.push('"');
        if self.action == Action::Modify {
            let f = match &self.field {
                Some(f) => f.as_str(),
                None => primary_field_of(point),
            };
            if f.is_empty() {
                return Err(format!("modify of the primary field at a point without one ({})", point));
            }
            s.push_str(",\"context\":{");
            json::write_string(&mut s, f);
            s.push(':');
            json::write(&mut s, self.value.as_ref().unwrap_or(&Value::Null));
            s.push('}');
        }
        if !self.reason.is_empty() {
            s.push_str(",\"reason\":");
            json::write_string(&mut s, &self.reason);
        }
        if !self.user_message.is_empty() {
            s.push_str(",\"user_message\":");
            json::write_string(&mut s, &self.user_message);
        }
        if self.do_not_reply_again {
            s.push_str(",\"do_not_reply_again\":true");
        }
        s.push('}');
        Ok(s)
    }
}

/// A failed host call: the status and the error object's message.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub capability: String,
    pub status: u32,
    pub message: String,
}

impl Error {
    /// The lower-case code of the status.
    pub fn code(&self) -> String {
        status::code(self.status)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.capability, self.code())?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "hook_v1")]
extern "C" {
    #[link_name = "host_call"]
    fn host_call_raw(name_ptr: *const u8, name_len: u32, in_ptr: *const u8, in_len: u32, out_ptr: *mut u8, out_cap: u32) -> u64;
}

#[cfg(target_arch = "wasm32")]
fn host_call(name: &[u8], input: &[u8], out: &mut [u8]) -> (u32, u32) {
    let r = unsafe { host_call_raw(name.as_ptr(), name.len() as u32, input.as_ptr(), input.len() as u32, out.as_mut_ptr(), out.len() as u32) };
    ((r >> 32) as u32, r as u32)
}

#[cfg(not(target_arch = "wasm32"))]
fn host_call(name: &[u8], input: &[u8], out: &mut [u8]) -> (u32, u32) {
    mock::host_call(name, input, out)
}

thread_local! {
    static IN_INVOCATION: RefCell<bool> = RefCell::new(false);
    static OUT: RefCell<Vec<u8>> = RefCell::new(Vec::new());
}

const SCRATCH: usize = 16 << 10;

/// Calls capability name with a JSON payload; the result's JSON on success.
pub fn call(name: &str, payload: &str) -> Result<Vec<u8>, Error> {
    let err = |status: u32, message: String| Error { capability: name.to_string(), status, message };
    if !IN_INVOCATION.with(|b| *b.borrow()) {
        return Err(err(status::NOT_IN_INVOCATION, "capabilities can only be called while a handler runs".into()));
    }
    let mut buf = vec![0u8; SCRATCH];
    let (mut st, n) = host_call(name.as_bytes(), payload.as_bytes(), &mut buf);
    if n as usize > buf.len() {
        buf = vec![0u8; n as usize];
        let (ts, tn) = host_call(b"", b"", &mut buf);
        if ts == status::BUFFER_TOO_SMALL || ts == status::NO_PENDING || tn != n {
            return Err(err(ts, format!("taking a parked reply of {} bytes failed", n)));
        }
        st = ts;
    }
    buf.truncate(n as usize);
    if st != status::OK {
        let message = json::parse(&buf).ok().and_then(|v| v.get("message").and_then(|m| m.as_str()).map(String::from)).unwrap_or_default();
        return Err(err(st, message));
    }
    Ok(buf)
}

fn call_object(name: &str, payload: Value) -> Result<Value, Error> {
    let mut p = String::new();
    json::write(&mut p, &payload);
    let body = call(name, &p)?;
    match json::parse(&body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(Error { capability: name.to_string(), status: status::MALFORMED_RESULT, message: "the result is not an object".into() }),
    }
}

/// Runs the host's model on prompt (`llm.run`); max_tokens 0 leaves it to
/// the host. The reply's text.
pub fn llm_run(prompt: &str, max_tokens: u32) -> Result<String, Error> {
    let mut p = vec![("prompt".to_string(), Value::String(prompt.to_string()))];
    if max_tokens > 0 {
        p.push(("max_tokens".to_string(), Value::Number(max_tokens.to_string())));
    }
    let v = call_object("llm.run", Value::Object(p))?;
    match v.get("text") {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(Error { capability: "llm.run".into(), status: status::MALFORMED_RESULT, message: "no string \"text\"".into() }),
    }
}

/// Reads key from the hook's key-value store (`kv.get`): None if not found.
pub fn kv_get(key: &str) -> Result<Option<Value>, Error> {
    let v = call_object("kv.get", Value::Object(vec![("key".into(), Value::String(key.into()))]))?;
    let value = v.get("value").cloned();
    let found = match v.get("found") {
        Some(Value::Bool(b)) => *b,
        None | Some(Value::Null) => matches!(value, Some(ref x) if *x != Value::Null),
        _ => return Err(Error { capability: "kv.get".into(), status: status::MALFORMED_RESULT, message: "\"found\" is not a boolean".into() }),
    };
    Ok(if found { Some(value.unwrap_or(Value::Null)) } else { None })
}

/// Stores value under key (`kv.set`).
pub fn kv_set(key: &str, value: Value) -> Result<(), Error> {
    call_object("kv.set", Value::Object(vec![("key".into(), Value::String(key.into())), ("value".into(), value)])).map(|_| ())
}

/// Writes msg at level to the host's log capability (`log.write`).
pub fn log(level: &str, msg: &str) -> Result<(), Error> {
    call_object("log.write", Value::Object(vec![("level".into(), Value::String(level.into())), ("message".into(), Value::String(msg.into()))])).map(|_| ())
}

/// The body of `hook_v1_handle` (use the [`hook!`] macro): takes the
/// invocation, runs handler, returns the packed decision or 0 on failure.
/// The failure's reason goes to [`last_failure`] (natively) and, on wasm,
/// nowhere: a wasm32-unknown-unknown module has no stderr, so a hook that
/// wants the reason in the host's log calls [`log`] itself.
pub fn handle(in_len: u32, handler: fn(&mut Invocation) -> Result<Decision, String>) -> u64 {
    match handle_inner(in_len, handler) {
        Ok(n) => OUT.with(|o| {
            let o = o.borrow();
            let ptr = if cfg!(target_arch = "wasm32") { o.as_ptr() as usize as u64 } else { 1 };
            (ptr << 32) | n as u64
        }),
        Err(e) => {
            LAST_FAILURE.with(|f| *f.borrow_mut() = Some(e));
            0
        }
    }
}

thread_local! {
    static LAST_FAILURE: RefCell<Option<String>> = RefCell::new(None);
}

/// Why the last invocation failed, if it did (for native tests).
pub fn last_failure() -> Option<String> {
    LAST_FAILURE.with(|f| f.borrow().clone())
}

fn handle_inner(in_len: u32, handler: fn(&mut Invocation) -> Result<Decision, String>) -> Result<usize, String> {
    LAST_FAILURE.with(|f| *f.borrow_mut() = None);
    if IN_INVOCATION.with(|b| *b.borrow()) {
        return Err("hook_v1_handle re-entered".into());
    }
    let mut doc = vec![0u8; in_len as usize];
    let (st, n) = host_call(b"", b"", &mut doc);
    if st != status::OK || n != in_len {
        return Err(format!("taking the invocation document returned status {} with {} bytes, want 0 with {}", st, n, in_len));
    }
    let mut inv = Invocation::decode(&doc)?;
    IN_INVOCATION.with(|b| *b.borrow_mut() = true);
    let d = handler(&mut inv);
    IN_INVOCATION.with(|b| *b.borrow_mut() = false);
    let out = d?.encode(&inv.point)?;
    let n = out.len();
    OUT.with(|o| *o.borrow_mut() = out.into_bytes());
    Ok(n)
}

/// Defines the `hook_v1_handle` export for a handler
/// `fn(&mut Invocation) -> Result<Decision, String>`.
#[macro_export]
macro_rules! hook {
    ($handler:path) => {
        #[no_mangle]
        pub extern "C" fn hook_v1_handle(in_len: u32) -> u64 {
            $crate::handle(in_len, $handler)
        }
    };
}

/// The native test double: serves host calls from a closure.
#[cfg(not(target_arch = "wasm32"))]
pub mod mock {
    use std::cell::RefCell;

    type Capability = Box<dyn FnMut(&str, &[u8]) -> (u32, Vec<u8>)>;

    struct State {
        parked: Option<(u32, Vec<u8>)>,
        cap: Option<Capability>,
        calls: Vec<String>,
    }

    thread_local! {
        static STATE: RefCell<State> = RefCell::new(State { parked: None, cap: None, calls: Vec::new() });
    }

    pub(crate) fn host_call(name: &[u8], input: &[u8], out: &mut [u8]) -> (u32, u32) {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            if name.is_empty() && input.is_empty() {
                return match s.parked.take() {
                    None => (super::status::NO_PENDING, 0),
                    Some((st, body)) if body.len() > out.len() => {
                        let n = body.len() as u32;
                        s.parked = Some((st, body));
                        (super::status::BUFFER_TOO_SMALL, n)
                    }
                    Some((st, body)) => {
                        out[..body.len()].copy_from_slice(&body);
                        (st, body.len() as u32)
                    }
                };
            }
            s.parked = None;
            let name = String::from_utf8_lossy(name).into_owned();
            s.calls.push(name.clone());
            let (st, body) = match s.cap.as_mut() {
                Some(f) => f(&name, input),
                None => (super::status::UNKNOWN_CAPABILITY, br#"{"code":"unknown_capability","message":"no mock"}"#.to_vec()),
            };
            let n = body.len() as u32;
            if body.len() <= out.len() {
                out[..body.len()].copy_from_slice(&body);
            } else {
                s.parked = Some((st, body));
            }
            (st, n)
        })
    }

    /// Runs handler on an invocation document with host calls served by
    /// cap; the decision JSON, or the failure's reason.
    pub fn run(
        invocation: &str,
        handler: fn(&mut super::Invocation) -> Result<super::Decision, String>,
        cap: impl FnMut(&str, &[u8]) -> (u32, Vec<u8>) + 'static,
    ) -> Result<String, String> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            s.parked = Some((0, invocation.as_bytes().to_vec()));
            s.cap = Some(Box::new(cap));
            s.calls.clear();
        });
        let r = super::handle(invocation.len() as u32, handler);
        STATE.with(|s| s.borrow_mut().parked = None);
        if r == 0 {
            return Err(super::last_failure().unwrap_or_default());
        }
        Ok(super::OUT.with(|o| String::from_utf8(o.borrow().clone()).unwrap()))
    }

    /// The capabilities called during the last run, in order.
    pub fn calls() -> Vec<String> {
        STATE.with(|s| s.borrow().calls.clone())
    }
}

#[cfg(test)]
mod tests;
