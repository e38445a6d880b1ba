//! A [`Reply`] as OpenAI-compatible servers send it: `chat.completion.chunk` SSE frames ending
//! with `data: [DONE]` (with the usage chunk when the request asks), or one `chat.completion`
//! body; with the dialects' reasoning field, tool-call index quirks and OpenRouter's route.

use serde_json::{Value, json};

use super::{Exchange, Frame, Reply, argument_pieces};

/// How a server numbers tool-call fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indices {
    /// `index` on every fragment; every call's head first, then argument fragments interleaved.
    Proper,
    /// No `index` at all; calls follow each other, `id` only on a call's first fragment.
    Missing,
    /// `index: 0` for every call; calls follow each other, `id` only on the first fragment.
    Shared,
}

/// Which upstream OpenRouter says served the request, and what it cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Route {
    pub provider: &'static str,
    pub model: &'static str,
    pub cost: f64,
}

pub const OPENROUTER_ROUTE: Route = Route {
    provider: "Anthropic",
    model: "anthropic/claude-sonnet-4",
    cost: 0.00042,
};

/// What a particular server does.
#[derive(Debug, Clone, Copy)]
pub struct Dialect {
    pub indices: Indices,
    /// `reasoning_content` (DeepSeek, older vLLM) or `reasoning` (OpenRouter, newer vLLM).
    pub reasoning_field: &'static str,
    /// OpenRouter: `provider`/`model` on every chunk and `usage.cost`.
    pub route: Option<Route>,
}

impl Default for Dialect {
    fn default() -> Self {
        Self {
            indices: Indices::Proper,
            reasoning_field: "reasoning_content",
            route: None,
        }
    }
}

impl Dialect {
    pub fn openrouter() -> Self {
        Self {
            route: Some(OPENROUTER_ROUTE),
            ..Self::default()
        }
    }
}

fn data(payload: impl std::fmt::Display) -> String {
    format!("data: {payload}\n\n")
}

fn envelope(reply: &Reply, exchange: &Exchange, object: &str) -> Value {
    let mut body = json!({
        "id": exchange.id,
        "object": object,
        "created": exchange.created,
        "model": exchange.model,
    });
    if let Some(route) = reply.dialect().route {
        body["provider"] = json!(route.provider);
        body["model"] = json!(route.model);
    }
    body
}

fn chunk(reply: &Reply, exchange: &Exchange, delta: Value, finish: Option<String>) -> String {
    let mut chunk = envelope(reply, exchange, "chat.completion.chunk");
    chunk["choices"] = json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
    data(chunk)
}

fn usage(reply: &Reply) -> Value {
    let usage = reply.usage();
    let mut body = json!({
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.input + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
    });
    if usage.cache_write > 0 {
        body["prompt_tokens_details"]["cache_write_tokens"] = json!(usage.cache_write);
    }
    if let Some(route) = reply.dialect().route {
        body["cost"] = json!(route.cost);
    }
    body
}

fn tool_fragments(reply: &Reply) -> Vec<Value> {
    let indices = reply.dialect().indices;
    let with_index = |index: usize, mut part: Value| {
        match indices {
            Indices::Proper => part["index"] = json!(index),
            Indices::Shared => part["index"] = json!(0),
            Indices::Missing => {}
        }
        json!({"tool_calls": [part]})
    };
    let calls = reply.calls();
    let heads: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            with_index(
                i,
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}),
            )
        })
        .collect();
    let args: Vec<Vec<Value>> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            argument_pieces(&c.arguments)
                .into_iter()
                .map(|piece| with_index(i, json!({"function": {"arguments": piece}})))
                .collect()
        })
        .collect();
    if indices == Indices::Proper {
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

/// The SSE frames of `reply`.
pub fn stream(reply: &Reply, exchange: &Exchange) -> Vec<Frame> {
    let field = reply.dialect().reasoning_field;
    let mut frames = vec![Frame::new(chunk(
        reply,
        exchange,
        json!({"role": "assistant", "content": ""}),
        None,
    ))];
    for piece in reply.reasoning_pieces() {
        frames.push(Frame::new(chunk(
            reply,
            exchange,
            json!({field: piece}),
            None,
        )));
    }
    for piece in reply.text_pieces() {
        frames.push(Frame::text(chunk(
            reply,
            exchange,
            json!({"content": piece}),
            None,
        )));
    }
    if let Some((kind, message)) = reply.stream_error() {
        frames.push(Frame::new(data(error(kind, None, message))));
        return frames;
    }
    for delta in tool_fragments(reply) {
        frames.push(Frame::new(chunk(reply, exchange, delta, None)));
    }
    frames.push(Frame::new(chunk(
        reply,
        exchange,
        json!({}),
        Some(reply.finish_reason()),
    )));
    if exchange.include_usage {
        let mut last = envelope(reply, exchange, "chat.completion.chunk");
        last["choices"] = json!([]);
        last["usage"] = usage(reply);
        frames.push(Frame::new(data(last)));
    }
    frames.push(Frame::new(data("[DONE]")));
    frames
}

/// The `chat.completion` body of `reply`.
pub fn whole(reply: &Reply, exchange: &Exchange) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text_content()});
    if let Some(reasoning) = reply.reasoning() {
        message[reply.dialect().reasoning_field] = json!(reasoning);
    }
    if !reply.calls().is_empty() {
        message["tool_calls"] = reply
            .calls()
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
    }
    let mut body = envelope(reply, exchange, "chat.completion");
    body["choices"] =
        json!([{"index": 0, "message": message, "finish_reason": reply.finish_reason()}]);
    body["usage"] = usage(reply);
    body
}

/// The role chunk, a `data: {not json` frame, then `[DONE]`.
pub fn malformed_stream(exchange: &Exchange) -> Vec<Frame> {
    let reply = Reply::empty();
    vec![
        Frame::new(chunk(
            &reply,
            exchange,
            json!({"role": "assistant", "content": ""}),
            None,
        )),
        Frame::new(data("{not json")),
        Frame::new(data("[DONE]")),
    ]
}

/// An OpenAI error body.
pub fn error(kind: &str, code: Option<&str>, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}
