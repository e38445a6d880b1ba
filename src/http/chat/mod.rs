//! Per-user chat (seeds/001): `POST /api/{user_id}/chat` continues (or starts) one of the user's
//! conversations through the run pipeline (which loads the history and stores the user's
//! message before the run and the answer after it); failures come back as the seeds' friendly
//! messages, never internals. `GET`/`DELETE /api/{user_id}/conversations[/{id}]` read and remove them
//! ([`manage`] renames them and rewinds one for an edited message);
//! `GET /api/{user_id}/approvals` lists the user's tool calls waiting for approval (SPEC §8).
//! The chat takes a JSON body or a `multipart/form-data` one with files ([`multipart`]).
//! This module holds the handlers; [`wire`] holds the bodies.

pub mod manage;
pub mod multipart;
pub mod wire;

use std::sync::Arc;

use super::auth::Caller;
pub(crate) use super::shared::callers::check_user;
use super::shared::callers::{chat_agent, conversation_agent};
use super::shared::cursor::PageCursor;
use crate::attachments::RequestBudget;
use crate::http::shared::attachments::AttachmentIntake;
// Where the identity code (auth, secrets) reads them; they live in the shared callers.
use super::error::{ApiError, ApiPath, ApiQuery, ErrorBody, parse_json_body};
pub(crate) use super::shared::callers::{check_user_id, friendly_failure};
use super::shared::run_events::numbered_events;
use super::sse::with_run_headers;
use super::wire::ListObject;
use crate::agent::{AgentResult, ExitReason};
use crate::runtime::{
    CLIENT_CONVERSATION_ID_RULE, ConversationTurn, Runtime, is_client_conversation_id,
};
use crate::store::ConversationCursor;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use wire::{
    ChatRequest, ChatResponse, ChatStatus, ConversationDetail, ConversationList,
    ConversationMessage, ConversationPath, ConversationSummary, ListQuery, QueuedMessage, UserPath,
};

/// The seeds/001 user-facing message for how a run ended.
fn friendly_error(result: &AgentResult) -> Option<&'static str> {
    (!result.success).then(|| friendly_failure(result.exit_reason))
}

fn chat_status(result: &AgentResult) -> ChatStatus {
    match result.exit_reason {
        _ if result.success => ChatStatus::Completed,
        ExitReason::MaxTurns | ExitReason::ContextLimit => ChatStatus::MaxIterationsReached,
        _ => ChatStatus::Error,
    }
}

/// `POST /api/{user_id}/chat` in the native mode with a JSON body (the router dispatches here).
pub async fn answer(
    runtime: Arc<Runtime>,
    caller: Caller,
    user_id: String,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let body: ChatRequest = parse_json_body(bytes)?;
    let budget = RequestBudget::new(&runtime.config().limits.attachments);
    respond(runtime, caller, user_id, body, Vec::new(), budget).await
}

/// `POST /api/{user_id}/chat` with a `multipart/form-data` body: the files are stored as they
/// stream in, then the message is answered as a JSON one is. A message refused before its run
/// starts leaves none of its files behind.
pub async fn answer_form(
    runtime: Arc<Runtime>,
    caller: Caller,
    user_id: String,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let form = multipart::read(&runtime, &caller, request).await?;
    let accepted = match prepare(
        &runtime,
        &caller,
        user_id,
        form.request,
        &form.files,
        form.budget,
    )
    .await
    {
        Ok(accepted) => accepted,
        Err(error) => {
            multipart::forget(&runtime, &caller, &form.files).await;
            return Err(error);
        }
    };
    match start(&runtime, accepted).await {
        Ok(started) => Ok(reply(runtime, started).await),
        Err(error) => {
            multipart::forget(&runtime, &caller, &form.files).await;
            Err(error)
        }
    }
}

/// Answers the chat body `body`, with `files` already stored (a form's), whose size counts in
/// `budget` against the request's attachment limit.
async fn respond(
    runtime: Arc<Runtime>,
    caller: Caller,
    user_id: String,
    body: ChatRequest,
    files: Vec<multipart::FormFile>,
    budget: RequestBudget,
) -> Result<Response, ApiError> {
    let accepted = prepare(&runtime, &caller, user_id, body, &files, budget).await?;
    let started = start(&runtime, accepted).await?;
    Ok(reply(runtime, started).await)
}

/// A message checked and ready to run: its submission and how it is answered.
struct AcceptedMessage {
    submission: crate::runtime::RunSubmission,
    stream: bool,
    on_disconnect: crate::config::OnDisconnect,
}

/// Checks the chat body (message, conversation id, agent, attachments, webhook) and builds the
/// run's submission; nothing runs yet.
async fn prepare(
    runtime: &Runtime,
    caller: &Caller,
    user_id: String,
    body: ChatRequest,
    files: &[multipart::FormFile],
    budget: RequestBudget,
) -> Result<AcceptedMessage, ApiError> {
    if body.message.trim().is_empty() && files.is_empty() && body.attachments.is_empty() {
        return Err(ApiError::invalid_request(
            "I couldn't understand that request. Please try rephrasing.",
        )
        .with_param("message"));
    }
    if let Some(id) = &body.conversation_id
        && !is_client_conversation_id(id)
    {
        return Err(ApiError::invalid_request(format!(
            "`conversation_id` must be {CLIENT_CONVERSATION_ID_RULE}"
        ))
        .with_param("conversation_id"));
    }
    if let Some(seq) = body.replace_from {
        manage::rewind_for_edit(runtime, &user_id, body.conversation_id.as_deref(), seq).await?;
    }
    let requested = match (&body.agent, &body.conversation_id) {
        (Some(agent), _) => Some(agent.clone()),
        (None, Some(id)) => conversation_agent(runtime, &user_id, id).await?,
        (None, None) => None,
    };
    let agent = chat_agent(runtime, caller, requested.as_deref())?;
    let mut intake = AttachmentIntake::new(runtime, caller, &agent).with_budget(budget);
    let mut attachments = Vec::with_capacity(files.len());
    for file in files {
        attachments.push(intake.readable(file.attachment.clone(), &file.part).await?);
    }
    attachments.extend(
        intake
            .chat_attachments(&body.attachments, "attachments")
            .await?,
    );
    let mut submission = caller.submission(agent, body.message);
    submission.attachments = attachments;
    submission.user_id = Some(user_id);
    // A conversation id the user does not have yet is created under that id, as AG-UI
    // threads and AI SDK chats are.
    submission.conversation = Some(match body.conversation_id {
        Some(id) => ConversationTurn::Named(id),
        None => ConversationTurn::Start,
    });
    let on_disconnect = body
        .on_disconnect
        .unwrap_or(runtime.config().server.on_disconnect);
    submission.on_disconnect = on_disconnect;
    submission.busy = body.busy;
    submission.webhook = crate::http::webhooks::checked_webhook(runtime, body.webhook)?;
    Ok(AcceptedMessage {
        submission,
        stream: body.stream.unwrap_or(false),
        on_disconnect,
    })
}

/// A message's run, started.
struct StartedMessage {
    handle: crate::runtime::RunHandle,
    stream: bool,
    on_disconnect: crate::config::OnDisconnect,
}

async fn start(
    runtime: &Arc<Runtime>,
    accepted: AcceptedMessage,
) -> Result<StartedMessage, ApiError> {
    let handle = runtime.start_run(accepted.submission).await?;
    Ok(StartedMessage {
        handle,
        stream: accepted.stream,
        on_disconnect: accepted.on_disconnect,
    })
}

/// The answer to a started message: its events as a stream, or the whole answer.
async fn reply(runtime: Arc<Runtime>, started: StartedMessage) -> Response {
    let StartedMessage {
        handle,
        stream,
        on_disconnect,
    } = started;
    let run_id = handle.run_id.clone();
    let conversation_id = handle.conversation_id.clone().unwrap_or_default();
    let response = if stream {
        numbered_events(&runtime, handle, on_disconnect)
    } else {
        let _cancel_on_drop = handle.abort_on_drop();
        // The pipeline saves the answer before it hands the result over.
        match handle.into_result().await {
            Ok(result) => axum::Json(chat_response(&conversation_id, &result)).into_response(),
            Err(_) => ApiError::internal().into_response(),
        }
    };
    with_run_headers(response, &run_id, Some(&conversation_id))
}

fn chat_response<'a>(conversation_id: &'a str, result: &'a AgentResult) -> ChatResponse<'a> {
    let error = friendly_error(result);
    ChatResponse {
        conversation_id,
        run_id: &result.run_id,
        response: if result.success {
            result.answer_text()
        } else {
            error.unwrap_or_default().to_string()
        },
        status: chat_status(result),
        iterations: result.turns,
        finish_reason: result.exit_reason.as_str(),
        error,
        usage: (&result.usage).into(),
    }
}

#[utoipa::path(
    get,
    path = "/api/{user_id}/conversations",
    tag = "chat",
    summary = "The user's conversations, newest first",
    params(UserPath, ListQuery),
    responses(
        (status = 200, description = "A page of conversations", body = ConversationList),
        ErrorBody,
    ),
)]
pub async fn list_conversations(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(UserPath { user_id }): ApiPath<UserPath>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(
            ApiError::invalid_request("`limit` must be between 1 and 1000").with_param("limit"),
        );
    }
    let before = query.before.as_deref().map(parse_cursor).transpose()?;
    let text = query
        .q
        .as_deref()
        .map(|text| crate::http::shared::titles::checked_title(text, "q"))
        .transpose()?;
    let page = runtime
        .conversations(&user_id, text, before.as_ref(), limit)
        .await
        .map_err(ApiError::store)?;
    let next = (page.len() as u32 == limit)
        .then(|| page.last().map(|c| PageCursor::encode(c.updated_at, &c.id)))
        .flatten();
    Ok(axum::Json(ConversationList {
        object: ListObject::List,
        data: page.iter().map(ConversationSummary::from).collect(),
        next,
    })
    .into_response())
}

/// `MICROS|ID` (what `next` holds), or the older `RFC3339|ID`.
fn parse_cursor(text: &str) -> Result<ConversationCursor, ApiError> {
    if text.contains('\0') {
        return Err(ApiError::nul_in("before"));
    }
    let cursor = PageCursor::parse_with_rfc3339(text).ok_or_else(|| {
        ApiError::invalid_request("`before` is not a cursor this API returned").with_param("before")
    })?;
    Ok(ConversationCursor {
        updated_at: cursor.at,
        id: cursor.id,
    })
}

#[utoipa::path(
    get,
    path = "/api/{user_id}/conversations/{id}",
    tag = "chat",
    summary = "A conversation and its messages",
    params(ConversationPath),
    responses(
        (status = 200, description = "The conversation", body = ConversationDetail),
        ErrorBody,
    ),
)]
pub async fn get_conversation(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ConversationPath { user_id, id }): ApiPath<ConversationPath>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let conversation = runtime
        .conversation(&user_id, &id)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| {
            ApiError::not_found("I couldn't find that conversation. It may have been deleted.")
        })?;
    let messages = runtime
        .conversation_messages(&user_id, &id)
        .await
        .map_err(ApiError::store)?;
    let queued = runtime
        .queued_messages(&user_id, &id)
        .await
        .map_err(ApiError::store)?;
    Ok(axum::Json(ConversationDetail {
        conversation: ConversationSummary::from(&conversation),
        messages: messages.iter().map(ConversationMessage::from).collect(),
        queued: QueuedMessage::listed(&queued),
    })
    .into_response())
}

#[utoipa::path(
    delete,
    path = "/api/{user_id}/conversations/{id}",
    tag = "chat",
    summary = "Delete a conversation",
    params(ConversationPath),
    responses(
        (status = 204, description = "Deleted"),
        ErrorBody,
    ),
)]
pub async fn delete_conversation(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ConversationPath { user_id, id }): ApiPath<ConversationPath>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let deleted = runtime
        .delete_conversation(&user_id, &id)
        .await
        .map_err(ApiError::store)?;
    if deleted {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found(
            "I couldn't find that conversation. It may have been deleted.",
        ))
    }
}

#[utoipa::path(
    get,
    path = "/api/{user_id}/approvals",
    tag = "chat",
    summary = "The user's tool calls waiting for approval, oldest first",
    params(UserPath),
    responses(
        (status = 200, description = "The waiting calls; decide each with POST /v1/runs/{run_id}/approvals/{call_id}", body = crate::http::shared::approvals::ApprovalList),
        ErrorBody,
    ),
)]
pub async fn list_approvals(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(UserPath { user_id }): ApiPath<UserPath>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let waiting = runtime
        .waiting_approvals(Some(&user_id))
        .await
        .map_err(ApiError::store)?;
    Ok(axum::Json(crate::http::shared::approvals::ApprovalList::of(waiting)).into_response())
}
