//! Per-user chat (seeds/001): `POST /api/{user_id}/chat` continues (or starts) one of the user's
//! conversations through the run pipeline (which loads the history and stores the user's
//! message before the run and the answer after it); failures come back as the seeds' friendly
//! messages, never internals. `GET`/`DELETE /api/{user_id}/conversations[/{id}]` read and remove them.

use std::sync::Arc;

use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, ApiJson};
use super::runs::numbered_events;
use super::sse::{sse_response, with_run_headers};
use crate::agent::{AgentResult, ExitReason};
use crate::config::AgentSpec;
use crate::runtime::{ConversationTurn, RunSubmission, Runtime};
use crate::store::{Conversation, ConversationCursor};

/// The agent that answers when a request names none.
const DEFAULT_AGENT: &str = "chat";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    pub message: String,
    #[serde(default)]
    pub conversation_id: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub stream: Option<bool>,
}

/// The seeds/001 user-facing message for how a run ended.
fn friendly_error(result: &AgentResult) -> Option<&'static str> {
    match result.exit_reason {
        _ if result.success => None,
        ExitReason::RateLimited => {
            Some("I'm currently experiencing high demand. Please try again in a moment.")
        }
        ExitReason::LlmError
        | ExitReason::AuthFailure
        | ExitReason::QuotaExceeded
        | ExitReason::NoLlmResponse => {
            Some("I'm having trouble connecting to my AI service. Please try again.")
        }
        ExitReason::MaxTurns | ExitReason::ContextLimit => Some(
            "I need more time to process this request. Please try breaking it into smaller steps.",
        ),
        ExitReason::EmptyInput => {
            Some("I couldn't understand that request. Please try rephrasing.")
        }
        _ => Some("An unexpected error occurred. Please try again or contact support."),
    }
}

fn chat_status(result: &AgentResult) -> &'static str {
    match result.exit_reason {
        _ if result.success => "completed",
        ExitReason::MaxTurns | ExitReason::ContextLimit => "max_iterations_reached",
        _ => "error",
    }
}

fn check_user(caller: &Caller, user_id: &str) -> Result<(), ApiError> {
    if caller.may_act_for(user_id) {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "You don't have permission to access that user's conversations",
        ))
    }
}

pub async fn chat(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    Path(user_id): Path<String>,
    ApiJson(body): ApiJson<ChatRequest>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    if body.message.trim().is_empty() {
        return Err(ApiError::invalid_request(
            "I couldn't understand that request. Please try rephrasing.",
        )
        .with_param("message"));
    }
    let agent = chat_agent(&runtime, &caller, body.agent.as_deref())?;
    let mut submission = RunSubmission::new(agent, body.message);
    submission.user_id = Some(user_id);
    submission.key = caller.limited_key.clone();
    submission.conversation = Some(match body.conversation_id {
        Some(id) => ConversationTurn::Continue(id),
        None => ConversationTurn::Start,
    });
    let handle = runtime.start_run(submission).await?;
    let run_id = handle.run_id.clone();
    let conversation_id = handle.conversation_id.clone().unwrap_or_default();
    let response = if body.stream.unwrap_or(false) {
        let on_disconnect = runtime.config().server.on_disconnect;
        sse_response(&runtime, numbered_events(handle, on_disconnect))
    } else {
        let _cancel_on_drop = handle.abort_on_drop();
        // The pipeline saves the answer before it hands the result over.
        let result = handle.result.await.map_err(|_| ApiError::internal())?;
        axum::Json(chat_response(&conversation_id, &result)).into_response()
    };
    Ok(with_run_headers(response, &run_id, Some(&conversation_id)))
}

fn chat_agent(
    runtime: &Runtime,
    caller: &Caller,
    requested: Option<&str>,
) -> Result<Arc<AgentSpec>, ApiError> {
    let name = requested.unwrap_or(DEFAULT_AGENT);
    let agent = runtime.agents().get(name).ok_or_else(|| {
        ApiError::not_found(format!("No agent named `{name}`; name one with `agent`"))
            .with_param("agent")
    })?;
    caller.check_agent(&agent.name)?;
    Ok(agent)
}

fn chat_response(conversation_id: &str, result: &AgentResult) -> Value {
    let usage = &result.usage;
    json!({
        "conversation_id": conversation_id,
        "run_id": result.run_id,
        "response": if result.success { result.answer_text() } else { friendly_error(result).unwrap_or_default().to_string() },
        "status": chat_status(result),
        "iterations": result.turns,
        "finish_reason": result.exit_reason.as_str(),
        "error": friendly_error(result),
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, "total_tokens": usage.total_tokens},
    })
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next` value of the previous page.
    #[serde(default)]
    pub before: Option<String>,
}

fn conversation_json(conversation: &Conversation) -> Value {
    json!({
        "id": conversation.id,
        "agent": conversation.agent,
        "title": conversation.title,
        "created_at": conversation.created_at.to_rfc3339(),
        "updated_at": conversation.updated_at.to_rfc3339(),
    })
}

pub async fn list_conversations(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    Path(user_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(
            ApiError::invalid_request("`limit` must be between 1 and 1000").with_param("limit"),
        );
    }
    let before = query.before.as_deref().map(parse_cursor).transpose()?;
    let page = runtime
        .store()
        .list_conversations(&user_id, before.as_ref(), limit)
        .await
        .map_err(ApiError::store)?;
    let next = (page.len() as u32 == limit)
        .then(|| {
            page.last()
                .map(|c| format!("{}|{}", c.updated_at.to_rfc3339(), c.id))
        })
        .flatten();
    let data: Vec<Value> = page.iter().map(conversation_json).collect();
    Ok(axum::Json(json!({"object": "list", "data": data, "next": next})).into_response())
}

fn parse_cursor(text: &str) -> Result<ConversationCursor, ApiError> {
    let invalid = || {
        ApiError::invalid_request("`before` is not a cursor this API returned").with_param("before")
    };
    let (time, id) = text.split_once('|').ok_or_else(invalid)?;
    let updated_at = chrono::DateTime::parse_from_rfc3339(time)
        .map_err(|_| invalid())?
        .with_timezone(&Utc);
    Ok(ConversationCursor {
        updated_at,
        id: id.to_string(),
    })
}

pub async fn get_conversation(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    Path((user_id, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let conversation = runtime
        .store()
        .get_conversation(&user_id, &id)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| {
            ApiError::not_found("I couldn't find that conversation. It may have been deleted.")
        })?;
    let messages: Vec<Value> = runtime
        .conversation_history(&user_id, &id)
        .await
        .map_err(ApiError::store)?
        .iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    let mut body = conversation_json(&conversation);
    body["messages"] = Value::Array(messages);
    Ok(axum::Json(body).into_response())
}

pub async fn delete_conversation(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    Path((user_id, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let deleted = runtime
        .store()
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
