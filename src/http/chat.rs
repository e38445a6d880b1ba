//! Per-user chat (seeds/001): `POST /api/{user_id}/chat` continues (or starts) one of the user's
//! conversations: the user's message is stored before the run, the history is loaded from the
//! store, the answer is stored after it, and failures come back as the seeds' friendly messages,
//! never internals. `GET`/`DELETE /api/{user_id}/conversations[/{id}]` read and remove them.

use std::sync::Arc;

use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, ApiJson};
use super::runs::numbered_events;
use super::sse::sse_response;
use crate::agent::{AgentResult, ExitReason, SamplingParams, SessionRequest};
use crate::config::AgentSpec;
use crate::llm::ChatMessage;
use crate::runtime::{RunHandle, Runtime};
use crate::store::{Conversation, ConversationCursor, NewConversation, NewMessage, StoredMessage};
use crate::telemetry::GaugeGuard;

/// Messages of history loaded for a run (the newest ones).
const HISTORY_LIMIT: u32 = 1000;
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
    if runtime.draining.is_cancelled() {
        return Err(ApiError::shutting_down());
    }
    // Admitted before anything is stored: a refused request leaves no trace.
    let slot = runtime.admission.admit().await.map_err(ApiError::from)?;
    let conversation = open_conversation(
        &runtime,
        &user_id,
        &agent,
        body.conversation_id.as_deref(),
        &body.message,
    )
    .await?;
    let history = load_history(&runtime, &user_id, &conversation.id).await?;
    let user_message = NewMessage::from_chat(&ChatMessage::user(body.message.clone()), Utc::now());
    runtime
        .store
        .append_messages(&user_id, &conversation.id, &[user_message])
        .await
        .map_err(ApiError::store)?;
    let run_id = uuid::Uuid::now_v7().to_string();
    let request = SessionRequest {
        run_id: run_id.clone(),
        agent,
        prompt: body.message,
        history,
        overrides: SamplingParams::default(),
        conversation_id: Some(conversation.id.clone()),
        format: None,
        schema: None,
        user_id: Some(user_id.clone()),
        transport: None,
        parent: None,
    };
    let handle = runtime.spawn_admitted(slot, request, Some(user_id.clone()));
    let RunHandle {
        events,
        control,
        result,
        ..
    } = handle;
    let save = tokio::spawn(save_answer(
        runtime.clone(),
        user_id,
        conversation.id.clone(),
        result,
    ));
    let mut response = if body.stream.unwrap_or(false) {
        let guard = GaugeGuard::new(runtime.metrics.sse_streams_active.clone());
        sse_response(
            numbered_events(events, control, runtime.config.server.on_disconnect, guard),
            &runtime.config.server,
        )
    } else {
        drop(events);
        let _cancel_on_drop = control.abort.drop_guard();
        let result = save.await.ok().flatten().ok_or_else(ApiError::internal)?;
        axum::Json(chat_response(&conversation.id, &result)).into_response()
    };
    for (name, value) in [
        ("x-agentd-run-id", run_id),
        ("x-agentd-conversation-id", conversation.id),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    Ok(response)
}

fn chat_agent(
    runtime: &Runtime,
    caller: &Caller,
    requested: Option<&str>,
) -> Result<Arc<AgentSpec>, ApiError> {
    let name = requested.unwrap_or(DEFAULT_AGENT);
    let agent = runtime.agents.get(name).ok_or_else(|| {
        ApiError::not_found(format!("No agent named `{name}`; name one with `agent`"))
            .with_param("agent")
    })?;
    caller.check_agent(&agent.name)?;
    Ok(agent)
}

async fn open_conversation(
    runtime: &Runtime,
    user_id: &str,
    agent: &AgentSpec,
    id: Option<&str>,
    message: &str,
) -> Result<Conversation, ApiError> {
    if let Some(id) = id {
        return runtime
            .store
            .get_conversation(user_id, id)
            .await
            .map_err(ApiError::store)?
            .ok_or_else(|| {
                ApiError::not_found("I couldn't find that conversation. It may have been deleted.")
                    .with_param("conversation_id")
            });
    }
    let title: String = message.trim().chars().take(60).collect();
    let new = NewConversation {
        id: uuid::Uuid::now_v7().to_string(),
        user_id: user_id.to_string(),
        agent: agent.name.clone(),
        title: Some(title),
        created_at: Utc::now(),
    };
    runtime
        .store
        .create_conversation(&new)
        .await
        .map_err(ApiError::store)
}

/// The newest messages of the conversation, oldest first.
async fn load_history(
    runtime: &Runtime,
    user_id: &str,
    conversation_id: &str,
) -> Result<Vec<ChatMessage>, ApiError> {
    let mut stored: Vec<StoredMessage> = Vec::new();
    loop {
        let after = stored.last().map_or(0, |m| m.seq);
        let page = runtime
            .store
            .list_messages(user_id, conversation_id, after, HISTORY_LIMIT)
            .await
            .map_err(ApiError::store)?;
        let done = (page.len() as u32) < HISTORY_LIMIT;
        stored.extend(page);
        if done {
            break;
        }
    }
    let skip = stored.len().saturating_sub(HISTORY_LIMIT as usize);
    Ok(stored[skip..]
        .iter()
        .filter_map(StoredMessage::to_chat)
        .collect())
}

/// Stores the assistant's answer once the run ends, whether or not anyone still listens.
async fn save_answer(
    runtime: Arc<Runtime>,
    user_id: String,
    conversation_id: String,
    result: tokio::sync::oneshot::Receiver<AgentResult>,
) -> Option<AgentResult> {
    let result = result.await.ok()?;
    if result.success {
        let answer =
            NewMessage::from_chat(&ChatMessage::assistant(result.answer_text()), Utc::now());
        if let Err(error) = runtime
            .store
            .append_messages(&user_id, &conversation_id, &[answer])
            .await
        {
            tracing::error!(%error, %conversation_id, "could not store the assistant's answer");
        }
    }
    Some(result)
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
        .store
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
        .store
        .get_conversation(&user_id, &id)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| {
            ApiError::not_found("I couldn't find that conversation. It may have been deleted.")
        })?;
    let messages: Vec<Value> = load_history(&runtime, &user_id, &id)
        .await?
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
        .store
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
