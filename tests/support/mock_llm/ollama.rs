//! A [`Reply`] as Ollama's `/api/chat` sends it: one JSON object per line (`done: false` pieces,
//! then a `done: true` line with `done_reason` and token counts), or one object when not
//! streaming.

use serde_json::{Value, json};

use super::{Frame, Reply};

fn line(message: Value, done: bool) -> Value {
    json!({"model": "ollama-mock", "created_at": "2025-01-01T00:00:00Z", "message": message, "done": done})
}

fn frame(line: &Value) -> String {
    format!("{line}\n")
}

fn final_line(reply: &Reply) -> Value {
    let usage = reply.usage();
    let mut last = line(json!({"role": "assistant", "content": ""}), true);
    last["done_reason"] = json!(reply.finish_reason_or("stop", "stop"));
    last["prompt_eval_count"] = json!(usage.input);
    last["eval_count"] = json!(usage.output);
    last["total_duration"] = json!(1_000_000);
    last
}

fn calls(reply: &Reply) -> Vec<Value> {
    reply
        .calls()
        .iter()
        .map(|c| json!({"function": {"name": c.name, "arguments": c.arguments_json()}}))
        .collect()
}

/// The NDJSON lines.
pub fn stream(reply: &Reply) -> Vec<Frame> {
    let mut frames = Vec::new();
    for piece in reply.reasoning_pieces() {
        frames.push(Frame::new(frame(&line(
            json!({"role": "assistant", "content": "", "thinking": piece}),
            false,
        ))));
    }
    for piece in reply.text_pieces() {
        frames.push(Frame::text(frame(&line(
            json!({"role": "assistant", "content": piece}),
            false,
        ))));
    }
    if let Some((_, message)) = reply.stream_error() {
        frames.push(Frame::new(frame(&error(message))));
        return frames;
    }
    if !reply.calls().is_empty() {
        frames.push(Frame::new(frame(&line(
            json!({"role": "assistant", "content": "", "tool_calls": calls(reply)}),
            false,
        ))));
    }
    frames.push(Frame::new(frame(&final_line(reply))));
    frames
}

/// The non-streaming body.
pub fn whole(reply: &Reply) -> Value {
    let mut body = final_line(reply);
    body["message"] =
        json!({"role": "assistant", "content": reply.text_content().unwrap_or_default()});
    if let Some(reasoning) = reply.reasoning() {
        body["message"]["thinking"] = json!(reasoning);
    }
    if !reply.calls().is_empty() {
        body["message"]["tool_calls"] = json!(calls(reply));
    }
    body
}

/// An Ollama error body.
pub fn error(message: &str) -> Value {
    json!({"error": message})
}

/// A good line, one that is not JSON, then the final line.
pub fn malformed_stream() -> Vec<Frame> {
    let ok = Reply::text("ok");
    vec![
        Frame::new(frame(&line(
            json!({"role": "assistant", "content": "ok"}),
            false,
        ))),
        Frame::new("{\"message\": {\"content\": \"x\"\n".into()),
        Frame::new(frame(&final_line(&ok))),
    ]
}
