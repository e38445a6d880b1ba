//! Oversized tool output as handles (reference §4.3), for agents with `toolOutput: handles`: a
//! tool result longer than `toolResponseMaxBytes` is kept whole for the run, and the model gets
//! the contract's truncation notice, the handle, the head and the tail; the internal tool
//! `agent__tool_output` then reads any part of it (a byte range, a line range, or the lines
//! matching a pattern with their context). Handles live in the run's memory and die with it.

use std::sync::Mutex;

use regex::RegexBuilder;
use serde_json::{Map, Value, json};

use crate::llm::ToolDefinition;

pub const TOOL_OUTPUT_TOOL: &str = "agent__tool_output";
/// The most bytes of output one run keeps; past it outputs are only truncated.
pub const MAX_KEPT_BYTES_PER_RUN: usize = 64 * 1024 * 1024;
/// The most lines of context around a grep match.
pub const MAX_GREP_CONTEXT: u64 = 20;
/// The most matches one grep returns.
pub const MAX_GREP_MATCHES: usize = 100;

/// One kept output.
struct Kept {
    handle: String,
    tool: String,
    text: String,
}

/// The outputs a run kept, by handle.
#[derive(Default)]
pub struct OutputHandles {
    kept: Mutex<Vec<Kept>>,
}

impl OutputHandles {
    /// Keeps `text` of `tool`; `None` when the run already keeps `MAX_KEPT_BYTES_PER_RUN`.
    pub fn keep(&self, tool: &str, text: &str) -> Option<String> {
        let mut kept = self.kept.lock().ok()?;
        let held: usize = kept.iter().map(|k| k.text.len()).sum();
        if held + text.len() > MAX_KEPT_BYTES_PER_RUN {
            return None;
        }
        let handle = format!("out-{}", kept.len() + 1);
        kept.push(Kept {
            handle: handle.clone(),
            tool: tool.to_string(),
            text: text.to_string(),
        });
        Some(handle)
    }

    pub fn is_empty(&self) -> bool {
        self.kept.lock().map_or(true, |kept| kept.is_empty())
    }

    /// The whole output the call's `handle` names; `Err` is what the model is told.
    pub fn text(&self, arguments: &Map<String, Value>) -> Result<String, String> {
        let handle = arguments
            .get("handle")
            .and_then(Value::as_str)
            .ok_or("`handle` (as given in the truncated output) is required")?;
        let kept = self
            .kept
            .lock()
            .map_err(|_| "the kept outputs are unavailable")?;
        match kept.iter().find(|k| k.handle == handle) {
            Some(found) => Ok(found.text.clone()),
            None => Err(format!(
                "unknown handle {handle:?}: this run keeps {}",
                kept.iter()
                    .map(|k| format!("{} ({})", k.handle, k.tool))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// Reads part of a kept output as `agent__tool_output` asks (modes `bytes`, `lines`,
    /// `grep`; `ask` is answered by `output_questions`); `Err` is what the model is told.
    pub fn extract(&self, arguments: &Map<String, Value>) -> Result<String, String> {
        let text = self.text(arguments)?;
        let number = |key: &str| arguments.get(key).and_then(Value::as_u64);
        match arguments
            .get("mode")
            .and_then(Value::as_str)
            .unwrap_or("lines")
        {
            "bytes" => Ok(byte_range(&text, number("start"), number("end"))),
            "lines" => Ok(line_range(&text, number("start"), number("end"))),
            "grep" => {
                let pattern = arguments
                    .get("pattern")
                    .and_then(Value::as_str)
                    .filter(|p| !p.is_empty())
                    .ok_or("mode grep needs a `pattern`")?;
                let context = number("context").unwrap_or(2);
                if context > MAX_GREP_CONTEXT {
                    return Err(format!(
                        "`context` is at most {MAX_GREP_CONTEXT} lines, not {context}"
                    ));
                }
                grep(&text, pattern, context as usize)
            }
            other => Err(format!(
                "unknown mode {other:?}: use bytes, lines, grep or ask"
            )),
        }
    }
}

/// What the model gets for an output kept as `handle`: the contract's truncation notice, how
/// to read the rest, then about `max_bytes` of the output (its head and its tail).
pub fn handle_message(handle: &str, text: &str, max_bytes: usize) -> String {
    let head = prefix_within(text, max_bytes / 2);
    let tail = suffix_within(text, max_bytes / 2);
    let lines = text.lines().count();
    format!(
        "[TRUNCATED] Original size {} bytes; truncated to {} bytes.\n\
         The whole output is kept as handle {handle} ({} bytes, {lines} lines): call \
         {TOOL_OUTPUT_TOOL} with {{\"handle\": \"{handle}\", \"mode\": \"lines\", \"start\": N, \
         \"end\": M}}, {{\"mode\": \"bytes\", …}} or {{\"mode\": \"grep\", \"pattern\": \"…\"}} to \
         read the rest.\n--- head ---\n{head}\n--- tail ---\n{tail}",
        text.len(),
        head.len() + tail.len(),
        text.len(),
    )
}

/// The definition of `agent__tool_output`.
pub fn definition() -> ToolDefinition {
    ToolDefinition {
        name: TOOL_OUTPUT_TOOL.into(),
        description: "Read part of a tool output that was too long and kept as a handle: a line \
                      range (1-based, inclusive), a byte range (end exclusive), the lines \
                      matching a regular expression with `context` lines around each, or \
                      (mode ask) the answer to a `question` about the whole output."
            .into(),
        parameters: json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["handle"],
            "properties": {
                "handle": {"type": "string", "description": "As given in the truncated output, e.g. out-1."},
                "mode": {"type": "string", "enum": ["lines", "bytes", "grep", "ask"]},
                "question": {"type": "string", "description": "For ask: what to find out from the output."},
                "start": {"type": "integer", "minimum": 0},
                "end": {"type": "integer", "minimum": 0},
                "pattern": {"type": "string", "description": "A regular expression (case-insensitive), for grep."},
                "context": {"type": "integer", "minimum": 0, "maximum": MAX_GREP_CONTEXT}
            }
        }),
    }
}

/// Bytes `start..end` (end exclusive), widened to whole UTF-8 characters.
fn byte_range(text: &str, start: Option<u64>, end: Option<u64>) -> String {
    let clamp = |n: Option<u64>, default: usize| {
        n.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
            .min(text.len())
    };
    let mut start = clamp(start, 0);
    let mut end = clamp(end, text.len()).max(start);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    text[start..end].to_string()
}

/// Lines `start..=end`, 1-based, each prefixed by its number.
fn line_range(text: &str, start: Option<u64>, end: Option<u64>) -> String {
    let start = start.unwrap_or(1).max(1);
    let end = end.unwrap_or(u64::MAX).max(start);
    text.lines()
        .enumerate()
        .map(|(index, line)| (index as u64 + 1, line))
        .filter(|(number, _)| (start..=end).contains(number))
        .map(|(number, line)| format!("{number}: {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines matching `pattern` (case-insensitive) with `context` lines around each, numbered;
/// separate stretches are divided by `--`.
fn grep(text: &str, pattern: &str, context: usize) -> Result<String, String> {
    let regex = RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("`pattern` is not a regular expression: {e}"))?;
    let lines: Vec<&str> = text.lines().collect();
    let matches: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| regex.is_match(line))
        .map(|(index, _)| index)
        .take(MAX_GREP_MATCHES)
        .collect();
    if matches.is_empty() {
        return Ok(format!("no line matches {pattern:?}"));
    }
    let mut shown: Vec<usize> = matches
        .iter()
        .flat_map(|&at| at.saturating_sub(context)..=(at + context).min(lines.len() - 1))
        .collect();
    shown.dedup();
    shown.sort_unstable();
    shown.dedup();
    let mut out = Vec::new();
    for (position, &index) in shown.iter().enumerate() {
        if position > 0 && index > shown[position - 1] + 1 {
            out.push("--".to_string());
        }
        out.push(format!("{}: {}", index + 1, lines[index]));
    }
    Ok(out.join("\n"))
}

/// At most `max` bytes from the start, on a character boundary.
fn prefix_within(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// At most `max` bytes from the end, on a character boundary.
fn suffix_within(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("object")
    }

    fn numbered(lines: usize) -> String {
        (1..=lines)
            .map(|n| format!("line {n}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_message_has_the_notice_the_handle_the_head_and_the_tail() {
        let text = numbered(1000);
        let message = handle_message("out-1", &text, 100);
        assert!(message.starts_with(&format!(
            "[TRUNCATED] Original size {} bytes; truncated to 100 bytes.",
            text.len()
        )));
        assert!(message.contains("handle out-1"));
        assert!(message.contains("--- head ---\nline 1\n"));
        assert!(message.ends_with("line 1000"));
    }

    #[test]
    fn lines_bytes_and_grep_read_the_kept_output() {
        let handles = OutputHandles::default();
        let text = numbered(50);
        assert_eq!(handles.keep("t__x", &text).as_deref(), Some("out-1"));
        assert!(!handles.is_empty());
        let read = |value: Value| handles.extract(&args(value));
        assert_eq!(
            read(json!({"handle": "out-1", "mode": "lines", "start": 9, "end": 10})),
            Ok("9: line 9\n10: line 10".into())
        );
        assert_eq!(
            read(json!({"handle": "out-1", "mode": "bytes", "start": 0, "end": 6})),
            Ok("line 1".into())
        );
        assert_eq!(
            read(
                json!({"handle": "out-1", "mode": "grep", "pattern": "^LINE 2[05]$", "context": 1})
            ),
            Ok(
                "19: line 19\n20: line 20\n21: line 21\n--\n24: line 24\n25: line 25\n26: line 26"
                    .into()
            )
        );
        assert!(
            read(json!({"handle": "out-9"}))
                .unwrap_err()
                .contains("out-1 (t__x)")
        );
        assert!(
            read(json!({"handle": "out-1", "mode": "grep", "pattern": "("}))
                .unwrap_err()
                .contains("regular expression")
        );
        assert!(
            read(json!({"handle": "out-1", "mode": "grep", "pattern": "x", "context": 20})).is_ok(),
            "20 lines of context is the limit"
        );
        assert!(
            read(json!({"handle": "out-1", "mode": "grep", "pattern": "x", "context": 21}))
                .unwrap_err()
                .contains("at most 20")
        );
        assert!(
            read(json!({"handle": "out-1", "mode": "tail"}))
                .unwrap_err()
                .contains("unknown mode")
        );
    }

    #[test]
    fn byte_ranges_widen_to_whole_characters() {
        let text = "aé€b";
        assert_eq!(byte_range(text, Some(2), Some(3)), "é");
        assert_eq!(byte_range(text, Some(0), Some(99)), text);
        assert_eq!(byte_range(text, Some(9), Some(1)), "");
    }

    #[test]
    fn a_run_keeps_at_most_its_byte_limit() {
        let handles = OutputHandles::default();
        let half = "x".repeat(MAX_KEPT_BYTES_PER_RUN / 2);
        assert!(handles.keep("t", &half).is_some());
        assert!(handles.keep("t", &half).is_some(), "exactly at the limit");
        assert!(handles.keep("t", "y").is_none(), "one byte past it");
    }
}
