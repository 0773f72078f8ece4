//! summarize in Rust: the same hook as ../main.go (same manifest, settings
//! and decisions; the shared corpus in testdata/corpus checks it), written
//! with the Rust SDK (sdk/rust).
use wasmhooks::{hook, status, Decision, Invocation};

const DEFAULT_PROMPT_PREFIX: &str = "Summarize the following text in a few sentences. Keep every fact, number, name and instruction the reader needs, and answer with the summary only.\n\n";

fn handle(inv: &mut Invocation) -> Result<Decision, String> {
    let min_chars = inv.setting_i64("min_chars", 400);
    let max_tokens = inv.setting_i64("max_tokens", 120);
    let prefix = inv.setting_string("prompt_prefix", DEFAULT_PROMPT_PREFIX);
    inv.settings_err()?;
    if min_chars < 0 {
        return Err(format!("setting \"min_chars\": must be at least 0, got {}", min_chars));
    }
    if max_tokens < 1 {
        return Err(format!("setting \"max_tokens\": must be at least 1, got {}", max_tokens));
    }
    let text = inv.primary_text();
    let n = text.chars().count();
    if n == 0 || (n as i64) < min_chars {
        return Ok(Decision::continue_());
    }
    let prompt = format!("{}{}", prefix, text);
    let max_tokens = max_tokens.min(u32::MAX as i64) as u32;
    let summary = match wasmhooks::llm_run(&prompt, max_tokens) {
        Ok(s) => s,
        Err(e) => return Ok(Decision::continue_().with_reason(&format!("not summarized: {}", explain(&e)))),
    };
    // Go's strings.TrimSpace: Unicode white space, as char::is_whitespace.
    let summary = summary.trim();
    let m = summary.chars().count();
    if m == 0 {
        return Ok(Decision::continue_().with_reason("not summarized: the model returned an empty summary"));
    }
    if m >= n {
        return Ok(Decision::continue_().with_reason(&format!(
            "not summarized: the summary ({} characters) is not shorter than the text ({})", m, n)));
    }
    Ok(Decision::modify_primary(summary.into()).with_reason(&format!("summarized {} characters to {}", n, m)))
}

fn explain(e: &wasmhooks::Error) -> String {
    match e.status {
        status::INSUFFICIENT_CREDIT => "insufficient credit for llm.run".into(),
        status::DENIED => "llm.run is not granted to this hook".into(),
        status::RATE_LIMITED => "llm.run is rate limited".into(),
        status::MALFORMED_RESULT => "llm.run returned a malformed result".into(),
        _ => format!("llm.run failed ({})", e.code()),
    }
}

hook!(handle);
