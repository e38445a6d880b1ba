//! OpenAI compatibility (SPEC §4.1, §15): `GET /v1/models` lists agents as models and
//! `POST /v1/chat/completions` runs the agent named by `model`, streaming
//! `chat.completion.chunk` frames or answering with one `chat.completion` (`n` runs for `n`
//! choices). This module holds the handlers, the run path both completion endpoints share
//! (starting a request's runs, collecting their results) and the translator from agent events
//! to streamed frames ([`Frames`]); [`completions`] answers the legacy `POST /v1/completions`
//! through them, [`params`] checks the shared parameters and [`wire`] holds the bodies.

mod attachments;
pub mod completions;
pub mod params;
pub mod wire;

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, ApiJson, ErrorBody};
use super::shared::client_tools::{self, ToolFields};
use super::shared::drive::{self, Events, Frame, OnLeave, StreamEnd, Translator};
use super::sse::with_run_headers;
use super::wire::AssistantRole;
use crate::agent::client_tools::ClientTools;
use crate::agent::events::AgentEvent;
use crate::agent::{AgentResult, ExitReason, ReportStatus};
use crate::config::AgentSpec;
use crate::llm::ToolDefinition;
use crate::llm::{ChatMessage, Role, ToolCall};
use crate::runtime::{RunHandle, RunSubmission, Runtime, StartError};
use crate::vocabulary::RunEvent;
use crate::vocabulary::result::{EntryStatus, RunSummary, UsageTotals};
use params::Ignored;
use wire::{
    AssistantMessage, ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChunkChoice,
    ChunkObject, CompletionChoice, CompletionObject, CompletionUsage, Delta, FinishReason,
    FunctionKind, MessageContent, Model, ModelObject, RequestMessage, ResponseFormat,
    ResponseFunction, ResponseToolCall,
};

/// OpenAI's cap on `top_logprobs`.
const MAX_TOP_LOGPROBS: u32 = 20;

/// 400 naming a parameter whose effect agentd cannot give, or that is out of range.
fn refuse_unsupported(body: &ChatCompletionRequest) -> Result<(), ApiError> {
    if body.top_logprobs.is_some_and(|n| n > MAX_TOP_LOGPROBS) {
        return Err(ApiError::invalid_request(format!(
            "`top_logprobs` must be from 0 to {MAX_TOP_LOGPROBS}"
        ))
        .with_param("top_logprobs"));
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

pub(crate) fn model_of(runtime: &Runtime, agent: &AgentSpec) -> Model {
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
    let (caller, user_ignored) = params::caller_for_user(caller, body.sampling.user.as_ref())?;
    let agent = caller.model_agent(&runtime, &body.model)?;
    refuse_unsupported(&body)?;
    let stream = body.stream.unwrap_or(false);
    let n = params::choices(body.n, stream)?;
    let sampling = params::sampling_of(
        &body.sampling,
        body.max_completion_tokens.or(body.max_tokens),
    )?;
    let mut ignored = Ignored::default();
    ignored.not_taken(&runtime, &agent, &sampling);
    ignored.note("logprobs", body.logprobs == Some(true));
    ignored.note("top_logprobs", body.top_logprobs.is_some_and(|n| n > 0));
    ignored.note("user", user_ignored);
    let (mut history, prompt) = split_messages(&body.messages)?;
    let prompt_attachments =
        attachments::of_messages(&runtime, &caller, &agent, &body.messages, &mut history).await?;
    let sent_messages = history.len() + 2;
    let (format, schema) = output_of(body.response_format.as_ref())?;
    let show_progress = agent.progress_in_reasoning;
    let agent_name = agent.name.clone();
    let mut submission = caller.submission(agent, prompt);
    submission.history = history;
    submission.attachments = prompt_attachments;
    submission.overrides = sampling;
    submission.format = format;
    submission.schema = schema;
    submission.client_tools = client_tools_of(&body)?;
    let handles = start_choices(&runtime, submission, n)
        .await
        .map_err(|error| {
            if matches!(error, StartError::InvalidOutput(_)) {
                return ApiError::from(error).with_param("response_format.json_schema.schema");
            }
            client_tools::start_error(error, &CHAT_TOOL_FIELDS, |call_id| {
                tool_message_param(&body.messages, call_id)
            })
        })?;
    let run_ids = run_ids_of(&handles);
    let reply = Completion::new(
        format!("chatcmpl-{}", first_id(&handles)),
        body.model.clone(),
        chrono::Utc::now().timestamp(),
        body.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage),
        sent_messages,
    );
    let response = match (stream, first_alone(handles)) {
        (true, Ok(handle)) => stream_response(&runtime, handle, reply, show_progress),
        (_, Ok(handle)) => complete(vec![handle], reply).await,
        (_, Err(handles)) => complete(handles, reply).await,
    };
    Ok(ignored.warn(&agent_name, with_run_headers(response, &run_ids, None)))
}

/// The run is the caller's: its owner, the key it counts against, and the admin acting for
/// the owner.
/// Starts `n` runs of `submission`, one per choice. A run that cannot start (the server is
/// full) aborts those already started, and the request gets the reason.
async fn start_choices(
    runtime: &Arc<Runtime>,
    submission: RunSubmission,
    n: u32,
) -> Result<Vec<RunHandle>, StartError> {
    let mut handles = Vec::new();
    let mut guards = Vec::new();
    for _ in 1..n {
        let handle = runtime.start_run(submission.clone()).await?;
        guards.push(handle.abort_on_drop());
        handles.push(handle);
    }
    handles.push(runtime.start_run(submission).await?);
    for guard in guards {
        drop(guard.disarm());
    }
    Ok(handles)
}

/// The runs' ids in choice order: `x-agentd-run-id` lists them comma-separated.
fn run_ids_of(handles: &[RunHandle]) -> String {
    handles
        .iter()
        .map(|handle| handle.run_id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The id of a request's first run, which names its answer.
fn first_id(handles: &[RunHandle]) -> &str {
    handles.first().map_or("", |handle| handle.run_id.as_str())
}

/// The one run of a one-choice request, else all of them.
fn first_alone(mut handles: Vec<RunHandle>) -> Result<RunHandle, Vec<RunHandle>> {
    match handles.len() {
        1 => handles.pop().ok_or(handles),
        _ => Err(handles),
    }
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
        ("user", Some(text)) if !text.trim().is_empty() || carries_files(last) => text,
        _ => {
            return Err(ApiError::invalid_request(
                "The last message must be a user message with text or files (or a tool message answering a tool call)",
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
        attachments: Vec::new(),
    })
}

/// Whether a message has `image_url` or `file` parts: files alone make a prompt.
fn carries_files(message: &RequestMessage) -> bool {
    matches!(&message.content, Some(MessageContent::Parts(parts))
        if parts.iter().any(|part| matches!(part.kind.as_str(), "image_url" | "file")))
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
                    // Attachments: read by `attachments::of_messages`.
                    ("image_url" | "file", _) => {}
                    (kind, _) => {
                        return Err(ApiError::invalid_request(format!(
                            "Content part type {kind:?} is not supported; send text, image_url or file"
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
pub(crate) enum TextField {
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
    fn text_chunk(&self, field: TextField, text: &str) -> Frame {
        // A string always serialises, to valid JSON.
        let json = serde_json::to_string(text).unwrap_or_default();
        self.text_json_chunk(field, &json)
    }

    /// [`Self::text_chunk`] from the text's JSON string (`"…"`, escaped as serde_json does),
    /// the bytes the run's stored `output` event already holds: each token is escaped once,
    /// for the event, and its frame copies it.
    fn text_json_chunk(&self, field: TextField, json: &str) -> Frame {
        let name = match field {
            TextField::Content => r#""content":"#,
            TextField::Reasoning => r#""reasoning_content":"#,
        };
        const TAIL: &str = r#"},"finish_reason":null}]}"#;
        let mut frame = String::with_capacity(
            self.text_frame_head.len() + name.len() + json.len() + TAIL.len(),
        );
        frame.push_str(&self.text_frame_head);
        frame.push_str(name);
        frame.push_str(json);
        frame.push_str(TAIL);
        Frame::data(frame)
    }

    /// One `chat.completion.chunk` serialised straight from borrowed fields: a streamed token
    /// costs one string for its frame, not a JSON tree built and dropped.
    fn chunk(&self, delta: Delta<'_>, finish_reason: Option<FinishReason>) -> Frame {
        let choice = ChunkChoice {
            index: 0,
            delta,
            finish_reason,
        };
        self.frame(std::slice::from_ref(&choice), None)
    }

    fn usage_chunk(&self, usage: &UsageTotals) -> Frame {
        self.frame(&[], Some(usage.into()))
    }

    fn frame(&self, choices: &[ChunkChoice<'_>], usage: Option<CompletionUsage>) -> Frame {
        let frame = ChatCompletionChunk {
            id: &self.id,
            object: ChunkObject::ChatCompletionChunk,
            created: self.created,
            model: &self.model,
            choices,
            usage,
        };
        // Borrowed strings and numbers only: serialisation cannot fail.
        Frame::data(serde_json::to_string(&frame).unwrap_or_default())
    }
}

/// How an endpoint writes a run's stream: `chat.completion.chunk` frames ([`Completion`]) or
/// `text_completion` ones ([`completions::TextFrames`]). `None` leaves out what the endpoint
/// has no place for.
pub(crate) trait Frames: Send + 'static {
    /// The frame before any event.
    fn opening(&self) -> Option<Frame>;
    /// Answer text, or reasoning (thinking and progress lines).
    fn text(&self, field: TextField, text: &str) -> Option<Frame>;
    /// The same, given also the text's JSON string (`"…"`, escaped) as the run's event holds
    /// it ([`RunEvent::text_json`]), which a frame may copy instead of escaping `text` again.
    fn text_with_json(&self, field: TextField, text: &str, _json: &str) -> Option<Frame> {
        self.text(field, text)
    }
    /// The client tools the model called.
    fn tool_calls(&self, calls: &[ToolCall]) -> Option<Frame>;
    /// The last frame of the choice.
    fn finish(&self, reason: FinishReason) -> Frame;
    /// The usage frame before `[DONE]`, when the client asked for it.
    fn usage(&self, usage: &UsageTotals) -> Option<Frame>;
}

impl Frames for Completion {
    fn opening(&self) -> Option<Frame> {
        Some(self.chunk(
            Delta {
                role: Some(AssistantRole::Assistant),
                content: Some(""),
                ..Delta::default()
            },
            None,
        ))
    }

    fn text(&self, field: TextField, text: &str) -> Option<Frame> {
        Some(self.text_chunk(field, text))
    }

    fn text_with_json(&self, field: TextField, _text: &str, json: &str) -> Option<Frame> {
        Some(self.text_json_chunk(field, json))
    }

    fn tool_calls(&self, calls: &[ToolCall]) -> Option<Frame> {
        let calls = response_tool_calls(calls, true);
        Some(self.chunk(
            Delta {
                tool_calls: Some(calls),
                ..Delta::default()
            },
            None,
        ))
    }

    fn finish(&self, reason: FinishReason) -> Frame {
        self.chunk(Delta::default(), Some(reason))
    }

    fn usage(&self, usage: &UsageTotals) -> Option<Frame> {
        self.include_usage.then(|| self.usage_chunk(usage))
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

/// The translator of both completion endpoints: a run's events as the endpoint's frames
/// ([`Frames`]), then `[DONE]`.
pub(crate) struct CompletionTranslator<F: Frames> {
    frames: F,
    run_id: String,
    /// Progress lines (turns, tools) go to the reasoning (the agent's `progressInReasoning`).
    show_progress: bool,
    streamed_text: bool,
    failure_report: Option<String>,
    finished: bool,
}

impl<F: Frames> CompletionTranslator<F> {
    pub(crate) fn new(frames: F, run_id: impl Into<String>, show_progress: bool) -> Self {
        Self {
            frames,
            run_id: run_id.into(),
            show_progress,
            streamed_text: false,
            failure_report: None,
            finished: false,
        }
    }

    fn run_finished(&mut self, summary: &RunSummary, out: &mut Vec<Frame>) {
        match finish_reason(summary) {
            Some(reason) => {
                if let Some(text) = self.failure_report.take().filter(|_| !self.streamed_text) {
                    out.extend(self.frames.text(TextField::Content, &text));
                }
                if !summary.client_tool_calls.is_empty() {
                    out.extend(self.frames.tool_calls(&summary.client_tool_calls));
                }
                out.push(self.frames.finish(reason));
            }
            None => out.push(Frame::data(ApiError::from_run(summary).body_text())),
        }
        out.extend(self.frames.usage(&summary.usage));
        out.push(Frame::data("[DONE]"));
        self.finished = true;
    }
}

impl<F: Frames> Translator for CompletionTranslator<F> {
    fn open(&mut self, out: &mut Vec<Frame>) {
        out.extend(self.frames.opening());
    }

    fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        let frame = match &event.event {
            AgentEvent::Output(delta) => {
                self.streamed_text = true;
                match event.text_json() {
                    Some(json) => self
                        .frames
                        .text_with_json(TextField::Content, &delta.text, json),
                    None => self.frames.text(TextField::Content, &delta.appended_text()),
                }
            }
            AgentEvent::Thinking(delta) => match event.text_json() {
                Some(json) => self
                    .frames
                    .text_with_json(TextField::Reasoning, &delta.text, json),
                None => self.frames.text(TextField::Reasoning, &delta.text),
            },
            AgentEvent::FinalReport(report) if report.status == ReportStatus::Failure => {
                self.failure_report.clone_from(&report.content);
                None
            }
            AgentEvent::RunFinished(summary) => {
                self.run_finished(summary, out);
                None
            }
            // Chat completions has no notion of approvals: the waiting call is named in a
            // progress line whatever the agent's progress setting (SPEC §8).
            waiting @ (AgentEvent::ApprovalRequested(_) | AgentEvent::ApprovalDecided(_)) => {
                approval_line(waiting, &self.run_id)
                    .and_then(|line| self.frames.text(TextField::Reasoning, &line))
            }
            other if self.show_progress => {
                progress_line(other).and_then(|line| self.frames.text(TextField::Reasoning, &line))
            }
            _ => None,
        };
        out.extend(frame);
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    /// The run task ended without a final event: reported rather than dropping the connection.
    fn end(&mut self, _end: StreamEnd, out: &mut Vec<Frame>) {
        out.push(Frame::data(ApiError::internal().body_text()));
        out.push(Frame::data("[DONE]"));
        self.finished = true;
    }
}

/// A run's events as an endpoint's frames, then `[DONE]`; a client that leaves cancels the run.
pub(crate) fn stream_response<F: Frames>(
    runtime: &Runtime,
    handle: RunHandle,
    frames: F,
    show_progress: bool,
) -> Response {
    let on_leave = OnLeave::Cancel(handle.abort_on_drop());
    let translator = CompletionTranslator::new(frames, handle.run_id.clone(), show_progress);
    drive::stream(runtime, Events::live(handle), translator, on_leave)
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
        AgentEvent::ToolFinished(tool) if tool.status != EntryStatus::Ok => Some(format!(
            "\n- `{}` failed: {}\n",
            tool.tool,
            tool.error.as_deref().unwrap_or("unknown error")
        )),
        _ => None,
    }
}

/// The `chat.completion` of a request's runs: one choice each, in order.
async fn complete(handles: Vec<RunHandle>, reply: Completion) -> Response {
    let finished = match finished_runs(handles).await {
        Ok(finished) => finished,
        Err(error) => return error.into_response(),
    };
    let choices = finished
        .iter()
        .zip(0..)
        .map(|(run, index)| CompletionChoice {
            index,
            message: AssistantMessage {
                role: AssistantRole::Assistant,
                content: run.result.answer_text(),
                reasoning_content: reasoning_of(&run.result, reply.sent_messages),
                tool_calls: Some(response_tool_calls(&run.client_tool_calls, false))
                    .filter(|calls| !calls.is_empty()),
            },
            finish_reason: run.reason,
        })
        .collect();
    let body = ChatCompletion {
        id: &reply.id,
        object: CompletionObject::ChatCompletion,
        created: reply.created,
        model: &reply.model,
        choices,
        usage: CompletionUsage::sum(finished.iter().map(|run| &run.result.usage)),
    };
    axum::Json(body).into_response()
}

/// One run of a request, finished with an answer.
pub(crate) struct FinishedRun {
    pub result: AgentResult,
    pub reason: FinishReason,
    pub client_tool_calls: Vec<ToolCall>,
}

/// Waits for every run of a request (all are cancelled if the client leaves first); the first
/// that failed without an answer makes the request's error.
pub(crate) async fn finished_runs(handles: Vec<RunHandle>) -> Result<Vec<FinishedRun>, ApiError> {
    let _cancel_on_drop: Vec<_> = handles.iter().map(RunHandle::abort_on_drop).collect();
    // Nobody reads the events of a non-streaming run; the result carries everything.
    let results =
        futures_util::future::join_all(handles.into_iter().map(RunHandle::into_result)).await;
    let mut finished = Vec::with_capacity(results.len());
    for result in results {
        let result: AgentResult = result.map_err(|_| ApiError::internal())?;
        let summary = result.summary();
        let Some(reason) = finish_reason(&summary) else {
            return Err(ApiError::from_run(&summary));
        };
        finished.push(FinishedRun {
            client_tool_calls: summary.client_tool_calls,
            reason,
            result,
        });
    }
    Ok(finished)
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

    /// The frame as the translator wrote it.
    fn frame_text(frame: Frame) -> String {
        format!("{frame:?}")
    }

    #[test]
    fn text_chunks_are_byte_for_byte_the_serialised_frame() {
        use crate::agent::events::TextDelta;
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
            let event = RunEvent::new(1, AgentEvent::Output(TextDelta::new(text)));
            let json = event.text_json().expect("a plain delta's JSON string");
            assert_eq!(
                frame_text(reply.text_json_chunk(TextField::Content, json)),
                frame_text(reply.chunk(Delta::content(text), None)),
                "the frame copied from the stored event's text"
            );
        }
        let replacing = RunEvent::new(
            1,
            AgentEvent::Output(TextDelta {
                text: "x".into(),
                replace: true,
            }),
        );
        assert_eq!(replacing.text_json(), None, "a replacement is written anew");
    }

    #[test]
    fn every_stored_run_streams_as_golden_chat_completion_chunks() {
        use crate::http::shared::goldens::{self, RUN_ID};
        goldens::each("chat_completions", || {
            let reply = Completion::new("chatcmpl-r".into(), "helper".into(), 7, true, 0);
            CompletionTranslator::new(reply, RUN_ID, true)
        });
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
        let audio = parse(json!([{"role": "user", "content": [{"type": "input_audio"}]}]));
        assert_eq!(
            split_messages(&audio).unwrap_err().param.as_deref(),
            Some("messages[0].content[0]")
        );
        let blank = parse(json!([{"role": "user", "content": "   "}]));
        assert!(split_messages(&blank).is_err());
    }
}
