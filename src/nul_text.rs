//! What agentd does with the NUL character (U+0000), the same on both store backends.
//! PostgreSQL can hold it neither in TEXT nor (as `\u0000`) in JSONB, SQLite can; so that both
//! keep the same data and a replay equals what a live client saw:
//!
//! - **From a client** (a request body, a path segment): refused at the edge with 400
//!   `invalid_request` naming the field ([`find_in_json`]); nothing is stored.
//! - **From a model or a tool** (text, reasoning, tool call arguments, tool results, an upstream
//!   error): replaced by U+FFFD (�) as it enters the session ([`scrub`]), before any event is
//!   numbered or streamed, so the live stream, the stored events, the result and the
//!   conversation hold the same text.
//!
//! This module only finds and replaces; it must not decide where it is applied.

use serde_json::Value;

/// What a NUL from a model or a tool becomes.
pub const REPLACEMENT: char = '\u{FFFD}';

/// `text` with every NUL replaced by [`REPLACEMENT`]; untouched (no copy) when it has none.
pub fn scrub(text: &mut String) {
    if text.contains('\0') {
        *text = text.replace('\0', "\u{FFFD}");
    }
}

/// Replaces the escape `\u0000` in JSON text (a model's tool call arguments) by `\ufffd`, so
/// the value it parses to holds U+FFFD; a raw NUL is replaced as by [`scrub`]. An escaped
/// backslash followed by `u0000` is left alone.
pub fn scrub_json_text(text: &mut String) {
    scrub(text);
    if !text.contains("\\u0000") {
        return;
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let escape = &rest[at..];
        if let Some(after) = escape.strip_prefix("\\u0000") {
            out.push_str("\\ufffd");
            rest = after;
        } else {
            // The backslash and the character it escapes, whatever it is.
            let width = escape[1..].chars().next().map_or(0, char::len_utf8);
            out.push_str(&escape[..1 + width]);
            rest = &escape[1 + width..];
        }
    }
    out.push_str(rest);
    *text = out;
}

/// Where the first NUL of a JSON request body is, as the path `ApiJson` names fields with
/// (`messages[0].content`, or `.` for the top level), or `None` when there is none. The fast
/// path: a body without the escape `\u0000` has no NUL (JSON cannot hold a raw one).
pub fn find_in_body(body: &[u8]) -> Option<String> {
    if !body.windows(6).any(|window| window == b"\\u0000") {
        return None;
    }
    let value: Value = serde_json::from_slice(body).ok()?;
    find_in_json(&value, String::new())
}

/// The path of the first string (or key) holding a NUL inside `value`, below `path`.
pub fn find_in_json(value: &Value, path: String) -> Option<String> {
    let here = || {
        if path.is_empty() {
            ".".to_string()
        } else {
            path.clone()
        }
    };
    match value {
        Value::String(text) if text.contains('\0') => Some(here()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(index, item)| find_in_json(item, format!("{path}[{index}]"))),
        Value::Object(fields) => fields.iter().find_map(|(key, item)| {
            let below = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            if key.contains('\0') {
                return Some(here());
            }
            find_in_json(item, below)
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_is_replaced_and_other_text_is_kept() {
        let mut text = "a\0b\0".to_string();
        scrub(&mut text);
        assert_eq!(text, "a\u{FFFD}b\u{FFFD}");
    }

    #[test]
    fn nul_escapes_in_json_text_become_replacement_escapes() {
        let mut text = r#"{"a":"x\u0000y","b":"C:\\u0000","c":"\"\u0000"}"#.to_string();
        scrub_json_text(&mut text);
        assert_eq!(text, r#"{"a":"x\ufffdy","b":"C:\\u0000","c":"\"\ufffd"}"#);
        let value: Value = serde_json::from_str(&text).expect("still JSON");
        assert_eq!(value["a"], "x\u{FFFD}y");
        assert_eq!(value["b"], "C:\\u0000");
        let mut cut = r#"{"a":"\"#.to_string();
        scrub_json_text(&mut cut);
        assert_eq!(cut, r#"{"a":"\"#, "a cut escape is kept as is");
    }

    #[test]
    fn the_field_holding_a_nul_is_named() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"ok"},{"role":"user","content":"a\u0000b"}]}"#;
        assert_eq!(find_in_body(body).as_deref(), Some("messages[1].content"));
        assert_eq!(
            find_in_body(br#"{"prompt":"\u0000"}"#).as_deref(),
            Some("prompt")
        );
        assert_eq!(find_in_body(br#""\u0000""#).as_deref(), Some("."));
        assert_eq!(find_in_body(br#"{"a\u0000":1}"#).as_deref(), Some("."));
    }

    #[test]
    fn an_escaped_backslash_before_u0000_is_not_a_nul() {
        assert_eq!(find_in_body(br#"{"prompt":"C:\\u0000"}"#), None);
        assert_eq!(find_in_body(br#"{"prompt":"fine"}"#), None);
    }
}
