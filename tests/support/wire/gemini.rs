//! Gemini responses as `streamGenerateContent?alt=sse` sends them: one `GenerateContentResponse`
//! per `data:` frame, no end marker, `usageMetadata` on the last; or one `generateContent` body.

use serde_json::{Value, json};

use super::Script;

fn frame(data: &Value) -> String {
    format!("data: {data}\r\n\r\n")
}

fn candidate(parts: Vec<Value>, finish: Option<&str>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(reason) = finish {
        candidate["finishReason"] = json!(reason);
    }
    json!({"candidates": [candidate], "modelVersion": "gemini-wire"})
}

fn usage(script: &Script) -> Value {
    let (input, output, read, _) = script.usage;
    json!({"promptTokenCount": input, "candidatesTokenCount": output,
           "cachedContentTokenCount": read, "totalTokenCount": input + output})
}

fn call_parts(script: &Script) -> Vec<Value> {
    script
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let args: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
            let mut part = json!({"functionCall": {"name": c.name, "args": args}});
            if i == 0
                && let Some(signature) = &script.signature
            {
                part["thoughtSignature"] = json!(signature);
            }
            part
        })
        .collect()
}

/// The whole SSE body: thought parts, text parts, then all function calls in the last frame.
pub fn sse(script: &Script) -> String {
    let mut out = String::new();
    for piece in script.reasoning_pieces(3) {
        out += &frame(&candidate(
            vec![json!({"text": piece, "thought": true})],
            None,
        ));
    }
    for piece in script.text_pieces(4) {
        out += &frame(&candidate(vec![json!({"text": piece})], None));
    }
    let mut last = candidate(call_parts(script), Some("STOP"));
    last["usageMetadata"] = usage(script);
    out + &frame(&last)
}

/// The non-streaming `generateContent` body.
pub fn json(script: &Script) -> Value {
    let mut parts = Vec::new();
    if let Some(reasoning) = &script.reasoning {
        parts.push(json!({"text": reasoning, "thought": true}));
    }
    if let Some(text) = &script.text {
        parts.push(json!({"text": text}));
    }
    parts.extend(call_parts(script));
    let mut body = candidate(parts, Some("STOP"));
    body["usageMetadata"] = usage(script);
    body
}

/// A Google API error body.
pub fn error(code: u16, status: &str, message: &str) -> Value {
    json!({"error": {"code": code, "status": status, "message": message}})
}

/// A stream whose second frame is not JSON.
pub fn malformed_sse() -> String {
    frame(&candidate(vec![json!({"text": "ok"})], None)) + "data: {\"candidates\": [\r\n\r\n"
}
