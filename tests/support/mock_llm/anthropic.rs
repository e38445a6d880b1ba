//! A [`Reply`] as Anthropic's Messages API sends it: named SSE events (`message_start`,
//! `content_block_*`, `message_delta`, `message_stop`, `ping`, `error`) or one `message` body.

use serde_json::{Value, json};

use super::{Exchange, Frame, Reply, argument_pieces};

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn block_start(index: usize, block: Value) -> Frame {
    Frame::new(event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": block}),
    ))
}

fn block_delta(index: usize, delta: Value) -> String {
    event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn block_stop(index: usize) -> Frame {
    Frame::new(event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    ))
}

/// The SSE events of `reply`: thinking (with signature), text, then tool_use blocks with their
/// input streamed as `input_json_delta` pieces.
pub fn stream(reply: &Reply, exchange: &Exchange) -> Vec<Frame> {
    let usage = reply.usage();
    let mut frames = vec![Frame::new(event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": exchange.id, "type": "message", "role": "assistant", "content": [],
            "model": exchange.model, "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": usage.input, "output_tokens": 1,
                      "cache_read_input_tokens": usage.cache_read,
                      "cache_creation_input_tokens": usage.cache_write},
        }}),
    ))];
    let mut index = 0;
    if reply.reasoning().is_some() {
        frames.push(block_start(
            index,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ));
        for piece in reply.reasoning_pieces() {
            frames.push(Frame::new(block_delta(
                index,
                json!({"type": "thinking_delta", "thinking": piece}),
            )));
        }
        if let Some(signature) = reply.signature() {
            frames.push(Frame::new(block_delta(
                index,
                json!({"type": "signature_delta", "signature": signature}),
            )));
        }
        frames.push(block_stop(index));
        index += 1;
    }
    frames.push(Frame::new(event("ping", &json!({"type": "ping"}))));
    if reply.text_content().is_some() {
        frames.push(block_start(index, json!({"type": "text", "text": ""})));
        for piece in reply.text_pieces() {
            frames.push(Frame::text(block_delta(
                index,
                json!({"type": "text_delta", "text": piece}),
            )));
        }
        if let Some((kind, message)) = reply.stream_error() {
            frames.push(Frame::new(event("error", &error(kind, message))));
            return frames;
        }
        frames.push(block_stop(index));
        index += 1;
    }
    for call in reply.calls() {
        frames.push(block_start(
            index,
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
        ));
        for piece in argument_pieces(&call.arguments) {
            frames.push(Frame::new(block_delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            )));
        }
        frames.push(block_stop(index));
        index += 1;
    }
    frames.push(Frame::new(event(
        "message_delta",
        &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
                "usage": {"output_tokens": usage.output}}),
    )));
    frames.push(Frame::new(event(
        "message_stop",
        &json!({"type": "message_stop"}),
    )));
    frames
}

fn stop_reason(reply: &Reply) -> String {
    reply.finish_reason_or("end_turn", "tool_use")
}

/// The `message` body of `reply`.
pub fn whole(reply: &Reply, exchange: &Exchange) -> Value {
    let usage = reply.usage();
    let mut content = Vec::new();
    if let Some(reasoning) = reply.reasoning() {
        content.push(
            json!({"type": "thinking", "thinking": reasoning, "signature": reply.signature()}),
        );
    }
    if let Some(text) = reply.text_content() {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in reply.calls() {
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments_json()}));
    }
    json!({
        "id": exchange.id, "type": "message", "role": "assistant", "model": exchange.model,
        "content": content, "stop_reason": stop_reason(reply), "stop_sequence": null,
        "usage": {"input_tokens": usage.input, "output_tokens": usage.output,
                  "cache_read_input_tokens": usage.cache_read,
                  "cache_creation_input_tokens": usage.cache_write},
    })
}

/// A good stream of `"fine"` whose third event is not JSON.
pub fn malformed_stream(exchange: &Exchange) -> Vec<Frame> {
    let mut frames = stream(&Reply::text("fine"), exchange);
    frames.insert(
        2,
        Frame::new(
            "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"ind\n\n"
                .into(),
        ),
    );
    frames
}

/// An Anthropic error body (`{"type":"error","error":{…}}`), also the data of an `error` event.
pub fn error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
