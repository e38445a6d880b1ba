//! Chat Completions responses as the OpenAI-compatible servers send them: `data: {chunk}` SSE
//! frames ending with `data: [DONE]`, the usage chunk, OpenRouter's extra fields, and the
//! tool-call index quirks of the dialects.

use serde_json::{Value, json};

use super::Script;

/// How a server numbers tool-call fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indices {
    /// `index` on every fragment; argument fragments of parallel calls interleave.
    Proper,
    /// No `index` at all; calls follow each other, `id` only on a call's first fragment.
    Missing,
    /// `index: 0` for every call; calls follow each other, `id` only on the first fragment.
    Shared,
}

/// What a particular server does.
#[derive(Debug, Clone, Copy)]
pub struct Dialect {
    pub indices: Indices,
    /// `reasoning_content` (DeepSeek, older vLLM) or `reasoning` (OpenRouter, newer vLLM).
    pub reasoning_field: &'static str,
    pub usage_chunk: bool,
    /// OpenRouter: `provider`/`model` on every chunk and `usage.cost`.
    pub openrouter: bool,
}

impl Default for Dialect {
    fn default() -> Self {
        Self {
            indices: Indices::Proper,
            reasoning_field: "reasoning_content",
            usage_chunk: true,
            openrouter: false,
        }
    }
}

pub const ROUTED_PROVIDER: &str = "Anthropic";
pub const ROUTED_MODEL: &str = "anthropic/claude-sonnet-4";
pub const ROUTED_COST: f64 = 0.00042;

fn frame(data: &Value) -> String {
    format!("data: {data}\n\n")
}

fn chunk(dialect: &Dialect, delta: Value, finish: Option<&str>) -> Value {
    let mut chunk = json!({
        "id": "chatcmpl-wire",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "served-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    if dialect.openrouter {
        chunk["provider"] = json!(ROUTED_PROVIDER);
        chunk["model"] = json!(ROUTED_MODEL);
    }
    chunk
}

fn usage(script: &Script, dialect: &Dialect) -> Value {
    let (input, output, read, write) = script.usage;
    let mut usage = json!({
        "prompt_tokens": input,
        "completion_tokens": output,
        "total_tokens": input + output,
        "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
    });
    if dialect.openrouter {
        usage["cost"] = json!(ROUTED_COST);
    }
    usage
}

fn tool_fragments(script: &Script, dialect: &Dialect) -> Vec<Value> {
    let with_index = |index: usize, mut part: Value| {
        match dialect.indices {
            Indices::Proper => part["index"] = json!(index),
            Indices::Shared => part["index"] = json!(0),
            Indices::Missing => {}
        }
        json!({"tool_calls": [part]})
    };
    let heads: Vec<Value> = script
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            with_index(
                i,
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}),
            )
        })
        .collect();
    let args: Vec<Vec<Value>> = script
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            super::pieces(&c.arguments, 3)
                .into_iter()
                .map(|piece| with_index(i, json!({"function": {"arguments": piece}})))
                .collect()
        })
        .collect();
    if dialect.indices == Indices::Proper {
        // Every head first, then the argument pieces interleaved call by call.
        let mut out = heads;
        let longest = args.iter().map(Vec::len).max().unwrap_or(0);
        for round in 0..longest {
            out.extend(args.iter().filter_map(|a| a.get(round).cloned()));
        }
        return out;
    }
    heads
        .into_iter()
        .zip(args)
        .flat_map(|(head, args)| std::iter::once(head).chain(args))
        .collect()
}

/// The whole SSE body for `script`.
pub fn sse(script: &Script, dialect: &Dialect) -> String {
    let mut out = frame(&chunk(
        dialect,
        json!({"role": "assistant", "content": ""}),
        None,
    ));
    for piece in script.reasoning_pieces(3) {
        out += &frame(&chunk(
            dialect,
            json!({dialect.reasoning_field: piece}),
            None,
        ));
    }
    for piece in script.text_pieces(4) {
        out += &frame(&chunk(dialect, json!({"content": piece}), None));
    }
    for delta in tool_fragments(script, dialect) {
        out += &frame(&chunk(dialect, delta, None));
    }
    let finish = if script.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out += &frame(&chunk(dialect, json!({}), Some(finish)));
    if dialect.usage_chunk {
        let mut last = chunk(dialect, json!({}), None);
        last["choices"] = json!([]);
        last["usage"] = usage(script, dialect);
        out += &frame(&last);
    }
    out + "data: [DONE]\n\n"
}

/// The non-streaming `chat.completion` body for `script`.
pub fn json(script: &Script, dialect: &Dialect) -> Value {
    let mut message = json!({"role": "assistant", "content": script.text});
    if let Some(reasoning) = &script.reasoning {
        message[dialect.reasoning_field] = json!(reasoning);
    }
    if !script.calls.is_empty() {
        message["tool_calls"] = script
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
    }
    let finish = if script.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let mut body = json!({
        "id": "chatcmpl-wire",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage(script, dialect),
    });
    if dialect.openrouter {
        body["provider"] = json!(ROUTED_PROVIDER);
        body["model"] = json!(ROUTED_MODEL);
    }
    body
}

/// A stream whose second frame is not JSON.
pub fn malformed_sse() -> String {
    let dialect = Dialect::default();
    frame(&chunk(
        &dialect,
        json!({"role": "assistant", "content": "ok"}),
        None,
    )) + "data: {\"choices\": [{\"delta\": {\"content\": \"x\"\n\n"
        + "data: [DONE]\n\n"
}

/// An OpenAI error body.
pub fn error(kind: &str, code: Option<&str>, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}
