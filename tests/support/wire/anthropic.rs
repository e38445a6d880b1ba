//! Messages API responses as Anthropic sends them: named SSE events (`message_start`,
//! `content_block_*`, `message_delta`, `message_stop`, `ping`, `error`) or one `message` body.

use serde_json::{Value, json};

use super::Script;

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The whole SSE body for `script`: thinking (with signature), text, then tool_use blocks with
/// their input streamed as `input_json_delta` pieces.
pub fn sse(script: &Script) -> String {
    let (input, output, read, write) = script.usage;
    let mut out = event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": "msg_wire", "type": "message", "role": "assistant", "content": [],
            "model": "claude-wire", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 1,
                      "cache_read_input_tokens": read, "cache_creation_input_tokens": write},
        }}),
    );
    let mut index = 0;
    if script.reasoning.is_some() {
        out += &block_start(
            index,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        );
        for piece in script.reasoning_pieces(3) {
            out += &block_delta(index, json!({"type": "thinking_delta", "thinking": piece}));
        }
        if let Some(signature) = &script.signature {
            out += &block_delta(
                index,
                json!({"type": "signature_delta", "signature": signature}),
            );
        }
        out += &block_stop(index);
        index += 1;
    }
    out += &event("ping", &json!({"type": "ping"}));
    if script.text.is_some() {
        out += &block_start(index, json!({"type": "text", "text": ""}));
        for piece in script.text_pieces(4) {
            out += &block_delta(index, json!({"type": "text_delta", "text": piece}));
        }
        out += &block_stop(index);
        index += 1;
    }
    for call in &script.calls {
        out += &block_start(
            index,
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
        );
        for piece in super::pieces(&call.arguments, 3) {
            out += &block_delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            );
        }
        out += &block_stop(index);
        index += 1;
    }
    out += &event(
        "message_delta",
        &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(script), "stop_sequence": null},
                "usage": {"output_tokens": output}}),
    );
    out + &event("message_stop", &json!({"type": "message_stop"}))
}

fn stop_reason(script: &Script) -> &'static str {
    if script.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

fn block_start(index: usize, block: Value) -> String {
    event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

fn block_delta(index: usize, delta: Value) -> String {
    event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn block_stop(index: usize) -> String {
    event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    )
}

/// The non-streaming `message` body for `script`.
pub fn json(script: &Script) -> Value {
    let (input, output, read, write) = script.usage;
    let mut content = Vec::new();
    if let Some(reasoning) = &script.reasoning {
        content.push(
            json!({"type": "thinking", "thinking": reasoning, "signature": script.signature}),
        );
    }
    if let Some(text) = &script.text {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in &script.calls {
        let input: Value = serde_json::from_str(&call.arguments).unwrap_or(json!({}));
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    json!({
        "id": "msg_wire", "type": "message", "role": "assistant", "model": "claude-wire",
        "content": content, "stop_reason": stop_reason(script), "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": output,
                  "cache_read_input_tokens": read, "cache_creation_input_tokens": write},
    })
}

/// An Anthropic error body (`{"type":"error","error":{…}}`), also the data of an `error` event.
pub fn error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// A stream that starts well, then reports `error` mid-way (e.g. `overloaded_error`).
pub fn sse_with_error_event(kind: &str, message: &str) -> String {
    let full = sse(&Script::text("partial answer"));
    let cut = full.find("event: content_block_stop").unwrap_or(full.len());
    format!("{}{}", &full[..cut], event("error", &error(kind, message)))
}

/// A stream whose third event is not JSON.
pub fn malformed_sse() -> String {
    let full = sse(&Script::text("fine"));
    let mut events: Vec<&str> = full.split_inclusive("\n\n").collect();
    events.insert(
        2,
        "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"ind\n\n",
    );
    events.concat()
}
