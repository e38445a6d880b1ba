//! Anthropic compatibility: `POST /v1/messages` runs the agent named by `model`, answering in the
//! Messages API shape or streaming its events (`message_start`, `content_block_start/delta/stop`
//! for thinking and text, `message_delta` with `stop_reason` and usage, `message_stop`). Errors
//! use Anthropic's `{"type": "error", "error": {"type", "message"}}` so its SDK maps them.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, ApiJson};
use super::sse::{sse_response, with_run_headers};
use crate::agent::events::AgentEvent;
use crate::agent::result::{RunSummary, UsageTotals};
use crate::agent::{AgentResult, ExitReason, ReportStatus, SamplingParams};
use crate::llm::{ChatMessage, Role};
use crate::runtime::{RunHandle, RunSubmission, Runtime};

#[derive(Debug, Deserialize)]
pub struct MessagesRequest {
    pub model: String,
    pub messages: Vec<AnthropicMessage>,
    #[serde(default)]
    pub system: Option<TextOrBlocks>,
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub stream: Option<bool>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
}

#[derive(Debug, Deserialize)]
pub struct AnthropicMessage {
    pub role: String,
    pub content: TextOrBlocks,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum TextOrBlocks {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

#[derive(Debug, Deserialize)]
pub struct ContentBlock {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

/// An [`ApiError`] rendered in Anthropic's error shape.
pub struct AnthropicError(pub ApiError);

impl AnthropicError {
    fn body(&self) -> Value {
        let kind = match self.0.status.as_u16() {
            400 | 405 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 => "overloaded_error",
            _ => "api_error",
        };
        json!({"type": "error", "error": {"type": kind, "message": self.0.message}})
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        let status = self.0.status;
        let mut response = (status, axum::Json(self.body())).into_response();
        if let Some(secs) = self.0.retry_after_secs {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl From<ApiError> for AnthropicError {
    fn from(error: ApiError) -> Self {
        Self(error)
    }
}

/// `GET /v1/models` for clients that send `anthropic-version`.
pub fn list_models(runtime: &Runtime) -> Response {
    let created = chrono::DateTime::from_timestamp(runtime.started_at(), 0)
        .unwrap_or_default()
        .to_rfc3339();
    let data: Vec<Value> = runtime
        .agents()
        .iter()
        .map(|agent| {
            let display = if agent.description.is_empty() { agent.name.clone() } else { agent.description.clone() };
            json!({"type": "model", "id": agent.name, "display_name": display, "created_at": created})
        })
        .collect();
    let first = data.first().map(|m| m["id"].clone()).unwrap_or(Value::Null);
    let last = data.last().map(|m| m["id"].clone()).unwrap_or(Value::Null);
    axum::Json(json!({"data": data, "has_more": false, "first_id": first, "last_id": last}))
        .into_response()
}

pub async fn messages(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    body: Result<ApiJson<MessagesRequest>, ApiError>,
) -> Result<Response, AnthropicError> {
    let ApiJson(body) = body?;
    let agent = runtime
        .agents()
        .get(&body.model)
        .ok_or_else(|| ApiError::unknown_model(&body.model))?;
    caller.check_agent(&agent.name)?;
    if body.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(ApiError::invalid_request(
            "tool_use_not_supported: agents use their own tools; do not send `tools`",
        )
        .with_param("tools")
        .into());
    }
    let (history, prompt) = split_messages(&body)?;
    let mut submission = RunSubmission::new(agent, prompt);
    submission.history = history;
    submission.overrides = SamplingParams {
        temperature: body.temperature,
        top_p: body.top_p,
        max_output_tokens: body.max_tokens,
        ..SamplingParams::default()
    };
    submission.user_id = caller.user_id.clone();
    submission.key = caller.limited_key.clone();
    let handle = runtime
        .start_run(submission)
        .await
        .map_err(ApiError::from)?;
    let run_id = handle.run_id.clone();
    let reply = Reply {
        id: format!("msg_{}", run_id.replace('-', "")),
        model: body.model.clone(),
    };
    let response = if body.stream.unwrap_or(false) {
        sse_response(&runtime, stream_events(handle, reply))
    } else {
        complete(handle, reply)
            .await
            .unwrap_or_else(IntoResponse::into_response)
    };
    Ok(with_run_headers(response, &run_id, None))
}

fn split_messages(body: &MessagesRequest) -> Result<(Vec<ChatMessage>, String), ApiError> {
    let Some((last, earlier)) = body.messages.split_last() else {
        return Err(
            ApiError::invalid_request("`messages` must not be empty").with_param("messages")
        );
    };
    let mut history = Vec::new();
    if let Some(system) = &body.system {
        let text = text_of(system, "system")?;
        if !text.trim().is_empty() {
            history.push(ChatMessage::system(text));
        }
    }
    for (index, message) in earlier.iter().enumerate() {
        let role = match message.role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(ApiError::invalid_request(format!(
                    "Unknown role {other:?}: use user or assistant"
                ))
                .with_param(format!("messages[{index}].role")));
            }
        };
        history.push(ChatMessage::new(
            role,
            text_of(&message.content, &format!("messages[{index}].content"))?,
        ));
    }
    let last_index = earlier.len();
    let prompt = text_of(&last.content, &format!("messages[{last_index}].content"))?;
    if last.role != "user" || prompt.trim().is_empty() {
        return Err(
            ApiError::invalid_request("The last message must be a user message with text")
                .with_param(format!("messages[{last_index}]")),
        );
    }
    Ok((history, prompt))
}

/// Text of a string or of text blocks; earlier thinking blocks are skipped, tool blocks refused.
fn text_of(content: &TextOrBlocks, param: &str) -> Result<String, ApiError> {
    let blocks = match content {
        TextOrBlocks::Text(text) => return Ok(text.clone()),
        TextOrBlocks::Blocks(blocks) => blocks,
    };
    let mut parts = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        match (block.kind.as_str(), &block.text) {
            ("text", Some(text)) => parts.push(text.as_str()),
            ("thinking" | "redacted_thinking", _) => {}
            ("tool_use" | "tool_result", _) => {
                return Err(ApiError::invalid_request(
                    "tool_use_not_supported: agents run their own tools",
                )
                .with_param(format!("{param}[{index}]")));
            }
            (kind, _) => {
                return Err(ApiError::invalid_request(format!(
                    "Content block type {kind:?} is not supported; send text"
                ))
                .with_param(format!("{param}[{index}]")));
            }
        }
    }
    Ok(parts.join("\n"))
}

struct Reply {
    id: String,
    model: String,
}

fn stop_reason(summary: &RunSummary) -> Option<&'static str> {
    match summary.exit_reason {
        ExitReason::MaxTurns | ExitReason::ContextLimit => Some("max_tokens"),
        _ if summary.success => Some("end_turn"),
        _ => None,
    }
}

fn wire_usage(usage: &UsageTotals) -> Value {
    json!({"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, "cache_read_input_tokens": usage.cached_tokens})
}

fn event(kind: &str, data: Value) -> Result<Event, Infallible> {
    Ok(Event::default().event(kind).data(data.to_string()))
}

/// The block being streamed: Anthropic allows one open block at a time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Thinking,
    Text,
}

fn stream_events(handle: RunHandle, reply: Reply) -> impl Stream<Item = Result<Event, Infallible>> {
    async_stream::stream! {
        let _cancel_on_drop = handle.abort_on_drop();
        let RunHandle { mut events, draining, .. } = handle;
        yield event("message_start", json!({"type": "message_start", "message": {
            "id": reply.id, "type": "message", "role": "assistant", "model": reply.model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 0, "output_tokens": 0}}}));
        let mut open: Option<(Block, usize)> = None;
        let mut next_index = 0usize;
        let mut failure_report: Option<String> = None;
        let mut wrote_text = false;
        while let Some(agent_event) = events.recv().await {
            let (block, text) = match agent_event {
                AgentEvent::Thinking(delta) => (Block::Thinking, delta.text),
                AgentEvent::Output(delta) => (Block::Text, delta.text),
                AgentEvent::FinalReport(report) if report.status == ReportStatus::Failure => {
                    failure_report = report.content;
                    continue;
                }
                AgentEvent::RunFinished(summary) => {
                    if let (Some(text), false) = (failure_report.take(), wrote_text) {
                        for frame in switch_block(&mut open, &mut next_index, Block::Text) { yield frame; }
                        yield delta_frame(open_index(open), Block::Text, &text);
                    }
                    if let Some((_, index)) = open.take() {
                        yield event("content_block_stop", json!({"type": "content_block_stop", "index": index}));
                    }
                    match stop_reason(&summary) {
                        Some(reason) => {
                            yield event("message_delta", json!({"type": "message_delta",
                                "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": wire_usage(&summary.usage)}));
                            yield event("message_stop", json!({"type": "message_stop"}));
                        }
                        None => yield event("error", AnthropicError(ApiError::from_run_ending(summary.exit_reason, summary.error.as_deref(), draining.is_cancelled())).body()),
                    }
                    return;
                }
                _ => continue,
            };
            for frame in switch_block(&mut open, &mut next_index, block) { yield frame; }
            wrote_text |= block == Block::Text;
            yield delta_frame(open_index(open), block, &text);
        }
        yield event("error", AnthropicError(ApiError::internal()).body());
    }
}

fn open_index(open: Option<(Block, usize)>) -> usize {
    open.map_or(0, |(_, index)| index)
}

/// Closes the open block if it is of another kind and opens `wanted`; returns the frames.
fn switch_block(
    open: &mut Option<(Block, usize)>,
    next_index: &mut usize,
    wanted: Block,
) -> Vec<Result<Event, Infallible>> {
    if matches!(open, Some((block, _)) if *block == wanted) {
        return Vec::new();
    }
    let mut frames = Vec::new();
    if let Some((_, index)) = open.take() {
        frames.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    let index = *next_index;
    *next_index += 1;
    let block = match wanted {
        Block::Thinking => json!({"type": "thinking", "thinking": ""}),
        Block::Text => json!({"type": "text", "text": ""}),
    };
    frames.push(event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block}),
    ));
    *open = Some((wanted, index));
    frames
}

/// A `content_block_delta` event, serialised straight from the borrowed text: one per streamed
/// token, so no JSON tree is built for it.
fn delta_frame(index: usize, block: Block, text: &str) -> Result<Event, Infallible> {
    let delta = match block {
        Block::Thinking => DeltaBody::ThinkingDelta { thinking: text },
        Block::Text => DeltaBody::TextDelta { text },
    };
    let frame = BlockDelta {
        kind: "content_block_delta",
        index,
        delta,
    };
    // Borrowed strings and numbers only: serialisation cannot fail.
    let data = serde_json::to_string(&frame).unwrap_or_default();
    Ok(Event::default().event("content_block_delta").data(data))
}

#[derive(Serialize)]
struct BlockDelta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: usize,
    delta: DeltaBody<'a>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum DeltaBody<'a> {
    TextDelta { text: &'a str },
    ThinkingDelta { thinking: &'a str },
}

async fn complete(handle: RunHandle, reply: Reply) -> Result<Response, AnthropicError> {
    let _cancel_on_drop = handle.abort_on_drop();
    let RunHandle {
        draining, result, ..
    } = handle;
    let result: AgentResult = result.await.map_err(|_| ApiError::internal())?;
    let summary = result.summary();
    let reason = stop_reason(&summary).ok_or_else(|| {
        ApiError::from_run_ending(
            result.exit_reason,
            result.error.as_deref(),
            draining.is_cancelled(),
        )
    })?;
    let thinking: Vec<&str> = result
        .conversation
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .filter_map(|m| m.reasoning.as_deref())
        .collect();
    let mut content = Vec::new();
    if !thinking.is_empty() {
        content.push(json!({"type": "thinking", "thinking": thinking.join("\n\n")}));
    }
    content.push(json!({"type": "text", "text": result.answer_text()}));
    let body = json!({"id": reply.id, "type": "message", "role": "assistant", "model": reply.model, "content": content,
        "stop_reason": reason, "stop_sequence": null, "usage": wire_usage(&result.usage)});
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_deltas_have_anthropics_shape() {
        let text = BlockDelta {
            kind: "content_block_delta",
            index: 1,
            delta: DeltaBody::TextDelta {
                text: "to\"ken ✓"
            },
        };
        assert_eq!(
            serde_json::to_value(&text).expect("json"),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "to\"ken ✓"}})
        );
        let thinking = BlockDelta {
            kind: "content_block_delta",
            index: 0,
            delta: DeltaBody::ThinkingDelta { thinking: "hm" },
        };
        assert_eq!(
            serde_json::to_value(&thinking).expect("json")["delta"],
            json!({"type": "thinking_delta", "thinking": "hm"})
        );
    }
}
