//! Who a request acts for, as several headends check it: a user id in a path (the per-user
//! chat, AG-UI threads, the AI SDK), OpenAI's `user` field (chat completions, Responses), the
//! agent the per-user chat answers with, and the words a failed run is told to end users in.

use std::sync::Arc;

use serde_json::Value;

use crate::agent::ExitReason;
use crate::config::AgentSpec;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::runtime::Runtime;

/// The agent that answers when a request names none.
const DEFAULT_AGENT: &str = "chat";

/// The longest user id accepted in a path.
const MAX_USER_ID_CHARS: usize = 128;

/// A user id is 1 to 128 letters, digits or `. _ @ + : -`, and not `.` or `..`: it names a
/// user's data, so nothing that reads as a path or a control character gets in.
pub fn check_user_id(user_id: &str) -> Result<(), ApiError> {
    let allowed = |c: char| c.is_alphanumeric() || matches!(c, '.' | '_' | '@' | '+' | ':' | '-');
    let length = user_id.chars().count();
    if (1..=MAX_USER_ID_CHARS).contains(&length)
        && user_id.chars().all(allowed)
        && user_id != "."
        && user_id != ".."
    {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "A user id is 1 to {MAX_USER_ID_CHARS} letters, digits or `. _ @ + : -` (and not `.` or `..`)"
    ))
    .with_param("user_id"))
}

pub fn check_user(caller: &Caller, user_id: &str) -> Result<(), ApiError> {
    check_user_id(user_id)?;
    if caller.may_act_for(user_id) {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "You don't have permission to access that user's conversations",
        ))
    }
}

/// The agent a conversation was started with: a continued conversation keeps its agent when
/// the request names none. `None` for a conversation that does not exist (the run then answers
/// 404).
pub async fn conversation_agent(
    runtime: &Runtime,
    user_id: &str,
    conversation_id: &str,
) -> Result<Option<String>, ApiError> {
    let conversation = runtime
        .conversation(user_id, conversation_id)
        .await
        .map_err(ApiError::store)?;
    Ok(conversation.map(|c| c.agent))
}

pub fn chat_agent(
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

/// The seeds/001 user-facing message for a run that failed this way: never internals.
pub fn friendly_failure(exit_reason: ExitReason) -> &'static str {
    match exit_reason {
        ExitReason::RateLimited => {
            "I'm currently experiencing high demand. Please try again in a moment."
        }
        ExitReason::LlmError
        | ExitReason::AuthFailure
        | ExitReason::QuotaExceeded
        | ExitReason::NoLlmResponse
        | ExitReason::OutputTooLarge => {
            "I'm having trouble connecting to my AI service. Please try again."
        }
        ExitReason::MaxTurns | ExitReason::ContextLimit => {
            "I need more time to process this request. Please try breaking it into smaller steps."
        }
        ExitReason::EmptyInput => "I couldn't understand that request. Please try rephrasing.",
        ExitReason::SchemaValidationFailed => {
            "I couldn't put my answer in the requested format. Please try again."
        }
        _ => "An unexpected error occurred. Please try again or contact support.",
    }
}

/// What OpenAI's `user` field makes of the caller: for an admin a user id acts for that user;
/// for a caller that is that user it changes nothing; a caller already acting for a user
/// (`x-agentd-user`) may not name another (400). Anything else — another key's other user, a
/// value that is no user id (clients send end-user tags of their own there), not a string — is
/// only OpenAI's end-user tag: ignored, which the second value says.
pub fn caller_for_user(caller: Caller, user: Option<&Value>) -> Result<(Caller, bool), ApiError> {
    let Some(user) = user.filter(|user| !user.is_null()) else {
        return Ok((caller, false));
    };
    let Some(user) = user.as_str().filter(|user| is_user_id(user)) else {
        let tag = user.as_str().is_none_or(|user| !user.is_empty());
        return Ok((caller, tag));
    };
    if caller.user_id.as_deref() == Some(user) {
        return Ok((caller, false));
    }
    if caller.acted_by.is_some() {
        return Err(ApiError::invalid_request(format!(
            "`user` names another user than `{}`",
            crate::http::auth::ACT_FOR_HEADER
        ))
        .with_param("user"));
    }
    if caller.admin {
        return Ok((caller.act_for(user, "user")?, false));
    }
    Ok((caller, true))
}

/// Whether `user` could name a user (what `x-agentd-user` would accept).
fn is_user_id(user: &str) -> bool {
    check_user_id(user).is_ok() && crate::config::owner::check_user_id(user).is_ok()
}
