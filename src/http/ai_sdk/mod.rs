//! The Vercel AI SDK UI message stream (SPEC §9.6) on the per-user chat route: `POST
//! /api/{user_id}/chat` with `Accept: text/x-ai-sdk-ui` or `?protocol=ai-sdk` answers with the
//! stream, and takes either the chat body or the one `useChat`'s default transport sends (`id`
//! is the conversation, the last user message the prompt); that body alone selects the stream. `GET
//! /api/{user_id}/chat/{conversation_id}/stream` resumes the answer in progress (204 when none).
//! A stream ends where its run ends or waits for tool approvals; a body whose last assistant
//! message holds `approval-responded` tool parts (what `addToolApprovalResponse` leaves) decides
//! them and streams the resumed run.
//! Runs started here continue when the client leaves (a reload resumes them); Stop is
//! `POST /v1/runs/{run_id}/cancel`. A failed answer's `error` is the chat's friendly message,
//! never internals. This module starts and finds runs; [`wire`] renders the shared
//! [`ui`](super::shared::ui) parts.

pub mod wire;

use crate::vocabulary::RunStatus;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::auth::Caller;
use super::error::{ApiError, ApiPath, ErrorBody, parse_json_body};
use super::shared::approvals::{MAX_REASON_CHARS, WaitAnswerParams, decider, wait_answer_error};
use super::shared::attachments::{AttachmentIntake, ChatAttachment};
use super::shared::callers::{chat_agent, check_user, conversation_agent, friendly_failure};
use super::shared::chat_request::ChatRequest;
use super::shared::drive::{self, Events, Frame, OnLeave};
use super::shared::ui::{UiFrames, UiPart, UiRender};
use super::sse::with_run_headers;
use crate::agent::ExitReason;
use crate::agent::approval::Decision;
use crate::config::OnDisconnect;
use crate::runtime::{
    CLIENT_CONVERSATION_ID_RULE, ConversationTurn, Runtime, is_client_conversation_id,
};
use crate::store::{RunFilter, RunOwnerFilter};
use wire::{ACCEPT_VALUE, STREAM_HEADER, StreamPath, UseChatRequest, chunks};

/// Whether a chat request asks for the UI message stream.
pub fn requested(headers: &HeaderMap, query: Option<&str>) -> bool {
    let accepts = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains(ACCEPT_VALUE));
    let by_query = query.is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "protocol" && v == "ai-sdk")
    });
    accepts || by_query
}

/// What a chat request in this mode asks: the prompt, the conversation and the agent.
struct ChatAsk {
    prompt: String,
    conversation: ConversationTurn,
    agent: Option<String>,
    busy: Option<crate::config::BusyPolicy>,
    /// The prompt's files, each with the request part it came from (SPEC §11).
    files: Vec<(String, ChatAttachment)>,
}

/// `POST /api/{user_id}/chat` in AI SDK mode (the chat handler routes here).
pub async fn chat(
    runtime: Arc<Runtime>,
    caller: Caller,
    user_id: String,
    body: &[u8],
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    if let Some(responses) = approval_responses(body)? {
        return answer_approvals(runtime, caller, user_id, responses).await;
    }
    let ask = parse_ask(body)?;
    let requested_agent = match (&ask.agent, &ask.conversation) {
        (Some(agent), _) => Some(agent.clone()),
        (None, ConversationTurn::Continue(id) | ConversationTurn::Named(id)) => {
            conversation_agent(&runtime, &user_id, id).await?
        }
        (None, ConversationTurn::Start) => None,
    };
    let agent = chat_agent(&runtime, &caller, requested_agent.as_deref())?;
    let mut intake = AttachmentIntake::new(&runtime, &caller, &agent);
    let mut attachments = Vec::new();
    for (part, file) in &ask.files {
        attachments.push(intake.chat_attachment(file, part).await?);
    }
    let mut submission = caller.submission(agent, ask.prompt);
    submission.attachments = attachments;
    submission.user_id = Some(user_id);
    submission.conversation = Some(ask.conversation);
    submission.busy = ask.busy;
    // A reload resumes the answer, so leaving never cancels it; Stop is the cancel route.
    submission.on_disconnect = OnDisconnect::Continue;
    let handle = runtime.start_run(submission).await?;
    let run_id = handle.run_id.clone();
    let conversation_id = handle.conversation_id.clone();
    // The stream ends where the run ends or waits for approvals: `useChat` answers those in a
    // request of its own (`addToolApprovalResponse`), which resumes the run.
    drop(handle.into_result());
    let events = Events::stretch(&runtime, run_id.clone(), 0);
    Ok(with_run_headers(
        stream_response(&runtime, run_id.clone(), events),
        &run_id,
        conversation_id.as_deref(),
    ))
}

/// The approvals a `useChat` body answers: its last message is the assistant's, with tool parts
/// in state `approval-responded` (`approval: {id, approved, reason?}`), as `addToolApprovalResponse`
/// leaves them; each with the part's path.
struct ApprovalResponses {
    chat_id: String,
    answers: Vec<(String, Decision)>,
    fields: Vec<String>,
}

fn approval_responses(body: &[u8]) -> Result<Option<ApprovalResponses>, ApiError> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Ok(None);
    };
    let (Some(chat_id), Some(messages)) = (
        value.get("id").and_then(Value::as_str),
        value.get("messages").and_then(Value::as_array),
    ) else {
        return Ok(None);
    };
    let Some(last) = messages.last().filter(|m| m["role"] == "assistant") else {
        return Ok(None);
    };
    let index = messages.len() - 1;
    let mut answers = Vec::new();
    let mut fields = Vec::new();
    for (part_index, part) in last["parts"].as_array().into_iter().flatten().enumerate() {
        if part["state"] != "approval-responded" {
            continue;
        }
        let field = format!("messages[{index}].parts[{part_index}].approval");
        let approval = &part["approval"];
        let (Some(id), Some(approved)) = (approval["id"].as_str(), approval["approved"].as_bool())
        else {
            return Err(ApiError::invalid_request(
                "an `approval-responded` part needs `approval: {id, approved}`",
            )
            .with_param(field));
        };
        let reason = approval["reason"].as_str().map(str::to_string);
        if reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
        {
            return Err(ApiError::invalid_request(format!(
                "`reason` is at most {MAX_REASON_CHARS} characters"
            ))
            .with_param(format!("{field}.reason")));
        }
        let decision = if approved {
            Decision::Approve {
                arguments: None,
                note: reason,
            }
        } else {
            Decision::Deny { reason }
        };
        answers.push((id.to_string(), decision));
        fields.push(field);
    }
    if answers.is_empty() {
        return Ok(None);
    }
    Ok(Some(ApprovalResponses {
        chat_id: chat_id.to_string(),
        answers,
        fields,
    }))
}

/// Decides the calls the chat's waiting run asked about and streams the resumed run.
async fn answer_approvals(
    runtime: Arc<Runtime>,
    caller: Caller,
    user_id: String,
    responses: ApprovalResponses,
) -> Result<Response, ApiError> {
    let filter = RunFilter {
        owner: RunOwnerFilter::User(Some(user_id)),
        agent: None,
        agents_allowed: caller.visible_agents(&runtime),
        statuses: vec![RunStatus::WaitingApproval.as_str().to_string()],
        conversation_id: Some(responses.chat_id.clone()),
        after: None,
        limit: 1,
    };
    let run = runtime
        .list_runs(&filter)
        .await
        .map_err(ApiError::store)?
        .into_iter()
        .next()
        .ok_or_else(|| {
            ApiError::invalid_request(format!(
                "no answer of chat `{}` waits for an approval",
                responses.chat_id
            ))
            .with_param(responses.fields[0].clone())
        })?;
    let fields = &responses.fields;
    let wait = runtime
        .answer_wait(&run.id, responses.answers, &decider(&caller))
        .await
        .map_err(|error| {
            wait_answer_error(
                error,
                &WaitAnswerParams {
                    answer: &|index| format!("{}.id", fields[index.min(fields.len() - 1)]),
                    arguments: &|index| fields[index.min(fields.len() - 1)].clone(),
                    unanswered: "messages",
                    client_id: &|call_id| call_id.to_string(),
                },
            )
        })?;
    let started = UiPart::RunStarted {
        run_id: run.id.clone(),
        conversation_id: run.conversation_id.clone(),
    };
    let events = Events::stretch(&runtime, run.id.clone(), wait.last_seq);
    let translator = UiFrames::new(run.id.clone(), UiMessageStream).starting_with(started);
    let mut response = drive::stream(&runtime, events, translator, OnLeave::Continue);
    response
        .headers_mut()
        .insert(STREAM_HEADER, HeaderValue::from_static("v1"));
    Ok(with_run_headers(
        response,
        &run.id,
        run.conversation_id.as_deref(),
    ))
}

/// Whether a chat body is the one `useChat` sends (`id`, `messages`): the chat route has no
/// such fields, so such a body selects this protocol without a header (`useChat` unchanged).
pub fn is_use_chat_body(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        id: Option<Value>,
        messages: Option<Value>,
    }
    serde_json::from_slice::<Probe>(body).is_ok_and(|probe| {
        probe.id.is_some() && probe.messages.as_ref().is_some_and(Value::is_array)
    })
}

/// The `useChat` body (it has `messages`) or the chat route's own.
fn parse_ask(body: &[u8]) -> Result<ChatAsk, ApiError> {
    let value: Value = parse_json_body(body)?;
    if value.get("messages").is_some() {
        return use_chat_ask(parse_json_body(body)?);
    }
    let request: ChatRequest = parse_json_body(body)?;
    if request.message.trim().is_empty() {
        return Err(ApiError::invalid_request("`message` must not be empty").with_param("message"));
    }
    let files = request
        .attachments
        .iter()
        .enumerate()
        .map(|(index, file)| (format!("attachments[{index}]"), file.clone()))
        .collect();
    Ok(ChatAsk {
        prompt: request.message,
        conversation: request
            .conversation_id
            .map_or(ConversationTurn::Start, ConversationTurn::Continue),
        agent: request.agent,
        busy: request.busy,
        files,
    })
}

fn use_chat_ask(request: UseChatRequest) -> Result<ChatAsk, ApiError> {
    if !is_client_conversation_id(&request.id) {
        return Err(ApiError::invalid_request(format!(
            "`id` (the chat id) must be {CLIENT_CONVERSATION_ID_RULE}"
        ))
        .with_param("id"));
    }
    if let Some(trigger) = request.trigger.as_deref()
        && !matches!(trigger, "submit-message" | "regenerate-message")
    {
        return Err(ApiError::invalid_request(format!(
            "`trigger` {trigger:?} is not `submit-message` or `regenerate-message`"
        ))
        .with_param("trigger"));
    }
    let last_user = request.messages.iter().rposition(|m| m.role == "user");
    let files = last_user
        .map(|index| request.messages[index].files(&format!("messages[{index}].parts")))
        .unwrap_or_default();
    let prompt = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .map(wire::UiMessage::text)
        .filter(|text| !text.trim().is_empty())
        .ok_or_else(|| {
            ApiError::invalid_request("`messages` needs a user message with a text part")
                .with_param("messages")
        })?;
    Ok(ChatAsk {
        prompt,
        conversation: ConversationTurn::Named(request.id),
        agent: request.agent,
        busy: request.busy,
        files,
    })
}

#[utoipa::path(
    get,
    path = "/api/{user_id}/chat/{conversation_id}/stream",
    tag = "chat",
    summary = "Resume the answer in progress in a conversation as an AI SDK UI message stream",
    params(StreamPath),
    responses(
        (status = 200, description = "The answer's UI message stream from its start (`data: {\"type\": \"start\"}` … `data: [DONE]`)", content_type = "text/event-stream", body = crate::http::wire::ServerSentEvent),
        (status = 204, description = "No answer is in progress in this conversation"),
        ErrorBody,
    ),
)]
pub async fn resume_stream(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(StreamPath {
        user_id,
        conversation_id,
    }): ApiPath<StreamPath>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let filter = RunFilter {
        owner: RunOwnerFilter::User(Some(user_id)),
        agent: None,
        agents_allowed: caller.visible_agents(&runtime),
        statuses: RunStatus::NOT_ENDED
            .iter()
            .map(|status| status.as_str().to_string())
            .collect(),
        conversation_id: Some(conversation_id),
        after: None,
        limit: 1,
    };
    let runs = runtime.list_runs(&filter).await.map_err(ApiError::store)?;
    let Some(run) = runs.into_iter().next() else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let events = Events::followed(&runtime, run.id.clone(), 0);
    Ok(with_run_headers(
        stream_response(&runtime, run.id.clone(), events),
        &run.id,
        run.conversation_id.as_deref(),
    ))
}

/// The run's events as the UI message stream, ending with `[DONE]`. Leaving never cancels the
/// run: a reload resumes the answer.
fn stream_response(runtime: &Runtime, run_id: String, events: Events) -> Response {
    let translator = UiFrames::new(run_id, UiMessageStream);
    let mut response = drive::stream(runtime, events, translator, OnLeave::Continue);
    response
        .headers_mut()
        .insert(STREAM_HEADER, HeaderValue::from_static("v1"));
    response
}

/// A failed run's error as the per-user chat says it to end users (seeds/001): never internals.
fn for_end_users(part: UiPart) -> UiPart {
    match part {
        UiPart::Finished(mut end) if end.error.is_some() => {
            let reason = end.exit_reason.unwrap_or(ExitReason::InternalError);
            end.error = Some(friendly_failure(reason).to_string());
            UiPart::Finished(end)
        }
        other => other,
    }
}

/// The AI SDK's UI message stream: a `data:` frame per chunk, then `[DONE]`.
struct UiMessageStream;

impl UiRender for UiMessageStream {
    fn render(&self, part: UiPart, out: &mut Vec<Frame>) {
        out.extend(
            chunks(for_end_users(part))
                .into_iter()
                .map(|chunk| Frame::data(chunk.to_string())),
        );
    }

    fn close(&self, out: &mut Vec<Frame>) {
        out.push(Frame::data("[DONE]"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::shared::goldens::{self, RUN_ID};

    #[test]
    fn every_stored_run_streams_as_a_golden_ui_message_stream() {
        goldens::each("ai_sdk", || UiFrames::new(RUN_ID, UiMessageStream));
    }
}
