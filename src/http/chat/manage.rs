//! Managing a user's conversations beyond reading them (SPEC §10): `PATCH
//! /api/{user_id}/conversations/{id}` renames one, and an edited or regenerated message
//! (`replace_from` on the chat request) rewinds the stored history to just before that user
//! message, so the new run answers the edited history and the store keeps it as answered.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};

use super::check_user;
use super::wire::{ConversationPatch, ConversationPath, ConversationSummary, QueuedMessagePath};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::http::shared::titles::checked_title;
use crate::runtime::Runtime;
use crate::store::StoreError;

/// The not-found message of every conversation route.
const NO_SUCH_CONVERSATION: &str = "I couldn't find that conversation. It may have been deleted.";

#[utoipa::path(
    patch,
    path = "/api/{user_id}/conversations/{id}",
    tag = "chat",
    summary = "Rename a conversation",
    params(ConversationPath),
    request_body = ConversationPatch,
    responses(
        (status = 200, description = "The renamed conversation", body = ConversationSummary),
        ErrorBody,
    ),
)]
pub async fn rename_conversation(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ConversationPath { user_id, id }): ApiPath<ConversationPath>,
    ApiJson(patch): ApiJson<ConversationPatch>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let title = checked_title(&patch.title, "title")?;
    let renamed = runtime
        .rename_conversation(&user_id, &id, title)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| ApiError::not_found(NO_SUCH_CONVERSATION))?;
    Ok(axum::Json(ConversationSummary::from(&renamed)).into_response())
}

#[utoipa::path(
    delete,
    path = "/api/{user_id}/conversations/{id}/queue/{run_id}",
    tag = "chat",
    summary = "Withdraw a message still waiting for its turn",
    params(QueuedMessagePath),
    responses(
        (status = 204, description = "Withdrawn: it is never stored or answered, and its run ends `cancelled`"),
        ErrorBody,
    ),
)]
pub async fn withdraw_queued(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(QueuedMessagePath {
        user_id,
        id,
        run_id,
    }): ApiPath<QueuedMessagePath>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let withdrawn = runtime
        .withdraw_message(&user_id, &id, &run_id)
        .await
        .map_err(ApiError::store)?;
    if withdrawn {
        return Ok(axum::http::StatusCode::NO_CONTENT.into_response());
    }
    Err(ApiError::not_found(
        "No such message waits in this conversation: it may be answered already",
    )
    .with_param("run_id"))
}

/// Removes user message `seq` and everything after it from the conversation, so the chat
/// request's message is answered in its place. 404 naming `replace_from` when the conversation
/// has no message `seq` (naming `conversation_id` when there is no such conversation or none is
/// named), 409 naming `replace_from` when message `seq` is an answer, 409 `conversation_busy`
/// while one of its runs is in progress.
pub(crate) async fn rewind_for_edit(
    runtime: &Runtime,
    user_id: &str,
    conversation_id: Option<&str>,
    seq: i64,
) -> Result<(), ApiError> {
    let conversation_id = conversation_id.ok_or_else(|| {
        ApiError::not_found(
            "`replace_from` names a message of a conversation: name it in `conversation_id`",
        )
        .with_param("conversation_id")
    })?;
    let messages = runtime
        .conversation_messages(user_id, conversation_id)
        .await
        .map_err(ApiError::store)?;
    let exists = runtime
        .conversation(user_id, conversation_id)
        .await
        .map_err(ApiError::store)?
        .is_some();
    if !exists {
        return Err(ApiError::not_found(NO_SUCH_CONVERSATION).with_param("conversation_id"));
    }
    match messages.iter().find(|m| m.seq == seq) {
        Some(message) if message.role == "user" => {}
        Some(message) => {
            return Err(ApiError::conflict(format!(
                "`replace_from` must name a user message; message {seq} is the {}'s",
                message.role
            ))
            .with_param("replace_from"));
        }
        None => {
            return Err(ApiError::not_found(format!(
                "`replace_from`: the conversation has no message {seq}"
            ))
            .with_param("replace_from"));
        }
    }
    let answering = runtime
        .conversation_is_answering(user_id, conversation_id)
        .await
        .map_err(ApiError::store)?;
    if answering {
        return Err(ApiError::conversation_busy(
            "An answer in this conversation is still in progress: stop it or wait, then edit",
        ));
    }
    match runtime
        .cut_conversation_from(user_id, conversation_id, seq)
        .await
    {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound { .. }) => Err(ApiError::not_found(NO_SUCH_CONVERSATION)),
        Err(error) => Err(ApiError::store(error)),
    }
}
