//! OpenAI Responses API (SPEC §9.1): `POST /v1/responses` runs the agent named by `model` (a
//! response is a run: recorded, listed, metered like every run), streamed or not, in the
//! background or not; `GET /v1/responses/{id}` answers the object or (`stream=true`) replays its
//! events from the run's stored ones and follows it live on any replica; `cancel`, `DELETE` and
//! `input_items` complete the family. Client tools (SPEC §9.2) end a response with
//! `function_call` items; the next request answers them with `function_call_output` items,
//! after `previous_response_id` or replaying the whole conversation (`store: false` clients).
//! Tool approvals (SPEC §8) end a response where the run waits, with `mcp_approval_request`
//! items; a request answering them with `mcp_approval_response` items decides the calls (the
//! runtime's decision call, as `POST /v1/runs/{id}/approvals/{call}`) and its response follows
//! the same run from after the wait. A response is thus a stretch of its run's events: the
//! first one `resp_<run id>`, each after a wait `resp_<run id>_<seq the wait ended at>`.
//!
//! Handlers only translate: [`input`] reads the request, the runtime runs it, [`projector`]
//! turns the run's events into the stream and the object; [`wire`] holds the bodies.

mod attachments;
pub mod compaction;
pub mod conversations;
mod input;
mod projector;
pub mod websocket;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, ApiJson, ApiPath, ApiQuery, ErrorBody};
use super::shared::client_tools;
use super::shared::drive::{self, Events, OnLeave};
use super::sse::with_run_headers;
use super::wire::ListObject;
use crate::agent::SamplingParams;
use crate::agent::approval::Decision;
use crate::config::BusyPolicy;
use crate::config::OnDisconnect;
use crate::http::shared::approvals::{WaitAnswerParams, wait_answer_error};
use crate::llm::ChatMessage;
use crate::runtime::ContinueError;
use crate::runtime::{CancelMode, ConversationTurn, Runtime, WaitingCallRef};
use crate::store::StoredResponse;
use input::{ApprovalAnswer, ReadInput};
use projector::{APPROVAL_REQUEST_PREFIX, ResponseProjector};
use tokio_util::sync::DropGuard;
use wire::{
    ConversationRef, CreateResponse, DeletedKind, DeletedResponse, InputItemList, ResponseKind,
    ResponseObject, ResponsePath, ResponseStatus, RetrieveQuery, TextFormat, TextOptions,
    Truncation,
};

/// How long `GET` waits for more events of a running response before answering what it has.
const SNAPSHOT_QUIET: Duration = Duration::from_millis(50);
/// How long `cancel` waits for the run to end before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// The most `metadata` pairs a response keeps (OpenAI's limit).
const MAX_METADATA_PAIRS: usize = 16;
/// The longest `prompt_cache_key` (OpenAI's limit).
const MAX_PROMPT_CACHE_KEY_CHARS: usize = 64;
/// The most `include` entries (OpenAI names eight).
const MAX_INCLUDE_ENTRIES: usize = 16;

/// The request fields a response echoes, stored with it so `GET` answers the same object.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ResponseEcho {
    model: String,
    created_at: i64,
    instructions: Option<String>,
    metadata: Value,
    tools: Vec<Value>,
    tool_choice: Value,
    text: TextOptions,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_output_tokens: Option<u32>,
    background: bool,
    store: bool,
    parallel_tool_calls: bool,
    previous_response_id: Option<String>,
    /// The caller's conversation the response adds to.
    #[serde(default)]
    conversation: Option<String>,
    #[serde(default)]
    truncation: Truncation,
    /// The seq of the run event the response's stretch starts after: 0, or the end of the
    /// wait for approvals it continues from.
    #[serde(default)]
    after_seq: i64,
    /// Whether this request streams (not kept: `GET` says for itself).
    #[serde(skip)]
    stream: bool,
}

impl ResponseEcho {
    fn of(body: &CreateResponse) -> Self {
        Self {
            model: body.model.clone(),
            created_at: chrono::Utc::now().timestamp(),
            instructions: body.instructions.clone(),
            metadata: body.metadata.clone().unwrap_or_else(|| json!({})),
            tools: body.tools.clone().unwrap_or_default(),
            tool_choice: body.tool_choice.clone().unwrap_or_else(|| json!("auto")),
            text: text_options(body.text.as_ref()),
            temperature: body.temperature,
            top_p: body.top_p,
            max_output_tokens: body.max_output_tokens,
            background: body.background.unwrap_or(false),
            store: body.store.unwrap_or(true),
            parallel_tool_calls: body.parallel_tool_calls.unwrap_or(true),
            previous_response_id: body.previous_response_id.clone(),
            conversation: None,
            truncation: body.truncation.unwrap_or_default(),
            after_seq: 0,
            stream: body.stream.unwrap_or(false),
        }
    }

    /// The response before any event: `queued` in the background, else `in_progress`; no
    /// output.
    fn object(&self, id: &str) -> ResponseObject {
        ResponseObject {
            id: id.to_string(),
            object: ResponseKind::Response,
            created_at: self.created_at,
            status: if self.background {
                ResponseStatus::Queued
            } else {
                ResponseStatus::InProgress
            },
            background: self.background,
            error: None,
            incomplete_details: None,
            instructions: self.instructions.clone(),
            max_output_tokens: self.max_output_tokens,
            metadata: self.metadata.clone(),
            model: self.model.clone(),
            output: Vec::new(),
            parallel_tool_calls: self.parallel_tool_calls,
            previous_response_id: self.previous_response_id.clone(),
            store: self.store,
            temperature: self.temperature,
            top_p: self.top_p,
            text: self.text.clone(),
            tool_choice: self.tool_choice.clone(),
            tools: self.tools.clone(),
            truncation: self.truncation,
            conversation: self.conversation.clone().map(|id| ConversationRef { id }),
            usage: None,
        }
    }
}

/// `text` as echoed: the format sent, else `{"format": {"type": "text"}}` as OpenAI shows it.
fn text_options(text: Option<&TextOptions>) -> TextOptions {
    let format = text
        .and_then(|t| t.format.clone())
        .unwrap_or_else(|| TextFormat {
            kind: "text".into(),
            name: None,
            schema: None,
            strict: None,
        });
    TextOptions {
        format: Some(format),
    }
}

fn response_id_of(run_id: &str) -> String {
    crate::runtime::webhooks::response_id(run_id)
}

fn user_key(caller: &Caller) -> String {
    caller.owner().unwrap_or_default()
}

/// `include` and `prompt_cache_key` within OpenAI's bounds (agentd has no use for either).
fn check_hints(body: &CreateResponse) -> Result<(), ApiError> {
    if body
        .include
        .as_ref()
        .is_some_and(|include| include.len() > MAX_INCLUDE_ENTRIES)
    {
        return Err(ApiError::invalid_request(format!(
            "`include` holds at most {MAX_INCLUDE_ENTRIES} entries"
        ))
        .with_param("include"));
    }
    if body
        .prompt_cache_key
        .as_ref()
        .is_some_and(|key| key.chars().count() > MAX_PROMPT_CACHE_KEY_CHARS)
    {
        return Err(ApiError::invalid_request(format!(
            "`prompt_cache_key` is at most {MAX_PROMPT_CACHE_KEY_CHARS} characters"
        ))
        .with_param("prompt_cache_key"));
    }
    Ok(())
}

fn check_body(body: &CreateResponse) -> Result<(), ApiError> {
    check_hints(body)?;
    if body.background == Some(true) && body.store == Some(false) {
        return Err(ApiError::invalid_request(
            "a background response must be stored: leave out `store: false`",
        )
        .with_param("background"));
    }
    if body.webhook.is_some() && body.background != Some(true) {
        return Err(ApiError::invalid_request(
            "`webhook` announces a background response's end: send it with `background: true`",
        )
        .with_param("webhook"));
    }
    match &body.metadata {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(pairs)) if pairs.len() > MAX_METADATA_PAIRS => {
            Err(ApiError::invalid_request(format!(
                "`metadata` holds at most {MAX_METADATA_PAIRS} pairs; this one has {}",
                pairs.len()
            ))
            .with_param("metadata"))
        }
        Some(Value::Object(pairs)) => match pairs.iter().find(|(_, value)| !value.is_string()) {
            Some((key, _)) => Err(ApiError::invalid_request(format!(
                "`metadata.{key}` must be a string"
            ))
            .with_param(format!("metadata.{key}"))),
            None => Ok(()),
        },
        Some(_) => Err(
            ApiError::invalid_request("`metadata` must be an object of strings")
                .with_param("metadata"),
        ),
    }
}

/// The user's stored response, or a 404 naming `param`.
async fn stored_response(
    runtime: &Runtime,
    caller: &Caller,
    id: &str,
    param: &str,
) -> Result<StoredResponse, ApiError> {
    runtime
        .stored_response(&user_key(caller), id)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| ApiError::not_found(format!("No response with id `{id}`")).with_param(param))
}

/// The conversation a `previous_response_id` continues; while that response is still
/// answering, `busy` (the request's, else the agent's) decides (SPEC §13).
async fn previous_conversation(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    previous: &str,
    busy: BusyPolicy,
) -> Result<Vec<ChatMessage>, ApiError> {
    let stored = stored_response(runtime, caller, previous, "previous_response_id").await?;
    runtime
        .conversation_after(&stored.run_id, busy)
        .await
        .map_err(|error| match error {
            ContinueError::Busy => ApiError::conversation_busy(format!(
                "Response `{previous}` is still answering: wait, or send with `busy` set to enqueue or interrupt"
            ))
            .with_param("busy"),
            ContinueError::SteerUnsupported => ApiError::invalid_request(
                "`busy: steer` joins a `conversation` in progress; a `previous_response_id` still answering takes enqueue, reject or interrupt",
            )
            .with_param("busy"),
            ContinueError::Store(error) => ApiError::store(error),
            ContinueError::Follow(_) => ApiError::internal(),
        })?
        .ok_or_else(|| {
            ApiError::conflict(format!(
                "Response `{previous}` has not finished; continue it once it has"
            ))
            .with_param("previous_response_id")
        })
}

/// The request's `instructions` as a system message, then the conversation its
/// `previous_response_id` continues.
async fn instructions_and_previous(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    instructions: Option<&str>,
    previous: Option<&str>,
    busy: BusyPolicy,
) -> Result<Vec<ChatMessage>, ApiError> {
    let mut history = Vec::new();
    if let Some(instructions) = instructions.filter(|t| !t.trim().is_empty()) {
        history.push(ChatMessage::system(instructions));
    }
    if let Some(previous) = previous {
        history.extend(previous_conversation(runtime, caller, previous, busy).await?);
    }
    Ok(history)
}

/// The `input` item answering `call_id`, for a 400 about it.
fn output_item_param(input: Option<&Value>, call_id: &str) -> String {
    input
        .and_then(Value::as_array)
        .and_then(|items| {
            items.iter().position(|item| {
                item.get("type").and_then(Value::as_str) == Some("function_call_output")
                    && item.get("call_id").and_then(Value::as_str) == Some(call_id)
            })
        })
        .map_or_else(|| "input".into(), |index| format!("input[{index}].call_id"))
}

#[utoipa::path(
    post,
    path = "/v1/responses",
    tag = "responses",
    summary = "OpenAI Responses: run the agent named by `model`",
    request_body = CreateResponse,
    responses(
        (status = 200, description = "The `response` (with `background`, at once and `queued`), or with `stream: true` events each holding a `ResponseStreamFrame` (`event:` is its `type`)",
            content(
                (ResponseObject = "application/json"),
                (crate::http::wire::ServerSentEvent = "text/event-stream"),
            )),
        ErrorBody,
    ),
)]
pub async fn create_response(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<CreateResponse>,
) -> Result<Response, ApiError> {
    let (caller, _tag_only) =
        crate::http::shared::callers::caller_for_user(caller, body.user.as_ref())?;
    let agent = caller.model_agent(&runtime, &body.model)?;
    check_body(&body)?;
    let mut read = input::read_input(body.input.as_ref())?;
    if !read.approvals.is_empty() {
        return continue_after_approvals(runtime, caller, body, read, &agent.name).await;
    }
    let conversation = conversations::named_in(
        &runtime,
        &caller,
        body.conversation.as_ref(),
        body.previous_response_id.as_deref(),
    )
    .await?;
    if conversation.is_some() && read.prompt_item.is_none() {
        return Err(ApiError::invalid_request(
            "a response in a `conversation` goes on from a user message; send function_call_output items after `previous_response_id` instead",
        )
        .with_param("input"));
    }
    // A conversation's stored messages come first; the run stores the prompt and the answer.
    let mut history = instructions_and_previous(
        &runtime,
        &caller,
        body.instructions.as_deref(),
        body.previous_response_id.as_deref(),
        body.busy.unwrap_or(agent.busy),
    )
    .await?;
    let attachments = attachments::of_input(&runtime, &caller, &agent, &mut read).await?;
    history.extend(read.history);
    let (format, schema) = input::output_of(body.text.as_ref().and_then(|t| t.format.as_ref()))?;
    let mut echo = ResponseEcho::of(&body);
    echo.conversation = conversation.clone();
    let mut submission = caller.submission(agent, read.prompt);
    if let Some(id) = conversation {
        submission.user_id = Some(user_key(&caller));
        submission.conversation = Some(ConversationTurn::Continue(id));
    }
    submission.history = history;
    submission.attachments = attachments;
    submission.format = format;
    submission.schema = schema;
    submission.overrides = SamplingParams {
        temperature: body.temperature,
        top_p: body.top_p,
        max_output_tokens: body.max_output_tokens,
        ..SamplingParams::default()
    };
    submission.client_tools = input::client_tools_of(&body)?;
    submission.busy = body.busy;
    if echo.background {
        submission.on_disconnect = OnDisconnect::Continue;
        submission.announced_response = true;
        submission.handed_out = true;
        submission.webhook = crate::http::webhooks::checked_webhook(&runtime, body.webhook)?;
    }
    let handle = runtime.start_run(submission).await.map_err(|error| {
        if matches!(error, crate::runtime::StartError::InvalidOutput(_)) {
            return ApiError::from(error).with_param("text.format.schema");
        }
        if matches!(error, crate::runtime::StartError::ConversationBusy) {
            return ApiError::from(error).with_param("busy");
        }
        client_tools::start_error(error, &input::RESPONSE_TOOL_FIELDS, |call_id| {
            output_item_param(body.input.as_ref(), call_id)
        })
    })?;
    let run_id = handle.run_id.clone();
    let abort_guard = handle.abort_on_drop();
    // The response follows the run's recorded events, as any replica would.
    drop(handle.into_result());
    let id = response_id_of(&run_id);
    answer(
        &runtime,
        &caller,
        echo,
        &id,
        &run_id,
        read.items,
        Some(abort_guard),
    )
    .await
}

/// Stores the response (unless `store: false`) and answers it: streamed, at once
/// (`background`), or once its stretch of the run ends. `abort_guard` cancels the run of a
/// foreground response whose client leaves.
async fn answer(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    echo: ResponseEcho,
    id: &str,
    run_id: &str,
    items: Vec<Value>,
    abort_guard: Option<DropGuard>,
) -> Result<Response, ApiError> {
    let disarm = |guard: Option<DropGuard>| drop(guard.map(DropGuard::disarm));
    if echo.store {
        let stored = StoredResponse {
            id: id.to_string(),
            run_id: run_id.to_string(),
            user_key: user_key(caller),
            previous_response_id: echo.previous_response_id.clone(),
            request: serde_json::to_value(&echo).unwrap_or(Value::Null),
            input_items: Value::Array(input::with_ids(items, id)),
            created_at: chrono::Utc::now(),
        };
        runtime
            .store_response(&stored)
            .await
            .map_err(ApiError::store)?;
    }
    let projector = ResponseProjector::new(echo.object(id), run_id, echo.after_seq);
    let response = match (echo.stream, echo.background) {
        (true, background) => {
            // A background response runs on when its streaming client leaves.
            let guard = if background {
                disarm(abort_guard);
                None
            } else {
                abort_guard
            };
            stream_frames(runtime, projector, 0, guard)
        }
        (false, true) => {
            disarm(abort_guard);
            axum::Json(projector.response().clone()).into_response()
        }
        (false, false) => {
            let projector = follow_to_end(runtime, projector).await;
            disarm(abort_guard);
            match projector.summary() {
                // A failed run is an error in OpenAI's shape with its status (SPEC §4).
                Some(summary) if projector.response().status == ResponseStatus::Failed => {
                    ApiError::from_run(summary).into_response()
                }
                _ => axum::Json(projector.response().clone()).into_response(),
            }
        }
    };
    Ok(with_run_headers(response, run_id, None))
}

/// A request answering `mcp_approval_request` items: decides each call through the runtime (as
/// `POST /v1/runs/{id}/approvals/{call}` does) and answers with the run's next stretch. The
/// run is the previous response's, or (`store: false` clients replaying the request items)
/// the one the first item's id names. Every call still waiting in that wait must be answered:
/// the run resumes only once none waits.
async fn continue_after_approvals(
    runtime: Arc<Runtime>,
    caller: Caller,
    body: CreateResponse,
    read: ReadInput,
    agent: &str,
) -> Result<Response, ApiError> {
    let first = &read.approvals[0];
    let named_run = match &body.previous_response_id {
        Some(previous) => {
            stored_response(&runtime, &caller, previous, "previous_response_id")
                .await?
                .run_id
        }
        None => {
            WaitingCallRef::parse(&first.request_id, APPROVAL_REQUEST_PREFIX)
                .ok_or_else(|| no_pending_request(first))?
                .run_id
        }
    };
    let run = runtime
        .find_run(&named_run)
        .await
        .map_err(ApiError::store)?
        .filter(|run| caller.may_see_run(run))
        // Another user's run is as unknown as their response.
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "No approval request with id `{}`",
                first.request_id
            ))
            .with_param(first.param())
        })?;
    if run.agent != agent {
        return Err(ApiError::invalid_request(format!(
            "the approval requests are of a response of `{}`; send that as `model`",
            run.agent
        ))
        .with_param("model"));
    }
    let mut answers = Vec::with_capacity(read.approvals.len());
    for answer in &read.approvals {
        let call_id = WaitingCallRef::parse(&answer.request_id, APPROVAL_REQUEST_PREFIX)
            .filter(|named| named.run_id == run.id)
            .map(|named| named.call_id)
            .ok_or_else(|| no_pending_request(answer))?;
        let decision = if answer.approve {
            Decision::Approve {
                arguments: None,
                note: answer.reason.clone(),
            }
        } else {
            Decision::Deny {
                reason: answer.reason.clone(),
            }
        };
        answers.push((call_id, decision));
    }
    let by = crate::http::shared::approvals::decider(&caller);
    let wait = runtime
        .answer_wait(&run.id, answers, &by)
        .await
        .map_err(|error| {
            wait_answer_error(
                error,
                &WaitAnswerParams {
                    answer: &|index| read.approvals[index].param(),
                    arguments: &|index| read.approvals[index].param(),
                    unanswered: "input",
                    client_id: &|call_id| {
                        WaitingCallRef::new(&run.id, call_id).encode(APPROVAL_REQUEST_PREFIX)
                    },
                },
            )
        })?;
    let mut echo = ResponseEcho::of(&body);
    echo.after_seq = wait.last_seq;
    let id = format!("{}_{}", response_id_of(&run.id), wait.last_seq);
    answer(&runtime, &caller, echo, &id, &run.id, read.items, None).await
}

fn no_pending_request(answer: &ApprovalAnswer) -> ApiError {
    ApiError::invalid_request(format!(
        "`{}` matches no tool call waiting for approval in this conversation",
        answer.request_id
    ))
    .with_param(answer.param())
}

/// A response's frames after `starting_after`: its stretch of the run's events, replayed, then
/// live. A client that leaves drops `abort_guard` (a foreground response's client left: cancel
/// it); a response that ends where the run waits leaves the run to wait.
fn stream_frames(
    runtime: &Arc<Runtime>,
    projector: ResponseProjector,
    starting_after: u64,
    abort_guard: Option<DropGuard>,
) -> Response {
    let events = Events::stretch(runtime, projector.run_id().to_string(), projector.after());
    let translator = projector.starting_after(starting_after);
    drive::stream(
        runtime,
        events,
        translator,
        OnLeave::cancel_with(abort_guard),
    )
}

/// Feeds the response's stretch of the run's events until it ends.
async fn follow_to_end(runtime: &Arc<Runtime>, projector: ResponseProjector) -> ResponseProjector {
    let events = Events::stretch(runtime, projector.run_id().to_string(), projector.after());
    drive::collect(events, projector, None).await
}

/// Feeds the events there are now (waiting up to `quiet` for each next one).
async fn follow_for_now(
    runtime: &Arc<Runtime>,
    projector: ResponseProjector,
    quiet: Duration,
) -> ResponseProjector {
    let events = Events::stretch(runtime, projector.run_id().to_string(), projector.after());
    drive::collect(events, projector, Some(quiet)).await
}

/// The stored response's projector, before any event.
fn projector_of(stored: &StoredResponse) -> Result<ResponseProjector, ApiError> {
    let echo: ResponseEcho = serde_json::from_value(stored.request.clone()).map_err(|error| {
        tracing::error!(%error, id = %stored.id, "a stored response cannot be read");
        ApiError::internal()
    })?;
    Ok(ResponseProjector::new(
        echo.object(&stored.id),
        &stored.run_id,
        echo.after_seq,
    ))
}

#[utoipa::path(
    get,
    path = "/v1/responses/{response_id}",
    tag = "responses",
    summary = "A stored response, or (`stream=true`) its events from `starting_after` on",
    params(ResponsePath, RetrieveQuery),
    responses(
        (status = 200, description = "The `response`, or its events (`event:` is each `ResponseStreamFrame`'s `type`)",
            content(
                (ResponseObject = "application/json"),
                (crate::http::wire::ServerSentEvent = "text/event-stream"),
            )),
        ErrorBody,
    ),
)]
pub async fn get_response(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ResponsePath { response_id }): ApiPath<ResponsePath>,
    ApiQuery(query): ApiQuery<RetrieveQuery>,
) -> Result<Response, ApiError> {
    let stored = stored_response(&runtime, &caller, &response_id, "response_id").await?;
    let projector = projector_of(&stored)?;
    if query.stream.unwrap_or(false) {
        let frames = stream_frames(&runtime, projector, query.starting_after.unwrap_or(0), None);
        return Ok(with_run_headers(frames, &stored.run_id, None));
    }
    if query.starting_after.is_some() {
        return Err(
            ApiError::invalid_request("`starting_after` needs `stream=true`")
                .with_param("starting_after"),
        );
    }
    let projector = follow_for_now(&runtime, projector, SNAPSHOT_QUIET).await;
    Ok(axum::Json(projector.response().clone()).into_response())
}

#[utoipa::path(
    post,
    path = "/v1/responses/{response_id}/cancel",
    tag = "responses",
    summary = "Cancel a response that is still running",
    params(ResponsePath),
    responses(
        (status = 200, description = "The response, `cancelled` once its run ended", body = ResponseObject),
        ErrorBody,
    ),
)]
pub async fn cancel_response(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ResponsePath { response_id }): ApiPath<ResponsePath>,
) -> Result<Response, ApiError> {
    let stored = stored_response(&runtime, &caller, &response_id, "response_id").await?;
    runtime
        .cancel_run(&stored.run_id, CancelMode::Abort)
        .await
        .map_err(ApiError::store)?;
    let projector = projector_of(&stored)?;
    let projector =
        match tokio::time::timeout(CANCEL_WAIT, follow_to_end(&runtime, projector)).await {
            Ok(projector) => projector,
            Err(_) => follow_for_now(&runtime, projector_of(&stored)?, SNAPSHOT_QUIET).await,
        };
    Ok(axum::Json(projector.response().clone()).into_response())
}

#[utoipa::path(
    delete,
    path = "/v1/responses/{response_id}",
    tag = "responses",
    summary = "Delete a stored response (its run stays in the runs API)",
    params(ResponsePath),
    responses(
        (status = 200, description = "Deleted", body = DeletedResponse),
        ErrorBody,
    ),
)]
pub async fn delete_response(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ResponsePath { response_id }): ApiPath<ResponsePath>,
) -> Result<axum::Json<DeletedResponse>, ApiError> {
    let deleted = runtime
        .delete_stored_response(&user_key(&caller), &response_id)
        .await
        .map_err(ApiError::store)?;
    if !deleted {
        return Err(
            ApiError::not_found(format!("No response with id `{response_id}`"))
                .with_param("response_id"),
        );
    }
    Ok(axum::Json(DeletedResponse {
        id: response_id,
        object: DeletedKind::Response,
        deleted: true,
    }))
}

#[utoipa::path(
    get,
    path = "/v1/responses/{response_id}/input_items",
    tag = "responses",
    summary = "The input items of a stored response",
    params(ResponsePath),
    responses(
        (status = 200, description = "The items, in the order sent", body = InputItemList),
        ErrorBody,
    ),
)]
pub async fn input_items(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ResponsePath { response_id }): ApiPath<ResponsePath>,
) -> Result<axum::Json<InputItemList>, ApiError> {
    let stored = stored_response(&runtime, &caller, &response_id, "response_id").await?;
    let data = match stored.input_items {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    let id_of = |item: Option<&Value>| {
        item.and_then(|i| i.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(axum::Json(InputItemList {
        object: ListObject::List,
        first_id: id_of(data.first()),
        last_id: id_of(data.last()),
        has_more: false,
        data,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::shared::drive::translate_all;
    use crate::http::shared::goldens::{self, RUN_ID};

    fn projector() -> ResponseProjector {
        let body: CreateResponse =
            serde_json::from_value(json!({"model": "helper", "input": "hi"})).expect("body");
        let mut echo = ResponseEcho::of(&body);
        echo.created_at = 0;
        ResponseProjector::new(echo.object(&response_id_of(RUN_ID)), RUN_ID, 0)
    }

    fn with(fields: Value) -> CreateResponse {
        let mut body = json!({"model": "helper", "input": "hi"});
        if let (Some(body), Value::Object(fields)) = (body.as_object_mut(), fields) {
            body.extend(fields);
        }
        serde_json::from_value(body).expect("body")
    }

    #[test]
    fn include_and_prompt_cache_key_are_taken_at_and_refused_past_their_limits() {
        let key = |n: usize| with(json!({"prompt_cache_key": "k".repeat(n)}));
        assert!(check_body(&key(MAX_PROMPT_CACHE_KEY_CHARS)).is_ok());
        let refused = check_body(&key(MAX_PROMPT_CACHE_KEY_CHARS + 1)).expect_err("65");
        assert_eq!(refused.param.as_deref(), Some("prompt_cache_key"));
        let include = |n: usize| with(json!({"include": vec!["reasoning.encrypted_content"; n]}));
        assert!(check_body(&include(MAX_INCLUDE_ENTRIES)).is_ok());
        let refused = check_body(&include(MAX_INCLUDE_ENTRIES + 1)).expect_err("17");
        assert_eq!(refused.param.as_deref(), Some("include"));
    }

    #[test]
    fn truncation_is_echoed_as_sent() {
        let echo = ResponseEcho::of(&with(json!({"truncation": "auto"})));
        assert_eq!(echo.object("resp_x").truncation, Truncation::Auto);
        let echo = ResponseEcho::of(&with(json!({})));
        assert_eq!(echo.object("resp_x").truncation, Truncation::Disabled);
    }

    #[test]
    fn every_stored_run_streams_as_golden_response_events() {
        goldens::each("responses", projector);
    }

    #[test]
    fn every_stored_run_answers_a_golden_response_object() {
        for (name, events) in goldens::fixtures() {
            let mut projector = projector();
            translate_all(&mut projector, &events);
            insta::assert_json_snapshot!(format!("responses_body__{name}"), projector.response());
        }
    }
}
