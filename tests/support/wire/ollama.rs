//! Ollama `/api/chat` responses: one JSON object per line (`done: false` pieces, then a
//! `done: true` line with `done_reason` and token counts), or one object when not streaming.

use serde_json::{Value, json};

use super::Script;

fn line(message: Value, done: bool) -> Value {
    json!({"model": "ollama-wire", "created_at": "2025-01-01T00:00:00Z", "message": message, "done": done})
}

fn final_line(script: &Script) -> Value {
    let (input, output, _, _) = script.usage;
    let mut last = line(json!({"role": "assistant", "content": ""}), true);
    last["done_reason"] = json!("stop");
    last["prompt_eval_count"] = json!(input);
    last["eval_count"] = json!(output);
    last["total_duration"] = json!(1_000_000);
    last
}

fn calls(script: &Script) -> Vec<Value> {
    script
        .calls
        .iter()
        .map(|c| {
            let args: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
            json!({"function": {"name": c.name, "arguments": args}})
        })
        .collect()
}

/// The whole NDJSON body.
pub fn ndjson(script: &Script) -> String {
    let mut lines = Vec::new();
    for piece in script.reasoning_pieces(3) {
        lines.push(line(
            json!({"role": "assistant", "content": "", "thinking": piece}),
            false,
        ));
    }
    for piece in script.text_pieces(4) {
        lines.push(line(json!({"role": "assistant", "content": piece}), false));
    }
    if !script.calls.is_empty() {
        lines.push(line(
            json!({"role": "assistant", "content": "", "tool_calls": calls(script)}),
            false,
        ));
    }
    lines.push(final_line(script));
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The non-streaming body.
pub fn json(script: &Script) -> Value {
    let mut body = final_line(script);
    body["message"] =
        json!({"role": "assistant", "content": script.text.clone().unwrap_or_default()});
    if let Some(reasoning) = &script.reasoning {
        body["message"]["thinking"] = json!(reasoning);
    }
    if !script.calls.is_empty() {
        body["message"]["tool_calls"] = json!(calls(script));
    }
    body
}

/// An Ollama error body.
pub fn error(message: &str) -> Value {
    json!({"error": message})
}

/// A stream whose second line is not JSON.
pub fn malformed_ndjson() -> String {
    format!(
        "{}\n{{\"message\": {{\"content\": \"x\"\n{}\n",
        line(json!({"role": "assistant", "content": "ok"}), false),
        final_line(&Script::text("ok"))
    )
}
