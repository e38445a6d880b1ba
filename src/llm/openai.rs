//! The OpenAI Chat Completions provider, used for OpenAI itself and every server that speaks its
//! dialect (vLLM, Ollama's `/v1`, llama.cpp, LM Studio, OpenRouter, the test mock).
//!
//! Owns the request body, the streamed chunk decoding (content, `reasoning_content`/`reasoning`,
//! tool-call fragments, usage) and the mapping of HTTP failures onto [`LlmError`].

use std::collections::VecDeque;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value, json};

use super::sse::{SseRead, UpstreamEvents};
use super::{
    ChatMessage, DeltaStream, LlmDelta, LlmError, LlmRequest, Provider, Role, StopReason, Usage,
};

/// Connection settings of one OpenAI-compatible endpoint.
#[derive(Clone)]
pub struct OpenAiSettings {
    /// Base URL up to and including `/v1`; `/chat/completions` is appended.
    pub base_url: String,
    pub api_key: Option<SecretString>,
    pub extra_headers: Vec<(String, String)>,
    /// Ask for the usage chunk (`stream_options.include_usage`); some servers reject it.
    pub include_usage: bool,
    /// Stream responses (SSE) or ask for one JSON body.
    pub stream: bool,
}

pub struct OpenAiProvider {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    settings: OpenAiSettings,
}

#[derive(Debug, thiserror::Error)]
pub enum OpenAiSetupError {
    #[error("invalid header {name:?}: {detail}")]
    InvalidHeader { name: String, detail: String },
}

impl OpenAiProvider {
    pub fn new(
        client: reqwest::Client,
        settings: OpenAiSettings,
    ) -> Result<Self, OpenAiSetupError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = settings
            .api_key
            .as_ref()
            .filter(|k| !k.expose_secret().is_empty())
        {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
                .map_err(|e| OpenAiSetupError::InvalidHeader {
                    name: "authorization".into(),
                    detail: e.to_string(),
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in &settings.extra_headers {
            let invalid = |detail: String| OpenAiSetupError::InvalidHeader {
                name: name.clone(),
                detail,
            };
            let header_name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|e| invalid(e.to_string()))?;
            let header_value = HeaderValue::from_str(value).map_err(|e| invalid(e.to_string()))?;
            headers.insert(header_name, header_value);
        }
        let url = format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        );
        Ok(Self {
            client,
            url,
            headers,
            settings,
        })
    }

    fn request_body(&self, request: &LlmRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(request.model));
        body.insert(
            "messages".into(),
            Value::Array(request.messages.iter().map(wire_message).collect()),
        );
        if self.settings.stream {
            body.insert("stream".into(), json!(true));
            if self.settings.include_usage {
                body.insert("stream_options".into(), json!({"include_usage": true}));
            }
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            body.insert("tool_choice".into(), json!("auto"));
        }
        let s = &request.sampling;
        let optional = [
            ("temperature", s.temperature.map(|v| json!(v))),
            ("top_p", s.top_p.map(|v| json!(v))),
            ("top_k", s.top_k.map(|v| json!(v))),
            ("frequency_penalty", s.repeat_penalty.map(|v| json!(v))),
            ("max_tokens", s.max_output_tokens.map(|v| json!(v))),
        ];
        for (key, value) in optional {
            if let Some(v) = value {
                body.insert(key.into(), v);
            }
        }
        Value::Object(body)
    }

    async fn send(&self, request: &LlmRequest) -> Result<reqwest::Response, LlmError> {
        let body = self.request_body(request);
        let call = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .json(&body)
            .send();
        let response = tokio::time::timeout(request.timeout, call)
            .await
            .map_err(|_| {
                LlmError::Timeout(format!(
                    "no response headers within {} ms",
                    request.timeout.as_millis()
                ))
            })?
            .map_err(classify_transport_error)?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let retry_after = parse_retry_after(response.headers());
        let text = tokio::time::timeout(request.timeout, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Err(classify_status(status, &text, retry_after))
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    async fn stream(&self, request: LlmRequest) -> Result<DeltaStream, LlmError> {
        let response = self.send(&request).await?;
        if !self.settings.stream {
            let text = tokio::time::timeout(request.timeout, response.text())
                .await
                .map_err(|_| LlmError::Timeout("response body".into()))?
                .map_err(classify_transport_error)?;
            let deltas = decode_completion(&text)?;
            return Ok(Box::pin(futures_util::stream::iter(
                deltas.into_iter().map(Ok),
            )));
        }
        let state = StreamState {
            events: UpstreamEvents::new(response, request.timeout),
            decoder: ChunkDecoder::default(),
            pending: VecDeque::new(),
            done: false,
        };
        Ok(Box::pin(futures_util::stream::unfold(state, next_delta)))
    }
}

struct StreamState {
    events: UpstreamEvents,
    decoder: ChunkDecoder,
    pending: VecDeque<LlmDelta>,
    done: bool,
}

async fn next_delta(mut state: StreamState) -> Option<(Result<LlmDelta, LlmError>, StreamState)> {
    loop {
        if let Some(delta) = state.pending.pop_front() {
            return Some((Ok(delta), state));
        }
        if state.done {
            return None;
        }
        let failure = match state.events.next().await {
            SseRead::Event(event) => {
                let data = event.data.unwrap_or_default();
                if data.trim() == "[DONE]" {
                    state.done = true;
                    continue;
                }
                if data.trim().is_empty() {
                    continue;
                }
                match state.decoder.decode_chunk(&data, &mut state.pending) {
                    Ok(()) => continue,
                    Err(e) => e,
                }
            }
            SseRead::End if state.decoder.finished => {
                state.done = true;
                continue;
            }
            SseRead::End => {
                LlmError::Network("stream ended before the response was complete".into())
            }
            SseRead::Idle => {
                LlmError::Timeout("no data from the upstream within the inactivity timeout".into())
            }
            SseRead::Broken(detail) => LlmError::Network(format!("stream broke: {detail}")),
        };
        state.done = true;
        return Some((Err(failure), state));
    }
}

/// Turns `chat.completion.chunk` JSON into deltas, tolerating the dialects' tool-call quirks.
#[derive(Default)]
struct ChunkDecoder {
    /// A finish_reason was seen: a later close without `[DONE]` is still a complete response.
    finished: bool,
    /// Tool-call slots as (upstream index, call id) in order; our index is the position.
    calls: Vec<(usize, Option<String>)>,
}

impl ChunkDecoder {
    fn decode_chunk(&mut self, data: &str, out: &mut VecDeque<LlmDelta>) -> Result<(), LlmError> {
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::InvalidResponse(format!(
                "stream chunk is not JSON ({e}): {}",
                truncate(data, 200)
            ))
        })?;
        if let Some(error) = chunk.get("error") {
            return Err(LlmError::Model(error_message(error)));
        }
        if let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) {
            if let Some(delta) = choice.get("delta") {
                self.decode_delta(delta, out);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finished = true;
                out.push_back(LlmDelta::Stop(StopReason::from_openai(reason)));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            out.push_back(LlmDelta::Usage(parse_usage(usage)));
        }
        Ok(())
    }

    fn decode_delta(&mut self, delta: &Value, out: &mut VecDeque<LlmDelta>) {
        for field in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta
                .get(field)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                out.push_back(LlmDelta::Reasoning(text.to_string()));
                break;
            }
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            out.push_back(LlmDelta::Text(text.to_string()));
        }
        let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) else {
            return;
        };
        for (position, call) in calls.iter().enumerate() {
            let upstream_index = call
                .get("index")
                .and_then(Value::as_u64)
                .map(|i| i as usize)
                .unwrap_or(position);
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            let index = self.slot_for(upstream_index, id.as_deref());
            let function = call.get("function");
            let name = function
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .map(str::to_string);
            let arguments = function
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            out.push_back(LlmDelta::ToolCallFragment {
                index,
                id,
                name,
                arguments,
            });
        }
    }

    /// Some servers reuse one index for every call; a new id under a known index opens a new slot.
    fn slot_for(&mut self, upstream_index: usize, id: Option<&str>) -> usize {
        let existing = self.calls.iter().rposition(|(i, _)| *i == upstream_index);
        match (existing, id) {
            (Some(slot), Some(id))
                if self.calls[slot]
                    .1
                    .as_deref()
                    .is_some_and(|known| known != id) =>
            {
                self.calls.push((upstream_index, Some(id.to_string())));
                self.calls.len() - 1
            }
            (Some(slot), id) => {
                if self.calls[slot].1.is_none() {
                    self.calls[slot].1 = id.map(str::to_string);
                }
                slot
            }
            (None, id) => {
                self.calls.push((upstream_index, id.map(str::to_string)));
                self.calls.len() - 1
            }
        }
    }
}

/// Decodes a non-streaming `chat.completion` body into the same deltas a stream would give.
fn decode_completion(text: &str) -> Result<Vec<LlmDelta>, LlmError> {
    let body: Value = serde_json::from_str(text).map_err(|e| {
        LlmError::InvalidResponse(format!(
            "response is not JSON ({e}): {}",
            truncate(text, 200)
        ))
    })?;
    if let Some(error) = body.get("error") {
        return Err(LlmError::Model(error_message(error)));
    }
    let choice = body
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| LlmError::InvalidResponse("response has no choices".into()))?;
    let message = choice.get("message").cloned().unwrap_or(Value::Null);
    let mut out = VecDeque::new();
    let mut decoder = ChunkDecoder::default();
    decoder.decode_delta(&message, &mut out);
    if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
        out.push_back(LlmDelta::Stop(StopReason::from_openai(reason)));
    }
    if let Some(usage) = body.get("usage").filter(|u| u.is_object()) {
        out.push_back(LlmDelta::Usage(parse_usage(usage)));
    }
    Ok(out.into())
}

fn wire_message(message: &ChatMessage) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut wire = Map::new();
    wire.insert("role".into(), json!(role));
    wire.insert(
        "content".into(),
        message.content.as_ref().map_or(Value::Null, |c| json!(c)),
    );
    if !message.tool_calls.is_empty() {
        let calls: Vec<Value> = message
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        wire.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &message.tool_call_id {
        wire.insert("tool_call_id".into(), json!(id));
    }
    Value::Object(wire)
}

fn parse_usage(usage: &Value) -> Usage {
    let number = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: number(usage.get("prompt_tokens")),
        output_tokens: number(usage.get("completion_tokens")),
        cached_tokens: number(
            usage
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        ),
    }
}

fn error_message(error: &Value) -> String {
    error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string())
}

fn classify_transport_error(error: reqwest::Error) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout(error.to_string())
    } else {
        LlmError::Network(error.to_string())
    }
}

/// Maps an HTTP failure onto the error classes the session loop acts on.
pub fn classify_status(status: u16, body: &str, retry_after: Option<Duration>) -> LlmError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let code = error
        .and_then(|e| e.get("code").or_else(|| e.get("type")))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = match error {
        Some(e) => format!("HTTP {status}: {}", error_message(e)),
        None => format!("HTTP {status}: {}", truncate(body, 300)),
    };
    match status {
        401 | 403 => LlmError::Auth(message),
        402 => LlmError::QuotaExceeded(message),
        429 if code == "insufficient_quota" || code == "quota_exceeded" => {
            LlmError::QuotaExceeded(message)
        }
        429 => LlmError::RateLimit {
            retry_after,
            message,
        },
        408 | 504 => LlmError::Timeout(message),
        _ => LlmError::Model(message),
    }
}

/// `Retry-After` in seconds or as an HTTP date, or OpenAI's `retry-after-ms`.
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| *v >= 0.0)
    {
        return Some(Duration::from_millis(ms as u64));
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs >= 0.0).then(|| Duration::from_millis((secs * 1000.0) as u64));
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let delta = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    delta.to_std().ok()
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&str]) -> Vec<LlmDelta> {
        let mut decoder = ChunkDecoder::default();
        let mut out = VecDeque::new();
        for chunk in chunks {
            decoder
                .decode_chunk(chunk, &mut out)
                .expect("chunk decodes");
        }
        out.into()
    }

    #[test]
    fn decodes_content_reasoning_finish_and_usage() {
        let deltas = decode_all(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning":"more"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}"#,
        ]);
        assert_eq!(
            deltas,
            vec![
                LlmDelta::Reasoning("hmm".into()),
                LlmDelta::Reasoning("more".into()),
                LlmDelta::Text("Hi".into()),
                LlmDelta::Stop(StopReason::Stop),
                LlmDelta::Usage(Usage {
                    input_tokens: 7,
                    output_tokens: 3,
                    cached_tokens: 2
                }),
            ]
        );
    }

    #[test]
    fn reused_index_with_new_id_opens_a_new_call() {
        let deltas = decode_all(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"y","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"k\":1}"}}]}}]}"#,
        ]);
        let indices: Vec<usize> = deltas
            .iter()
            .filter_map(|d| match d {
                LlmDelta::ToolCallFragment { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(indices, vec![0, 1, 1]);
    }

    #[test]
    fn missing_index_falls_back_to_position() {
        let deltas = decode_all(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}},{"id":"b","function":{"name":"y","arguments":"{}"}}]}}]}"#,
        ]);
        assert!(matches!(
            deltas[1],
            LlmDelta::ToolCallFragment { index: 1, .. }
        ));
    }

    #[test]
    fn error_chunk_and_bad_json_are_classified() {
        let mut decoder = ChunkDecoder::default();
        let mut out = VecDeque::new();
        assert!(
            matches!(decoder.decode_chunk(r#"{"error":{"message":"boom"}}"#, &mut out), Err(LlmError::Model(m)) if m == "boom")
        );
        assert!(matches!(
            decoder.decode_chunk("{not json", &mut out),
            Err(LlmError::InvalidResponse(_))
        ));
    }

    #[test]
    fn statuses_map_to_error_classes() {
        assert!(matches!(classify_status(401, "", None), LlmError::Auth(_)));
        assert!(matches!(
            classify_status(
                429,
                r#"{"error":{"code":"insufficient_quota","message":"pay"}}"#,
                None
            ),
            LlmError::QuotaExceeded(_)
        ));
        let limited = classify_status(429, "{}", Some(Duration::from_secs(2)));
        assert_eq!(
            limited,
            LlmError::RateLimit {
                retry_after: Some(Duration::from_secs(2)),
                message: "HTTP 429: {}".into()
            }
        );
        assert!(
            matches!(classify_status(503, "down", None), LlmError::Model(m) if m.contains("503"))
        );
        assert!(matches!(
            classify_status(504, "", None),
            LlmError::Timeout(_)
        ));
    }

    #[test]
    fn retry_after_accepts_seconds_and_milliseconds() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(parse_retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(
            parse_retry_after(&headers),
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn non_streaming_body_becomes_deltas() {
        let deltas = decode_completion(
            r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
        )
        .expect("decodes");
        assert_eq!(deltas[0], LlmDelta::Text("ok".into()));
        assert_eq!(deltas[1], LlmDelta::Stop(StopReason::Stop));
        assert!(matches!(
            decode_completion(r#"{"choices":[]}"#),
            Err(LlmError::InvalidResponse(_))
        ));
    }
}
