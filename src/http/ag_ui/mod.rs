//! AG-UI (SPEC §9.4): `POST /ag-ui/{agent}` runs the agent on the thread's last user message
//! and streams the run as AG-UI events (SSE `data:` frames). A `threadId` is one of the
//! caller's conversations (created under that id when new); a key bound to no user names one
//! with `forwardedProps.userId`, or runs without a stored conversation, the posted messages
//! being the history. Client `tools` are refused with a 400 naming the field until client tools
//! land. This module checks the input and starts the run; [`wire`] renders the frames from the
//! shared [`ui_stream`](super::ui_stream) parts.

pub mod wire;

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::Response;
use axum::response::sse::Event;
use futures_util::{Stream, StreamExt};

use super::auth::Caller;
use super::chat::check_user;
use super::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use super::sse::{sse_response, with_run_headers};
use super::ui_stream::{live_events, ui_parts};
use crate::llm::ChatMessage;
use crate::runtime::{ConversationTurn, RunSubmission, Runtime};
use wire::{AgUiMessage, AgUiPath, FrameIds, RunAgentInput, frames};

/// The longest `threadId` accepted: it becomes a conversation id.
const MAX_THREAD_ID_CHARS: usize = 128;

#[utoipa::path(
    post,
    path = "/ag-ui/{agent}",
    tag = "ag-ui",
    summary = "Run an agent with AG-UI's RunAgentInput; AG-UI events as SSE",
    params(AgUiPath),
    request_body = RunAgentInput,
    responses(
        (status = 200, description = "AG-UI events (`data: {\"type\": \"RUN_STARTED\", …}`) until `RUN_FINISHED` or `RUN_ERROR`", content_type = "text/event-stream", body = crate::http::wire::ServerSentEvent),
        ErrorBody,
    ),
)]
pub async fn run(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(AgUiPath { agent }): ApiPath<AgUiPath>,
    ApiJson(input): ApiJson<RunAgentInput>,
) -> Result<Response, ApiError> {
    check_input(&input)?;
    let agent = runtime.agents().get(&agent).ok_or_else(|| {
        ApiError::not_found(format!(
            "No agent named `{agent}`; GET /v1/agents lists them"
        ))
    })?;
    caller.check_agent(&agent.name)?;
    let user_id = thread_user(&caller, &input)?;
    let Some((prompt, earlier)) = prompt_and_history(&input.messages) else {
        return Ok(nothing_to_answer(&runtime, input.thread_id, input.run_id));
    };
    let mut submission = RunSubmission::new(agent, prompt);
    submission.key = caller.limited_key.clone();
    submission.on_disconnect = runtime.config().server.on_disconnect;
    match user_id {
        Some(user_id) => {
            submission.user_id = Some(user_id);
            submission.conversation = Some(ConversationTurn::Named(input.thread_id.clone()));
        }
        None => submission.history = earlier,
    }
    let on_disconnect = submission.on_disconnect;
    let handle = runtime.start_run(submission).await?;
    let run_id = handle.run_id.clone();
    let conversation_id = handle.conversation_id.clone();
    let events = ag_ui_events(
        ui_parts(run_id.clone(), live_events(handle, on_disconnect)),
        input.thread_id,
        input.run_id,
    );
    let response = sse_response(&runtime, events);
    Ok(with_run_headers(
        response,
        &run_id,
        conversation_id.as_deref(),
    ))
}

fn check_input(input: &RunAgentInput) -> Result<(), ApiError> {
    if input.tools.as_ref().is_some_and(|tools| !tools.is_empty()) {
        return Err(ApiError::invalid_request(
            "Client tools are not supported yet: send `tools` empty or leave it out",
        )
        .with_param("tools"));
    }
    if input
        .resume
        .as_ref()
        .is_some_and(|resume| !resume.is_empty())
    {
        return Err(ApiError::invalid_request(
            "`resume` is not supported: decide a pending approval with \
             POST /v1/runs/{run_id}/approvals/{call_id}",
        )
        .with_param("resume"));
    }
    let length = input.thread_id.chars().count();
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    if !(1..=MAX_THREAD_ID_CHARS).contains(&length) || !input.thread_id.chars().all(allowed) {
        return Err(ApiError::invalid_request(format!(
            "`threadId` must be 1 to {MAX_THREAD_ID_CHARS} ASCII letters, digits or `- _ . :`"
        ))
        .with_param("threadId"));
    }
    if input.run_id.is_empty() {
        return Err(ApiError::invalid_request("`runId` must not be empty").with_param("runId"));
    }
    Ok(())
}

/// The last user message's text (the prompt) and the messages before it as history; `None`
/// when no user message has text.
fn prompt_and_history(messages: &[AgUiMessage]) -> Option<(String, Vec<ChatMessage>)> {
    let last_user = messages.iter().rposition(|m| m.role == "user")?;
    let prompt = messages[last_user].text();
    if prompt.trim().is_empty() {
        return None;
    }
    let earlier = messages[..last_user]
        .iter()
        .filter_map(|m| {
            let text = m.text();
            match m.role.as_str() {
                "user" => Some(ChatMessage::user(text)),
                "assistant" if !text.is_empty() => Some(ChatMessage::assistant(text)),
                _ => None,
            }
        })
        .collect();
    Some((prompt, earlier))
}

/// A thread with no user message to answer: AG-UI clients are told in the stream, as
/// `RUN_ERROR` (code `invalid_request`), which they surface as a failed run; no run starts.
fn nothing_to_answer(runtime: &Runtime, thread_id: String, run_id: String) -> Response {
    let frames = [
        serde_json::json!({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}),
        serde_json::json!({
            "type": "RUN_ERROR", "code": "invalid_request",
            "message": "`messages` has no user message with text to answer",
        }),
    ];
    let events: Vec<Result<Event, Infallible>> = frames
        .iter()
        .map(|frame| Ok(Event::default().data(frame.to_string())))
        .collect();
    sse_response(runtime, futures_util::stream::iter(events))
}

/// The user whose conversation the thread is: the key's, else `forwardedProps.userId` (which
/// the key must be allowed to act for), else none.
fn thread_user(caller: &Caller, input: &RunAgentInput) -> Result<Option<String>, ApiError> {
    let named = input
        .forwarded_props
        .as_ref()
        .and_then(|props| props.get("userId"))
        .and_then(serde_json::Value::as_str);
    match (caller.user_id.as_deref(), named) {
        (Some(own), Some(named)) if own != named => Err(ApiError::forbidden(
            "This API key may not act for the user named in `forwardedProps.userId`",
        )
        .with_param("forwardedProps.userId")),
        (Some(own), _) => Ok(Some(own.to_string())),
        (None, Some(named)) => {
            check_user(caller, named).map_err(|e| e.with_param("forwardedProps.userId"))?;
            Ok(Some(named.to_string()))
        }
        (None, None) => Ok(None),
    }
}

/// The parts as AG-UI `data:` frames.
fn ag_ui_events(
    parts: impl Stream<Item = super::ui_stream::UiPart> + Send + 'static,
    thread_id: String,
    run_id: String,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    parts.flat_map(move |part| {
        let ids = FrameIds {
            thread_id: &thread_id,
            run_id: &run_id,
        };
        let events: Vec<Result<Event, Infallible>> = frames(part, &ids)
            .into_iter()
            .map(|frame| Ok(Event::default().data(frame.to_string())))
            .collect();
        futures_util::stream::iter(events)
    })
}
