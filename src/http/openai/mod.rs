//! OpenAI compatibility (SPEC §4.1): `GET /v1/models` lists agents as models and
//! `POST /v1/chat/completions` runs the agent named by `model`, streaming
//! `chat.completion.chunk` frames or answering with one `chat.completion`. This module holds
//! the handlers and the translator from agent events to chunks; [`wire`] holds the bodies.

pub mod wire;

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::{Value, json};

use super::auth::Caller;
use super::client_tools::{self, ToolFields};
use super::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use super::sse::{sse_response, with_run_headers};
use super::wire::{AssistantRole, ListObject};
use crate::agent::client_tools::ClientTools;
use crate::agent::events::AgentEvent;
use crate::agent::result::{RunSummary, UsageTotals};
use crate::agent::{AgentResult, ExitReason, ReportStatus, SamplingParams};
use crate::config::AgentSpec;
use crate::llm::ToolDefinition;
use crate::llm::{ChatMessage, Role, ToolCall};
use crate::runtime::{RunHandle, RunSubmission, Runtime};
use wire::{
    AssistantMessage, ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChunkChoice,
    ChunkObject, CompletionChoice, CompletionObject, CompletionUsage, Delta, FinishReason,
    FunctionKind, MessageContent, Model, ModelList, ModelObject, ModelsResponse, OneModel,
    RequestMessage, ResponseFormat, ResponseFunction, ResponseToolCall,
};

/// 400 naming a parameter agentd would otherwise silently ignore.
fn refuse_unsupported(body: &ChatCompletionRequest) -> Result<(), ApiError> {
    if body.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid_request(
            "`n` must be 1: an agent run gives one answer; send several requests for several",
        )
        .with_param("n"));
    }
    match body.unsupported.first_set() {
        Some(name) => Err(ApiError::invalid_request(format!(
            "`{name}` is not supported by agentd's agents; leave it out"
        ))
        .with_param(name)),
        None => Ok(()),
    }
}

/// The run's output format and schema from `response_format`.
fn output_of(format: Option<&ResponseFormat>) -> Result<(Option<String>, Option<Value>), ApiError> {
    let Some(format) = format else {
        return Ok((None, None));
    };
    match format.kind.as_str() {
        "text" => Ok((None, None)),
        "json_object" => Ok((Some("json".into()), Some(json!({"type": "object"})))),
        "json_schema" => {
            let schema = format
                .json_schema
                .as_ref()
                .and_then(|f| f.schema.clone())
                .ok_or_else(|| {
                    ApiError::invalid_request(
                        "`response_format.json_schema.schema` is required for json_schema",
                    )
                    .with_param("response_format.json_schema.schema")
                })?;
            Ok((Some("json".into()), Some(schema)))
        }
        other => Err(ApiError::invalid_request(format!(
            "response_format type {other:?} is not one of text, json_object, json_schema"
        ))
        .with_param("response_format.type")),
    }
}

/// Agents as models: OpenAI's list shape, or Anthropic's when the client sends `anthropic-version`.
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "openai",
    summary = "The agents this key may use, as models (Anthropic's shape with `anthropic-version`)",
    params(("anthropic-version" = Option<String>, Header, description = "Any value selects Anthropic's list shape")),
    responses(
        (status = 200, description = "The agents as models", body = ModelsResponse),
        ErrorBody,
    ),
)]
pub async fn list_models(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
) -> axum::Json<ModelsResponse> {
    let agents: Vec<Arc<AgentSpec>> = runtime
        .agents()
        .iter()
        .filter(|agent| caller.may_use_agent(&agent.name))
        .cloned()
        .collect();
    if headers.contains_key("anthropic-version") {
        return axum::Json(ModelsResponse::Anthropic(super::anthropic::model_list(
            &runtime, &agents,
        )));
    }
    let data = agents
        .iter()
        .map(|agent| model_of(&runtime, agent))
        .collect();
    axum::Json(ModelsResponse::OpenAi(ModelList {
        object: ListObject::List,
        data,
    }))
}

/// One agent as a model (`models.retrieve`): OpenAI's shape, or Anthropic's with
/// `anthropic-version`.
#[utoipa::path(
    get,
    path = "/v1/models/{model}",
    tag = "openai",
    summary = "One agent as a model (Anthropic's shape with `anthropic-version`)",
    params(
        ("model" = String, Path, description = "The agent's name"),
        ("anthropic-version" = Option<String>, Header, description = "Any value selects Anthropic's shape"),
    ),
    responses(
        (status = 200, description = "The agent as a model", body = OneModel),
        ErrorBody,
    ),
)]
pub async fn get_model(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(model): ApiPath<String>,
    headers: axum::http::HeaderMap,
) -> Result<axum::Json<OneModel>, ApiError> {
    let agent = runtime
        .agents()
        .get(&model)
        .filter(|agent| caller.may_use_agent(&agent.name))
        .ok_or_else(|| ApiError::unknown_model(&model))?;
    if headers.contains_key("anthropic-version") {
        return Ok(axum::Json(OneModel::Anthropic(super::anthropic::model_of(
            &runtime, &agent,
        ))));
    }
    Ok(axum::Json(OneModel::OpenAi(model_of(&runtime, &agent))))
}

fn model_of(runtime: &Runtime, agent: &AgentSpec) -> Model {
    Model {
        id: agent.name.clone(),
        object: ModelObject::Model,
        created: runtime.started_at(),
        owned_by: "agentd",
    }
}

#[utoipa::path(
    post,
    path = "/v1/chat/completions",
    tag = "openai",
    summary = "OpenAI Chat Completions; `model` names an agent",
    request_body = ChatCompletionRequest,
    responses(
        (status = 200, description = "A `chat.completion`, or with `stream: true` `data:` frames each holding a `ChatCompletionChunk` (an error after the stream started is a `data:` frame holding an `ErrorBody`), then `data: [DONE]`",
            content(
                (ChatCompletion = "application/json"),
                (crate::http::wire::ServerSentEvent = "text/event-stream"),
            )),
        ErrorBody,
    ),
)]
pub async fn chat_completions(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<ChatCompletionRequest>,
) -> Result<Response, ApiError> {
    let agent = caller.model_agent(&runtime, &body.model)?;
    refuse_unsupported(&body)?;
    let (history, prompt) = split_messages(&body.messages)?;
    let sent_messages = history.len() + 2;
    let (format, schema) = output_of(body.response_format.as_ref())?;
    let show_progress = agent.progress_in_reasoning;
    let mut submission = RunSubmission::new(agent, prompt);
    submission.history = history;
    submission.overrides = SamplingParams {
        temperature: body.temperature,
        top_p: body.top_p,
        max_output_tokens: body.max_completion_tokens.or(body.max_tokens),
        ..SamplingParams::default()
    };
    submission.format = format;
    submission.schema = schema;
    submission.user_id = caller.owner();
    submission.key = caller.limited_key.clone();
    submission.client_tools = client_tools_of(&body)?;
    let handle = runtime.start_run(submission).await.map_err(|error| {
        if matches!(error, crate::runtime::StartError::InvalidOutput(_)) {
            return ApiError::from(error).with_param("response_format.json_schema.schema");
        }
        client_tools::start_error(error, &CHAT_TOOL_FIELDS, |call_id| {
            tool_message_param(&body.messages, call_id)
        })
    })?;
    let run_id = handle.run_id.clone();
    let reply = Completion::new(
        format!("chatcmpl-{run_id}"),
        body.model.clone(),
        chrono::Utc::now().timestamp(),
        body.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage),
        sent_messages,
    );
    let response = if body.stream.unwrap_or(false) {
        sse_response(&runtime, stream_chunks(handle, reply, show_progress))
    } else {
        complete(handle, reply)
            .await
            .unwrap_or_else(IntoResponse::into_response)
    };
    Ok(with_run_headers(response, &run_id, None))
}

/// Where chat completions keeps a client tool's parts.
const CHAT_TOOL_FIELDS: ToolFields = ToolFields {
    list: "tools",
    name: "function.name",
    schema: "function.parameters",
};

/// The request's client tools and `tool_choice` (SPEC §9.2).
fn client_tools_of(body: &ChatCompletionRequest) -> Result<ClientTools, ApiError> {
    let mut definitions = Vec::new();
    for (index, tool) in body.tools.iter().flatten().enumerate() {
        if tool.kind != "function" {
            return Err(ApiError::invalid_request(format!(
                "tool type {:?} is not supported; send function tools",
                tool.kind
            ))
            .with_param(format!("tools[{index}].type")));
        }
        definitions.push(ToolDefinition {
            name: tool.function.name.clone(),
            description: tool.function.description.clone().unwrap_or_default(),
            parameters: tool
                .function
                .parameters
                .clone()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        });
    }
    Ok(ClientTools {
        definitions,
        choice: client_tools::tool_choice(body.tool_choice.as_ref())?,
        ..ClientTools::default()
    })
}

/// The `tool` message answering `call_id`, for a 400 about it.
fn tool_message_param(messages: &[RequestMessage], call_id: &str) -> String {
    messages
        .iter()
        .position(|m| m.tool_call_id.as_deref() == Some(call_id))
        .map_or_else(
            || "messages".into(),
            |index| format!("messages[{index}].tool_call_id"),
        )
}

/// Splits OpenAI `messages` into history and the final user prompt; a conversation ending with
/// `tool` messages (client tool results) is all history, and the run continues from it.
fn split_messages(messages: &[RequestMessage]) -> Result<(Vec<ChatMessage>, String), ApiError> {
    let Some((last, earlier)) = messages.split_last() else {
        return Err(
            ApiError::invalid_request("`messages` must not be empty").with_param("messages")
        );
    };
    if last.role == "tool" {
        let history = messages
            .iter()
            .enumerate()
            .map(|(i, m)| to_chat_message(m, i))
            .collect::<Result<_, _>>()?;
        return Ok((history, String::new()));
    }
    let last_index = earlier.len();
    let prompt = match (last.role.as_str(), text_of(last, last_index)?) {
        ("user", Some(text)) if !text.trim().is_empty() => text,
        _ => {
            return Err(ApiError::invalid_request(
                "The last message must be a user message with text content (or a tool message answering a tool call)",
            )
            .with_param(format!("messages[{last_index}]")));
        }
    };
    let history = earlier
        .iter()
        .enumerate()
        .map(|(i, m)| to_chat_message(m, i))
        .collect::<Result<_, _>>()?;
    Ok((history, prompt))
}

fn to_chat_message(message: &RequestMessage, index: usize) -> Result<ChatMessage, ApiError> {
    let role = match message.role.as_str() {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        other => {
            return Err(ApiError::invalid_request(format!(
                "Unknown role {other:?}: use system, developer, user, assistant or tool"
            ))
            .with_param(format!("messages[{index}].role")));
        }
    };
    let tool_calls = message
        .tool_calls
        .iter()
        .flatten()
        .map(|c| ToolCall {
            id: c.id.clone(),
            name: c.function.name.clone(),
            arguments: c.function.arguments.clone(),
        })
        .collect();
    if role == Role::Tool && message.tool_call_id.is_none() {
        return Err(
            ApiError::invalid_request("A tool message needs `tool_call_id`")
                .with_param(format!("messages[{index}].tool_call_id")),
        );
    }
    Ok(ChatMessage {
        role,
        content: text_of(message, index)?,
        tool_calls,
        tool_call_id: message.tool_call_id.clone(),
        reasoning: None,
        reasoning_signature: None,
        redacted_reasoning: Vec::new(),
    })
}

fn text_of(message: &RequestMessage, index: usize) -> Result<Option<String>, ApiError> {
    match &message.content {
        None => Ok(None),
        Some(MessageContent::Text(text)) => Ok(Some(text.clone())),
        Some(MessageContent::Parts(parts)) => {
            let mut text = String::new();
            for (part_index, part) in parts.iter().enumerate() {
                match (part.kind.as_str(), &part.text) {
                    ("text", Some(t)) => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(t);
                    }
                    (kind, _) => {
                        return Err(ApiError::invalid_request(format!(
                            "Content part type {kind:?} is not supported; send text"
                        ))
                        .with_param(format!("messages[{index}].content[{part_index}]")));
                    }
                }
            }
            Ok(Some(text))
        }
    }
}

/// Identity of one completion response.
struct Completion {
    id: String,
    model: String,
    created: i64,
    include_usage: bool,
    /// Messages before this run's own in its conversation: the system prompt, the history
    /// the client sent, the prompt.
    sent_messages: usize,
    /// A text chunk's JSON up to its delta's field name: `{"id":…,…,"choices":[{"index":0,"delta":{`.
    text_frame_head: String,
}

/// Which delta field a text chunk fills.
#[derive(Clone, Copy)]
enum TextField {
    Content,
    Reasoning,
}

impl Completion {
    fn new(
        id: String,
        model: String,
        created: i64,
        include_usage: bool,
        sent_messages: usize,
    ) -> Self {
        let head = ChatCompletionChunk {
            id: &id,
            object: ChunkObject::ChatCompletionChunk,
            created,
            model: &model,
            choices: &[],
            usage: None,
        };
        // `…,"choices":[]}` with its closing `]}` cut, then the choice up to its delta's fields.
        let mut text_frame_head = serde_json::to_string(&head).unwrap_or_default();
        text_frame_head.truncate(text_frame_head.len().saturating_sub(2));
        text_frame_head.push_str(r#"{"index":0,"delta":{"#);
        Self {
            id,
            model,
            created,
            include_usage,
            sent_messages,
            text_frame_head,
        }
    }

    /// A chunk carrying only text (a token of the answer or of its reasoning): the frame's
    /// fixed part is written once per stream, each token only adds its escaped text. The
    /// bytes are those [`Self::chunk`] writes for the same delta.
    fn text_chunk(&self, field: TextField, text: &str) -> Event {
        let name = match field {
            TextField::Content => r#""content":"#,
            TextField::Reasoning => r#""reasoning_content":"#,
        };
        const TAIL: &str = r#"},"finish_reason":null}]}"#;
        let mut frame = Vec::with_capacity(
            self.text_frame_head.len() + name.len() + text.len() + 8 + TAIL.len(),
        );
        frame.extend_from_slice(self.text_frame_head.as_bytes());
        frame.extend_from_slice(name.as_bytes());
        // A string always serialises.
        let _ = serde_json::to_writer(&mut frame, text);
        frame.extend_from_slice(TAIL.as_bytes());
        Event::default().data(String::from_utf8(frame).unwrap_or_default())
    }

    /// One `chat.completion.chunk` serialised straight from borrowed fields: a streamed token
    /// costs one string for its frame, not a JSON tree built and dropped.
    fn chunk(&self, delta: Delta<'_>, finish_reason: Option<FinishReason>) -> Event {
        let choice = ChunkChoice {
            index: 0,
            delta,
            finish_reason,
        };
        self.frame(std::slice::from_ref(&choice), None)
    }

    fn usage_chunk(&self, usage: &UsageTotals) -> Event {
        self.frame(&[], Some(usage.into()))
    }

    fn frame(&self, choices: &[ChunkChoice<'_>], usage: Option<CompletionUsage>) -> Event {
        let frame = ChatCompletionChunk {
            id: &self.id,
            object: ChunkObject::ChatCompletionChunk,
            created: self.created,
            model: &self.model,
            choices,
            usage,
        };
        // Borrowed strings and numbers only: serialisation cannot fail.
        Event::default().data(serde_json::to_string(&frame).unwrap_or_default())
    }
}

/// `stop` for an answer, `length` for a synthetic failure report (turns or context exhausted),
/// `tool_calls` when client tools were called.
fn finish_reason(summary: &RunSummary) -> Option<FinishReason> {
    match summary.exit_reason {
        ExitReason::ClientToolCalls => Some(FinishReason::ToolCalls),
        ExitReason::MaxTurns | ExitReason::ContextLimit => Some(FinishReason::Length),
        _ if summary.success => Some(FinishReason::Stop),
        _ => None,
    }
}

fn stream_chunks(
    handle: RunHandle,
    reply: Completion,
    show_progress: bool,
) -> impl Stream<Item = Result<Event, Infallible>> {
    async_stream::stream! {
        // Dropping the stream (the client went away) cancels the run.
        let _cancel_on_drop = handle.abort_on_drop();
        let RunHandle { mut events, run_id, .. } = handle;
        yield Ok(reply.chunk(Delta { role: Some(AssistantRole::Assistant), content: Some(""), ..Delta::default() }, None));
        let mut streamed_text = false;
        let mut failure_report: Option<String> = None;
        while let Some(event) = events.recv().await {
            match event {
                AgentEvent::Output(delta) => {
                    streamed_text = true;
                    yield Ok(reply.text_chunk(TextField::Content, &delta.appended_text()));
                }
                AgentEvent::Thinking(delta) => yield Ok(reply.text_chunk(TextField::Reasoning, &delta.text)),
                AgentEvent::FinalReport(report) if report.status == ReportStatus::Failure => failure_report = report.content,
                AgentEvent::RunFinished(summary) => {
                    match finish_reason(&summary) {
                        Some(reason) => {
                            if let Some(text) = failure_report.take().filter(|_| !streamed_text) {
                                yield Ok(reply.text_chunk(TextField::Content, &text));
                            }
                            if !summary.client_tool_calls.is_empty() {
                                let calls = response_tool_calls(&summary.client_tool_calls, true);
                                yield Ok(reply.chunk(Delta { tool_calls: Some(calls), ..Delta::default() }, None));
                            }
                            yield Ok(reply.chunk(Delta::default(), Some(reason)));
                        }
                        None => yield Ok(Event::default().data(ApiError::from_run(&summary).body_text())),
                    }
                    if reply.include_usage {
                        yield Ok(reply.usage_chunk(&summary.usage));
                    }
                    yield Ok(Event::default().data("[DONE]"));
                    return;
                }
                // Chat completions has no notion of approvals: the waiting call is named in a
                // progress line whatever the agent's progress setting (SPEC §8).
                AgentEvent::ApprovalRequested(_) | AgentEvent::ApprovalDecided(_) => {
                    if let Some(line) = approval_line(&event, &run_id) {
                        yield Ok(reply.text_chunk(TextField::Reasoning, &line));
                    }
                }
                other if show_progress => {
                    if let Some(line) = progress_line(&other) {
                        yield Ok(reply.text_chunk(TextField::Reasoning, &line));
                    }
                }
                _ => {}
            }
        }
        // The run task ended without a final event: report it rather than dropping the connection.
        yield Ok(Event::default().data(ApiError::internal().body_text()));
        yield Ok(Event::default().data("[DONE]"));
    }
}

/// The progress line of a call waiting for approval (with where to decide it), or of its
/// decision.
fn approval_line(event: &AgentEvent, run_id: &str) -> Option<String> {
    match event {
        AgentEvent::ApprovalRequested(waiting) => Some(format!(
            "\n- **waiting for approval**: `{}` (call `{}`) with arguments `{}`; decide with POST /v1/runs/{run_id}/approvals/{} before {}\n",
            waiting.tool, waiting.call_id, waiting.arguments, waiting.call_id, waiting.expires_at
        )),
        AgentEvent::ApprovalDecided(decided) => Some(format!(
            "\n- call `{}`: {} by {}{}\n",
            decided.call_id,
            decided.decision,
            decided.by,
            decided
                .reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        )),
        _ => None,
    }
}

/// Progress as markdown lines for `reasoning_content`: later turns, task status, tool calls.
fn progress_line(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::TurnStarted(turn) if turn.turn > 1 && turn.attempt == 1 => {
            Some(format!("\n### Turn {}\n", turn.turn))
        }
        AgentEvent::Progress(progress) => {
            let text = progress.now.as_deref().or(progress.message.as_deref())?;
            Some(format!("\n- **{}**: {text}\n", progress.call_path))
        }
        AgentEvent::ToolStarted(tool) => Some(format!("\n- calling `{}`\n", tool.tool)),
        AgentEvent::ToolFinished(tool) if tool.status != "ok" => Some(format!(
            "\n- `{}` failed: {}\n",
            tool.tool,
            tool.error.as_deref().unwrap_or("unknown error")
        )),
        _ => None,
    }
}

async fn complete(handle: RunHandle, reply: Completion) -> Result<Response, ApiError> {
    let _cancel_on_drop = handle.abort_on_drop();
    // Nobody reads the events of a non-streaming run; the result carries everything.
    let RunHandle { result, .. } = handle;
    let result: AgentResult = result.await.map_err(|_| ApiError::internal())?;
    let summary = result.summary();
    let Some(reason) = finish_reason(&summary) else {
        return Err(ApiError::from_run(&summary));
    };
    let body = ChatCompletion {
        id: &reply.id,
        object: CompletionObject::ChatCompletion,
        created: reply.created,
        model: &reply.model,
        choices: [CompletionChoice {
            index: 0,
            message: AssistantMessage {
                role: AssistantRole::Assistant,
                content: result.answer_text(),
                reasoning_content: reasoning_of(&result, reply.sent_messages),
                tool_calls: Some(response_tool_calls(&summary.client_tool_calls, false))
                    .filter(|calls| !calls.is_empty()),
            },
            finish_reason: reason,
        }],
        usage: (&result.usage).into(),
    };
    Ok(axum::Json(body).into_response())
}

/// Client tool calls in the OpenAI shape; numbered (`index`) in a streamed delta.
fn response_tool_calls(calls: &[ToolCall], streamed: bool) -> Vec<ResponseToolCall> {
    calls
        .iter()
        .enumerate()
        .map(|(index, call)| ResponseToolCall {
            index: streamed.then_some(index as u32),
            id: call.id.clone(),
            kind: FunctionKind::Function,
            function: ResponseFunction {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            },
        })
        .collect()
}

/// The reasoning of every answer of the run (not of the history), as streamed clients get it in
/// `reasoning_content` deltas.
fn reasoning_of(result: &AgentResult, sent_messages: usize) -> Option<String> {
    let reasoning: Vec<&str> = result
        .conversation
        .iter()
        .skip(sent_messages)
        .filter(|message| message.role == Role::Assistant)
        .filter_map(|message| message.reasoning.as_deref())
        .filter(|text| !text.is_empty())
        .collect();
    (!reasoning.is_empty()).then(|| reasoning.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: Value) -> Vec<RequestMessage> {
        serde_json::from_value(body).expect("messages")
    }

    fn frame_json(delta: Delta<'_>, finish_reason: Option<FinishReason>) -> Value {
        let choice = ChunkChoice {
            index: 0,
            delta,
            finish_reason,
        };
        let frame = ChatCompletionChunk {
            id: "chatcmpl-1",
            object: ChunkObject::ChatCompletionChunk,
            created: 7,
            model: "chat",
            choices: std::slice::from_ref(&choice),
            usage: None,
        };
        serde_json::from_str(&serde_json::to_string(&frame).expect("json")).expect("parses")
    }

    #[test]
    fn chunks_have_openais_shape() {
        let first = Delta {
            role: Some(AssistantRole::Assistant),
            content: Some(""),
            ..Delta::default()
        };
        assert_eq!(
            frame_json(first, None),
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "chat",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})
        );
        assert_eq!(
            frame_json(Delta::content("to\"ken ✓"), None)["choices"][0]["delta"],
            json!({"content": "to\"ken ✓"})
        );
        assert_eq!(
            frame_json(Delta::reasoning("hm"), None)["choices"][0]["delta"],
            json!({"reasoning_content": "hm"})
        );
        let last = frame_json(Delta::default(), Some(FinishReason::Stop));
        assert_eq!(
            last["choices"][0],
            json!({"index": 0, "delta": {}, "finish_reason": "stop"})
        );
    }

    /// The frame as axum holds it (its buffer, `data: …` included).
    fn frame_text(event: Event) -> String {
        format!("{event:?}")
    }

    #[test]
    fn text_chunks_are_byte_for_byte_the_serialised_frame() {
        let reply = Completion::new("chatcmpl-r\"1".into(), "chat ✓".into(), 7, false, 0);
        assert!(
            frame_text(reply.text_chunk(TextField::Content, "x"))
                .contains(r#"\"delta\":{\"content\":\"x\"},"#)
        );
        for text in ["", "token ", "to\"ken ✓", "line\nbreak\t\u{1}", "\\"] {
            assert_eq!(
                frame_text(reply.text_chunk(TextField::Content, text)),
                frame_text(reply.chunk(Delta::content(text), None)),
            );
            assert_eq!(
                frame_text(reply.text_chunk(TextField::Reasoning, text)),
                frame_text(reply.chunk(Delta::reasoning(text), None)),
            );
        }
    }

    #[test]
    fn history_and_prompt_are_split() {
        let messages = parse(json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": [{"type": "text", "text": "what"}, {"type": "text", "text": "now?"}]},
        ]));
        let (history, prompt) = split_messages(&messages).expect("valid");
        assert_eq!(prompt, "what\nnow?");
        assert_eq!(
            history.iter().map(|m| m.role).collect::<Vec<_>>(),
            vec![Role::System, Role::User, Role::Assistant]
        );
    }

    #[test]
    fn bad_messages_name_the_offending_index() {
        assert_eq!(
            split_messages(&[]).unwrap_err().param.as_deref(),
            Some("messages")
        );
        let last_not_user =
            parse(json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]));
        assert_eq!(
            split_messages(&last_not_user).unwrap_err().param.as_deref(),
            Some("messages[1]")
        );
        let bad_role =
            parse(json!([{"role": "wizard", "content": "a"}, {"role": "user", "content": "b"}]));
        assert_eq!(
            split_messages(&bad_role).unwrap_err().param.as_deref(),
            Some("messages[0].role")
        );
        let image = parse(json!([{"role": "user", "content": [{"type": "image_url"}]}]));
        assert_eq!(
            split_messages(&image).unwrap_err().param.as_deref(),
            Some("messages[0].content[0]")
        );
        let blank = parse(json!([{"role": "user", "content": "   "}]));
        assert!(split_messages(&blank).is_err());
    }
}
