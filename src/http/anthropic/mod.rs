//! Anthropic compatibility: `POST /v1/messages` runs the agent named by `model`, answering in the
//! Messages API shape or streaming its events (`message_start`, `content_block_start/delta/stop`
//! for thinking and text, `message_delta` with `stop_reason` and usage, `message_stop`). Errors
//! use Anthropic's `{"type": "error", "error": {"type", "message"}}` so its SDK maps them.
//! This module holds the handler and the translator from agent events to Anthropic's events;
//! [`request`] turns a request into a run's input, [`wire`] holds the bodies.

mod attachments;
mod request;
mod translator;
pub mod wire;

use std::sync::Arc;

use super::auth::Caller;
use super::error::{ApiError, ApiJson, ErrorBody};
use super::shared::client_tools::{self, ToolFields};
use super::shared::drive::{self, Events, OnLeave};
use super::sse::with_run_headers;
use super::wire::AssistantRole;
use crate::agent::{AgentResult, SamplingParams};
use crate::config::AgentSpec;
use crate::llm::Role;
use crate::runtime::{RunHandle, Runtime};
use axum::extract::{Extension, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use request::{client_tools_of, split_messages, tool_result_param};
use serde_json::json;
use translator::{MessagesTranslator, Reply, stop_reason};
use wire::{
    AnthropicErrorBody, AnthropicErrorDetail, AnthropicModel, AnthropicModelList, ContentBlock,
    ErrorType, Message, MessageType, MessagesRequest, ModelType, TokenCount,
};

/// Renders every error answered under `/v1/messages` — by the handlers or by the layers around
/// them (authentication, limits, unknown routes) — in Anthropic's shape, so its SDK raises the
/// matching exception class.
pub async fn errors_in_anthropic_shape(request: Request, next: Next) -> Response {
    let anthropic = request.uri().path().starts_with("/v1/messages");
    let mut response = next.run(request).await;
    if anthropic && let Some(error) = response.extensions_mut().remove::<ApiError>() {
        return reshaped(response, AnthropicError(error).into_response());
    }
    response
}

/// `shaped`'s status, headers and body, with the headers of `original` it does not set: what the
/// layers inside added (`Allow` on a 405, the request id, the run's ids) is kept.
fn reshaped(original: Response, shaped: Response) -> Response {
    let (mut parts, _) = original.into_parts();
    let (shaped_parts, body) = shaped.into_parts();
    parts.status = shaped_parts.status;
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    for name in shaped_parts.headers.keys() {
        parts.headers.remove(name);
    }
    parts.headers.extend(shaped_parts.headers);
    Response::from_parts(parts, body)
}

/// An [`ApiError`] rendered in Anthropic's error shape.
pub struct AnthropicError(pub ApiError);

impl AnthropicError {
    fn body(&self) -> AnthropicErrorBody<'_> {
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
        AnthropicErrorBody {
            kind: ErrorType::Error,
            error: AnthropicErrorDetail {
                kind,
                message: &self.0.message,
            },
        }
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
pub fn model_list(runtime: &Runtime, agents: &[Arc<AgentSpec>]) -> AnthropicModelList {
    let data: Vec<AnthropicModel> = agents
        .iter()
        .map(|agent| model_of(runtime, agent))
        .collect();
    AnthropicModelList {
        first_id: data.first().map(|m| m.id.clone()),
        last_id: data.last().map(|m| m.id.clone()),
        data,
        has_more: false,
    }
}

/// One agent in Anthropic's model shape.
pub fn model_of(runtime: &Runtime, agent: &AgentSpec) -> AnthropicModel {
    let created = chrono::DateTime::from_timestamp(runtime.started_at(), 0)
        .unwrap_or_default()
        .to_rfc3339();
    AnthropicModel {
        kind: ModelType::Model,
        id: agent.name.clone(),
        display_name: if agent.description.is_empty() {
            agent.name.clone()
        } else {
            agent.description.clone()
        },
        created_at: created,
    }
}

#[utoipa::path(
    post,
    path = "/v1/messages",
    tag = "anthropic",
    summary = "Anthropic Messages; `model` names an agent",
    request_body = MessagesRequest,
    responses(
        (status = 200, description = "A `message`, or with `stream: true` events each holding a `StreamEvent` (its `type` is the SSE event name; a failure after the stream started is an `error` event holding an `AnthropicErrorBody`)",
            content(
                (Message = "application/json"),
                (crate::http::wire::ServerSentEvent = "text/event-stream"),
            )),
        (status = 401, description = "Missing or invalid API key (answered before the route, in the common error shape)", body = ErrorBody),
        AnthropicErrorBody,
    ),
)]
pub async fn messages(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    body: Result<ApiJson<MessagesRequest>, ApiError>,
) -> Result<Response, AnthropicError> {
    let ApiJson(body) = body?;
    let agent = caller.model_agent(&runtime, &body.model)?;
    let mut stored = attachments::of_messages(&runtime, &caller, &agent, &body.messages).await?;
    let last = body.messages.len().saturating_sub(1);
    let prompt_attachments = stored.remove(&last).unwrap_or_default();
    let (history, prompt) = split_messages(&body, &mut stored)?;
    let max_output_tokens = body
        .max_tokens
        .map(|asked| asked.min(output_ceiling(&runtime, &agent)));
    let mut submission = caller.submission(agent, prompt);
    submission.history = history;
    submission.attachments = prompt_attachments;
    submission.overrides = SamplingParams {
        temperature: body.temperature,
        top_p: body.top_p,
        max_output_tokens,
        ..SamplingParams::default()
    };
    submission.client_tools = client_tools_of(&body)?;
    let handle = runtime.start_run(submission).await.map_err(|error| {
        client_tools::start_error(error, &ANTHROPIC_TOOL_FIELDS, |call_id| {
            tool_result_param(&body, call_id)
        })
    })?;
    let run_id = handle.run_id.clone();
    let reply = Reply {
        id: format!("msg_{}", run_id.replace('-', "")),
        model: body.model.clone(),
    };
    let response = if body.stream.unwrap_or(false) {
        let on_leave = OnLeave::Cancel(handle.abort_on_drop());
        let translator = MessagesTranslator::new(reply);
        drive::stream(&runtime, Events::live(handle), translator, on_leave)
    } else {
        complete(handle, reply)
            .await
            .unwrap_or_else(IntoResponse::into_response)
    };
    Ok(with_run_headers(response, &run_id, None))
}

/// Anthropic's token count: the input tokens a `messages` request would send on its first model
/// call — the agent's system prompt and tools included — with its model's tokenizer (exact for
/// OpenAI models, an estimate for others). Images and documents count as the vendor bills them
/// (an image by its size); they are checked as for `messages` and never stored.
#[utoipa::path(
    post,
    path = "/v1/messages/count_tokens",
    tag = "anthropic",
    summary = "Count the input tokens of a Messages request",
    request_body = MessagesRequest,
    responses(
        (status = 200, description = "The count", body = TokenCount),
        AnthropicErrorBody,
    ),
)]
pub async fn count_tokens(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    body: Result<ApiJson<MessagesRequest>, ApiError>,
) -> Result<axum::Json<TokenCount>, AnthropicError> {
    let ApiJson(body) = body?;
    let agent = caller.model_agent(&runtime, &body.model)?;
    let mut measured =
        attachments::measured_of_messages(&runtime, &caller, &agent, &body.messages).await?;
    let last = body.messages.len().saturating_sub(1);
    let prompt_attachments = measured.remove(&last).unwrap_or_default();
    let (history, prompt) = split_messages(&body, &mut measured)?;
    let input_tokens = runtime
        .count_input_tokens(&agent, history, prompt, prompt_attachments)
        .await;
    Ok(axum::Json(TokenCount { input_tokens }))
}

/// The share of an agent's smallest context window a request's `max_tokens` may reserve for
/// the answer when the agent sets no output limit of its own.
const OUTPUT_SHARE_OF_WINDOW: u64 = 4;

/// The most output tokens a request may ask of `agent`: its own limit, else a quarter of its
/// smallest context window. Clients size `max_tokens` for Claude models (Claude Code asks for
/// 128000); reserved whole, that would leave another model's window no room for the prompt.
fn output_ceiling(runtime: &Runtime, agent: &AgentSpec) -> u32 {
    if let Some(limit) = agent.sampling.max_output_tokens {
        return limit;
    }
    let window = agent
        .targets
        .iter()
        .map(|target| {
            agent.context_window.unwrap_or_else(|| {
                runtime
                    .catalog()
                    .facts(&target.provider, &target.model)
                    .context_window
            })
        })
        .min()
        .unwrap_or(crate::config::models::DEFAULT_CONTEXT_WINDOW);
    u32::try_from(window / OUTPUT_SHARE_OF_WINDOW).unwrap_or(u32::MAX)
}

/// Where Anthropic keeps a client tool's parts.
const ANTHROPIC_TOOL_FIELDS: ToolFields = ToolFields {
    list: "tools",
    name: "name",
    schema: "input_schema",
};

async fn complete(handle: RunHandle, reply: Reply) -> Result<Response, AnthropicError> {
    let _cancel_on_drop = handle.abort_on_drop();
    let RunHandle { result, .. } = handle;
    let result: AgentResult = result.await.map_err(|_| ApiError::internal())?;
    let summary = result.summary();
    let reason = stop_reason(&summary).ok_or_else(|| ApiError::from_run(&result.summary()))?;
    let thinking: Vec<&str> = result
        .conversation
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .filter_map(|m| m.reasoning.as_deref())
        .collect();
    let thinking = thinking.join("\n\n");
    let answer = result.answer_text();
    let mut content = Vec::new();
    if !thinking.is_empty() {
        content.push(ContentBlock::Thinking {
            thinking: &thinking,
        });
    }
    if !answer.is_empty() || summary.client_tool_calls.is_empty() {
        content.push(ContentBlock::Text { text: &answer });
    }
    for call in &summary.client_tool_calls {
        content.push(ContentBlock::ToolUse {
            id: &call.id,
            name: &call.name,
            input: serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({})),
        });
    }
    let body = Message {
        id: &reply.id,
        kind: MessageType::Message,
        role: AssistantRole::Assistant,
        model: &reply.model,
        content,
        stop_reason: Some(reason),
        stop_sequence: None,
        usage: (&result.usage).into(),
    };
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::wire::{BlockDelta, StreamEvent};
    use serde_json::json;

    #[test]
    fn block_deltas_have_anthropics_shape() {
        let text = StreamEvent::ContentBlockDelta {
            index: 1,
            delta: BlockDelta::TextDelta {
                text: "to\"ken ✓"
            },
        };
        assert_eq!(
            serde_json::to_value(&text).expect("json"),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "to\"ken ✓"}})
        );
        let thinking = StreamEvent::ContentBlockDelta {
            index: 0,
            delta: BlockDelta::ThinkingDelta { thinking: "hm" },
        };
        assert_eq!(
            serde_json::to_value(&thinking).expect("json")["delta"],
            json!({"type": "thinking_delta", "thinking": "hm"})
        );
    }
}
