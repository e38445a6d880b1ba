//! A [`Reply`] as Gemini sends it: `streamGenerateContent?alt=sse` frames, one
//! `GenerateContentResponse` each with no end marker and `usageMetadata` on the last; or one
//! `generateContent` body.

use serde_json::{Value, json};

use super::{Frame, Reply};

fn data(payload: &Value) -> String {
    format!("data: {payload}\r\n\r\n")
}

fn candidate(parts: Vec<Value>, finish: Option<String>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(reason) = finish {
        candidate["finishReason"] = json!(reason);
    }
    json!({"candidates": [candidate], "modelVersion": "gemini-mock"})
}

fn usage(reply: &Reply) -> Value {
    let usage = reply.usage();
    json!({"promptTokenCount": usage.input, "candidatesTokenCount": usage.output,
           "cachedContentTokenCount": usage.cache_read,
           "totalTokenCount": usage.input + usage.output})
}

fn call_parts(reply: &Reply) -> Vec<Value> {
    reply
        .calls()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut part = json!({"functionCall": {"name": c.name, "args": c.arguments_json()}});
            if i == 0
                && let Some(signature) = reply.signature()
            {
                part["thoughtSignature"] = json!(signature);
            }
            part
        })
        .collect()
}

fn finish(reply: &Reply) -> Option<String> {
    Some(reply.finish_reason_or("STOP", "STOP"))
}

/// The SSE frames: thought parts, text parts, then all function calls in the last frame.
pub fn stream(reply: &Reply) -> Vec<Frame> {
    let mut frames = Vec::new();
    for piece in reply.reasoning_pieces() {
        frames.push(Frame::new(data(&candidate(
            vec![json!({"text": piece, "thought": true})],
            None,
        ))));
    }
    for piece in reply.text_pieces() {
        frames.push(Frame::text(data(&candidate(
            vec![json!({"text": piece})],
            None,
        ))));
    }
    if let Some((kind, message)) = reply.stream_error() {
        frames.push(Frame::new(data(&error(500, kind, message))));
        return frames;
    }
    let mut last = candidate(call_parts(reply), finish(reply));
    last["usageMetadata"] = usage(reply);
    frames.push(Frame::new(data(&last)));
    frames
}

/// The `generateContent` body.
pub fn whole(reply: &Reply) -> Value {
    let mut parts = Vec::new();
    if let Some(reasoning) = reply.reasoning() {
        parts.push(json!({"text": reasoning, "thought": true}));
    }
    if let Some(text) = reply.text_content() {
        parts.push(json!({"text": text}));
    }
    parts.extend(call_parts(reply));
    let mut body = candidate(parts, finish(reply));
    body["usageMetadata"] = usage(reply);
    body
}

/// A Google API error body.
pub fn error(code: u16, status: &str, message: &str) -> Value {
    json!({"error": {"code": code, "status": status, "message": message}})
}

/// A good frame, then one that is not JSON.
pub fn malformed_stream() -> Vec<Frame> {
    vec![
        Frame::new(data(&candidate(vec![json!({"text": "ok"})], None))),
        Frame::new("data: {\"candidates\": [\r\n\r\n".into()),
    ]
}
