//! Tool-call argument parsing: turns the raw `arguments` text an LLM produced
//! for a tool call into a JSON object, with a deterministic repair pipeline.
//!
//! Pipeline (first success wins, every step is recorded):
//! 1. native `serde_json` parse of the raw text;
//! 2. `jsonrepair` on the raw text, then parse;
//! 3. guarded fixes on the raw text, each followed by a parse (and `jsonrepair`
//!    on the fixed text when that parse fails):
//!    a. strip a surrounding markdown code fence (```` ```json … ``` ````),
//!    b. extract the first balanced `{…}` object (string- and escape-aware),
//!    c. close dangling braces/brackets at the end (only when the text starts
//!    with `{` and at most [`MAX_DANGLING_CLOSERS`] closers are missing).
//!
//! The result must be a JSON object. A repair that turns garbage into a JSON
//! string/number/array is never accepted. This module is pure: logging
//! (WARN with repair steps and both payloads, ERR with the raw payload) is the
//! caller's job, using the data carried by [`ParsedArguments`] and
//! [`ArgumentsError`].

use serde_json::{Map, Value};

/// Most closers the "close dangling braces" fix may append.
pub const MAX_DANGLING_CLOSERS: usize = 8;

/// Most `{` start positions tried by the "extract the first JSON object" fix.
const MAX_EXTRACT_STARTS: usize = 16;

const STEP_JSONREPAIR: &str = "jsonrepair";
const STEP_FENCE: &str = "stripped a markdown code fence";
const STEP_EXTRACT: &str = "extracted the first JSON object";
const STEP_UNTERMINATED_STRING: &str = "closed an unterminated string";

/// Successfully parsed tool-call arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum ParsedArguments {
    /// Parsed as-is.
    Clean(Map<String, Value>),
    /// Parsed after repair; `steps` names each step applied, e.g.
    /// `["jsonrepair"]`, `["closed 2 dangling braces"]`,
    /// `["extracted the first JSON object"]`; `repaired` is the text that
    /// finally parsed.
    Repaired {
        arguments: Map<String, Value>,
        repaired: String,
        steps: Vec<String>,
    },
}

impl ParsedArguments {
    /// The parsed arguments object.
    pub fn arguments(&self) -> &Map<String, Value> {
        match self {
            Self::Clean(arguments) | Self::Repaired { arguments, .. } => arguments,
        }
    }

    /// Consumes `self`, returning the parsed arguments object.
    pub fn into_arguments(self) -> Map<String, Value> {
        match self {
            Self::Clean(arguments) | Self::Repaired { arguments, .. } => arguments,
        }
    }

    /// Whether any repair step was needed.
    pub fn is_repaired(&self) -> bool {
        matches!(self, Self::Repaired { .. })
    }
}

/// Why tool-call arguments could not be turned into a JSON object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentsError {
    /// Neither the raw text nor any repaired variant parsed as JSON.
    #[error(
        "tool call arguments are not valid JSON and could not be repaired ({message}); \
         resend the call with the arguments as a single JSON object"
    )]
    Unparseable {
        /// The JSON parser's message for the raw text.
        message: String,
    },
    /// The text is (or could only be repaired into) JSON that is not an object.
    #[error(
        "tool call arguments must be a JSON object, but they {} {kind}; \
         resend the call with the arguments as a single JSON object",
        if *.after_repair { "could only be repaired into" } else { "are" }
    )]
    NotAnObject {
        /// What the JSON was, with an article: "an array", "a string", …
        kind: &'static str,
        /// True when the non-object value only appeared after a repair step
        /// (e.g. jsonrepair turning `hello world` into a JSON string).
        after_repair: bool,
    },
}

/// Parses raw tool-call arguments into a JSON object.
///
/// An empty or whitespace-only string means `{}`. See the module docs for the
/// pipeline.
pub fn parse_tool_arguments(raw: &str) -> Result<ParsedArguments, ArgumentsError> {
    if raw.trim().is_empty() {
        return Ok(ParsedArguments::Clean(Map::new()));
    }

    // 1. Native parse.
    let native_error = match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(arguments)) => return Ok(ParsedArguments::Clean(arguments)),
        Ok(other) => {
            return Err(ArgumentsError::NotAnObject {
                kind: json_kind(&other),
                after_repair: false,
            });
        }
        Err(error) => error.to_string(),
    };

    let mut non_object: Option<&'static str> = None;

    // 2. jsonrepair on the raw text.
    if let Some(parsed) = repair_and_parse(raw, Vec::new(), &mut non_object) {
        return Ok(parsed);
    }

    // 3. Guarded fixes on the raw text.
    let trimmed = raw.trim();
    let (base, base_steps) = match strip_code_fence(trimmed) {
        Some(inner) => {
            let steps = vec![STEP_FENCE.to_owned()];
            if let Some(parsed) = attempt(inner, steps.clone(), &mut non_object) {
                return Ok(parsed);
            }
            (inner, steps)
        }
        None => (trimmed, Vec::new()),
    };

    for candidate in object_candidates(base).take(MAX_EXTRACT_STARTS) {
        if candidate.len() == base.len() {
            // The whole text already is the balanced object; nothing extracted.
            continue;
        }
        let mut steps = base_steps.clone();
        steps.push(STEP_EXTRACT.to_owned());
        if let Some(parsed) = attempt(candidate, steps, &mut non_object) {
            return Ok(parsed);
        }
    }

    if let Some((closed, close_steps)) = close_dangling(base) {
        let mut steps = base_steps;
        steps.extend(close_steps);
        if let Some(parsed) = attempt(&closed, steps, &mut non_object) {
            return Ok(parsed);
        }
    }

    Err(match non_object {
        Some(kind) => ArgumentsError::NotAnObject {
            kind,
            after_repair: true,
        },
        None => ArgumentsError::Unparseable {
            message: native_error,
        },
    })
}

/// Parses `text` (already transformed by `steps`); falls back to jsonrepair.
fn attempt(
    text: &str,
    steps: Vec<String>,
    non_object: &mut Option<&'static str>,
) -> Option<ParsedArguments> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(arguments)) => Some(ParsedArguments::Repaired {
            arguments,
            repaired: text.to_owned(),
            steps,
        }),
        Ok(other) => {
            non_object.get_or_insert(json_kind(&other));
            None
        }
        Err(_) => repair_and_parse(text, steps, non_object),
    }
}

/// Runs jsonrepair on `text` and parses the result; only objects are accepted.
fn repair_and_parse(
    text: &str,
    mut steps: Vec<String>,
    non_object: &mut Option<&'static str>,
) -> Option<ParsedArguments> {
    let repaired = jsonrepair_rs::jsonrepair(text).ok()?;
    match serde_json::from_str::<Value>(&repaired) {
        Ok(Value::Object(arguments)) => {
            steps.push(STEP_JSONREPAIR.to_owned());
            Some(ParsedArguments::Repaired {
                arguments,
                repaired,
                steps,
            })
        }
        Ok(other) => {
            non_object.get_or_insert(json_kind(&other));
            None
        }
        Err(_) => None,
    }
}

/// "an object", "an array", … for messages (here and in the final report's).
pub(super) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Strips a markdown code fence around the whole (trimmed) text: an opening
/// line starting with ```` ``` ```` (with an optional language tag) and an
/// optional closing ```` ``` ````.
fn strip_code_fence(trimmed: &str) -> Option<&str> {
    let after_ticks = trimmed.strip_prefix("```")?;
    let body = match after_ticks.find('\n') {
        Some(newline) => {
            let tag = after_ticks[..newline].trim();
            if !tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-_.".contains(c))
            {
                return None;
            }
            &after_ticks[newline + 1..]
        }
        // Single-line fence: ```json {...}```
        None => after_ticks.trim_start_matches(|c: char| c.is_ascii_alphabetic()),
    };
    let body = body.trim_end();
    let body = body.strip_suffix("```").unwrap_or(body);
    Some(body.trim())
}

/// Balanced `{…}` slices of `text`, one per `{` start position in order,
/// skipping starts that never balance. Strings and escapes are respected
/// inside each candidate.
fn object_candidates(text: &str) -> impl Iterator<Item = &str> {
    text.char_indices()
        .filter(|&(_, c)| c == '{')
        .filter_map(move |(start, _)| balanced_object_at(text, start))
}

/// The balanced object starting at byte `start` (which holds `{`), if any.
fn balanced_object_at(text: &str, start: usize) -> Option<&str> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (offset, c) in text.get(start..)?.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    let end = start + offset + c.len_utf8();
                    return text.get(start..end);
                }
            }
            _ => {}
        }
    }
    None
}

/// Appends the closers missing at the end of `text`, returning the fixed
/// text and the steps applied. Guarded: only when the text starts with `{`,
/// all closers seen match, the text does not close its top-level value early,
/// and at most [`MAX_DANGLING_CLOSERS`] closers are missing.
fn close_dangling(text: &str) -> Option<(String, Vec<String>)> {
    if !text.starts_with('{') {
        return None;
    }
    let mut stack: Vec<char> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                if stack.is_empty() {
                    return None; // content after the top-level object closed
                }
                in_string = true;
            }
            '{' | '[' => {
                if stack.is_empty() && c == '[' {
                    return None;
                }
                stack.push(if c == '{' { '}' } else { ']' });
            }
            // A mismatched or extra closer makes the fix inapplicable.
            '}' | ']' => {
                stack.pop().filter(|&expected| expected == c)?;
            }
            _ => {}
        }
    }
    if escaped || stack.is_empty() || stack.len() > MAX_DANGLING_CLOSERS {
        return None;
    }

    let mut fixed = text.trim_end().to_owned();
    let mut steps = Vec::new();
    if in_string {
        fixed.push('"');
        steps.push(STEP_UNTERMINATED_STRING.to_owned());
    }
    let braces = stack.iter().filter(|&&c| c == '}').count();
    let brackets = stack.len() - braces;
    fixed.extend(stack.iter().rev());

    let mut parts = Vec::new();
    if braces > 0 {
        parts.push(format!("{braces} dangling brace{}", plural(braces)));
    }
    if brackets > 0 {
        parts.push(format!("{brackets} dangling bracket{}", plural(brackets)));
    }
    steps.push(format!("closed {}", parts.join(" and ")));
    Some((fixed, steps))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn repaired(raw: &str) -> (Map<String, Value>, String, Vec<String>) {
        match parse_tool_arguments(raw) {
            Ok(ParsedArguments::Repaired {
                arguments,
                repaired,
                steps,
            }) => (arguments, repaired, steps),
            other => panic!("expected Repaired for {raw:?}, got {other:?}"),
        }
    }

    #[test]
    fn clean_object() {
        let parsed = parse_tool_arguments(r#"{"path": "/tmp/x", "n": 3}"#);
        assert_eq!(
            parsed,
            Ok(ParsedArguments::Clean(object(
                json!({"path": "/tmp/x", "n": 3})
            )))
        );
    }

    #[test]
    fn empty_and_whitespace_mean_empty_object() {
        for raw in ["", "   ", "\n\t "] {
            assert_eq!(
                parse_tool_arguments(raw),
                Ok(ParsedArguments::Clean(Map::new()))
            );
        }
    }

    #[test]
    fn trailing_comma() {
        let (args, repaired, steps) = repaired(r#"{"a": 1, "b": [1, 2,],}"#);
        assert_eq!(args, object(json!({"a": 1, "b": [1, 2]})));
        assert_eq!(steps, vec!["jsonrepair"]);
        assert!(serde_json::from_str::<Value>(&repaired).is_ok());
    }

    #[test]
    fn single_quotes() {
        let (args, _, steps) = repaired("{'query': 'rust async', 'limit': 5}");
        assert_eq!(args, object(json!({"query": "rust async", "limit": 5})));
        assert_eq!(steps, vec!["jsonrepair"]);
    }

    #[test]
    fn unquoted_keys() {
        let (args, _, _) = repaired(r#"{query: "x", limit: 2}"#);
        assert_eq!(args, object(json!({"query": "x", "limit": 2})));
    }

    #[test]
    fn missing_closing_braces() {
        let (args, _, steps) = repaired(r#"{"a": {"b": 1"#);
        assert_eq!(args, object(json!({"a": {"b": 1}})));
        assert!(!steps.is_empty());
    }

    #[test]
    fn markdown_fence() {
        let (args, _, steps) = repaired("```json\n{\"a\": 1, \"b\": \"x\"}\n```");
        assert_eq!(args, object(json!({"a": 1, "b": "x"})));
        assert!(!steps.is_empty());
    }

    #[test]
    fn prose_before_and_after_object() {
        let (args, repaired, steps) =
            repaired("Sure! Here are the arguments: {\"city\": \"Paris\"} Hope this helps.");
        assert_eq!(args, object(json!({"city": "Paris"})));
        assert_eq!(repaired, "{\"city\": \"Paris\"}");
        assert_eq!(steps, vec![STEP_EXTRACT]);
    }

    #[test]
    fn prose_with_two_objects_takes_the_first() {
        let (args, _, steps) = repaired(r#"first {"a": 1} then {"b": 2}"#);
        assert_eq!(args, object(json!({"a": 1})));
        assert_eq!(steps, vec![STEP_EXTRACT]);
    }

    #[test]
    fn nested_strings_containing_braces() {
        let raw = r#"Calling: {"code": "fn main() { println!(\"}{\"); }", "x": {"y": "]"}} done"#;
        let (args, _, steps) = repaired(raw);
        assert_eq!(
            args,
            object(json!({"code": "fn main() { println!(\"}{\"); }", "x": {"y": "]"}}))
        );
        assert_eq!(steps, vec![STEP_EXTRACT]);
    }

    #[test]
    fn array_is_not_an_object() {
        assert_eq!(
            parse_tool_arguments("[1, 2, 3]"),
            Err(ArgumentsError::NotAnObject {
                kind: "an array",
                after_repair: false
            })
        );
        assert!(matches!(
            parse_tool_arguments("42"),
            Err(ArgumentsError::NotAnObject {
                kind: "a number",
                ..
            })
        ));
        assert!(matches!(
            parse_tool_arguments(r#""text""#),
            Err(ArgumentsError::NotAnObject {
                kind: "a string",
                ..
            })
        ));
    }

    #[test]
    fn garbage_repaired_into_a_string_is_rejected() {
        assert_eq!(
            parse_tool_arguments("hello world"),
            Err(ArgumentsError::NotAnObject {
                kind: "a string",
                after_repair: true
            })
        );
    }

    #[test]
    fn pure_garbage_is_an_error() {
        for raw in ["garbage {{{ ]]", "!!!@@@###", "}}}", "{\"a\": 1}}}"] {
            let result = parse_tool_arguments(raw);
            if raw == "{\"a\": 1}}}" {
                // A balanced object followed by junk: extraction recovers it.
                assert!(result.is_ok(), "{raw:?} -> {result:?}");
            } else {
                assert!(result.is_err(), "{raw:?} -> {result:?}");
            }
        }
    }

    #[test]
    fn error_messages_are_actionable() {
        let err = parse_tool_arguments("hello world").err();
        let text = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains("must be a JSON object"), "{text}");
        assert!(
            text.contains("could only be repaired into a string"),
            "{text}"
        );
        let err = parse_tool_arguments("[1]").err();
        let text = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains("they are an array"), "{text}");
    }

    #[test]
    fn deep_unclosed_structure() {
        let raw = r#"{"a": {"b": {"c": [{"d": [1, 2, {"e": "deep"#;
        let (args, _, steps) = repaired(raw);
        assert_eq!(
            args,
            object(json!({"a": {"b": {"c": [{"d": [1, 2, {"e": "deep"}]}]}}}))
        );
        assert!(!steps.is_empty());
    }

    #[test]
    fn unicode_preserved() {
        let raw = r#"{"text": "héllo 世界 🎉", "emoji": "\u00e9"}"#;
        assert_eq!(
            parse_tool_arguments(raw),
            Ok(ParsedArguments::Clean(object(
                json!({"text": "héllo 世界 🎉", "emoji": "é"})
            )))
        );
        let (args, _, _) = repaired("{'text': 'naïve café — 日本語', }");
        assert_eq!(args, object(json!({"text": "naïve café — 日本語"})));
    }

    #[test]
    fn close_dangling_fix_is_guarded_and_named() {
        assert_eq!(
            close_dangling(r#"{"a": {"b": [1"#),
            Some((
                r#"{"a": {"b": [1]}}"#.to_owned(),
                vec!["closed 2 dangling braces and 1 dangling bracket".to_owned()]
            ))
        );
        assert_eq!(
            close_dangling(r#"{"a": "unterminated"#),
            Some((
                r#"{"a": "unterminated"}"#.to_owned(),
                vec![
                    STEP_UNTERMINATED_STRING.to_owned(),
                    "closed 1 dangling brace".to_owned()
                ]
            ))
        );
        assert_eq!(close_dangling(r#"[{"a": 1"#), None);
        assert_eq!(close_dangling(r#"{"a": 1]"#), None);
        assert_eq!(close_dangling(r#"{"a": 1}"#), None);
        let too_deep = format!("{}{}", "{\"a\":".repeat(9), "1");
        assert_eq!(close_dangling(&too_deep), None);
        let ok_deep = format!("{}{}", "{\"a\":".repeat(8), "1");
        assert!(close_dangling(&ok_deep).is_some());
    }

    #[test]
    fn extraction_respects_escapes() {
        let text = r#"x {"a": "\"}\\"} y"#;
        assert_eq!(object_candidates(text).next(), Some(r#"{"a": "\"}\\"}"#));
    }

    #[test]
    fn fence_stripping() {
        assert_eq!(
            strip_code_fence("```json\n{\"a\":1}\n```"),
            Some("{\"a\":1}")
        );
        assert_eq!(strip_code_fence("```\n{\"a\":1}"), Some("{\"a\":1}"));
        assert_eq!(strip_code_fence("```json {\"a\":1}```"), Some("{\"a\":1}"));
        assert_eq!(strip_code_fence("{\"a\":1}"), None);
    }

    #[test]
    fn deterministic() {
        let raw = "note: {'a': [1, 2, {b: 'c'";
        let first = parse_tool_arguments(raw);
        for _ in 0..3 {
            assert_eq!(parse_tool_arguments(raw), first);
        }
    }
}
